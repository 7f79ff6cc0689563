import { join } from 'node:path';
import type { Readable } from 'node:stream';
import {
  BadRequestError,
  MediaplaneError,
  NotFoundError,
  PayloadTooLargeError,
  ValidationError,
} from '../lib/errors.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import { assetPrefix, assetSourceKey } from './keys.ts';
import { type StagedUpload, type StagingArea, UploadOffsetError } from './staging/area.ts';
import { BucketStagingArea } from './staging/bucket.ts';
import { FolderStagingArea } from './staging/folder.ts';
import type { StagedBytes, UploadGrant, UploadSessions } from './types.ts';

export { type StagedUpload, type StagingArea, UploadOffsetError } from './staging/area.ts';
export { BucketStagingArea } from './staging/bucket.ts';
export { FolderStagingArea } from './staging/folder.ts';

// Uploads not yet whole (issue #27): their bytes wait in a StagingArea (staging/area.ts) until
// the last one is in, then complete() makes them the asset's source and queues its task. The
// area is a folder in the data directory (one process's), or the built-in store's bucket when
// that is S3-protocol (any process's): stagingAreaFor below.
//
// What an owner's unfinished uploads may hold at once is counted in the database
// (StagedBytes, MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER): an owner's uploads may land on
// any API process. An upload reserves its declared length before its first byte is written;
// one of unknown length (a streamed direct PUT) reserves ahead of its bytes in steps of
// STAGE_STEP, and stops when the next step does not fit.

/** A writer stopped because a newer request for the same upload took over (as tus servers lock). */
class TakenOverError extends MediaplaneError {
  readonly code = 'upload_taken_over';
  readonly statusCode = 409;
}

/** The request holding an upload now: a newer one aborts it and waits until it has let go. */
interface Holder {
  abort: AbortController;
  done: Promise<void>;
}

// Asset ids are UUIDs; anything else never names an upload.
const SAFE_ID = /^[A-Za-z0-9_-]{1,100}$/;
/** How far a streamed upload reserves ahead of its bytes: one database transaction per 64 MiB received. */
const STAGE_STEP = 64 * 1024 * 1024;

/**
 * Where this process stages uploads: in the built-in store's bucket when it has multipart
 * uploads (an S3-protocol store, MEDIAPLANE_STORE_URL), so any API process takes any request
 * of an upload; else in `<dataDir>/uploads`. The bucket kind spools each request's bytes in
 * `<dataDir>/upload-spool` while it lasts.
 */
export function stagingAreaFor(store: BuiltinStore, dataDir: string): StagingArea {
  if (store.multipart)
    return new BucketStagingArea({ store, multipart: store.multipart, scratch: join(dataDir, 'upload-spool') });
  return new FolderStagingArea(join(dataDir, 'uploads'), store);
}

export class UploadStaging {
  /** MEDIAPLANE_UPLOAD_MAX_BYTES: no upload grows past it. */
  readonly maxBytes: number;
  readonly #area: StagingArea;
  readonly #store: BuiltinStore;
  readonly #allowance: StagedBytes;
  readonly #sessions: Pick<UploadSessions, 'finish'>;
  readonly #holders = new Map<string, Holder>();

  /**
   * `area`: where the bytes wait; `store`: the built-in store the whole upload goes into;
   * `allowance`: the owners' allowance of staged bytes and `sessions`: the uploads' side in the
   * database (both AssetStore in the service).
   */
  constructor(o: {
    area: StagingArea;
    store: BuiltinStore;
    maxBytes: number;
    allowance: StagedBytes;
    sessions: Pick<UploadSessions, 'finish'>;
  }) {
    this.#area = o.area;
    this.#store = o.store;
    this.maxBytes = o.maxBytes;
    this.#allowance = o.allowance;
    this.#sessions = o.sessions;
  }

  /**
   * Starts the upload of `grant`'s asset anew, empty, `length` bytes long when it says (tus
   * creation). Bytes staged before for the asset are dropped: a client that resumes asks for
   * the offset (HEAD) instead of creating again. A declared length is reserved of the owner's
   * allowance first (StagedBytesLimitError when it does not fit: nothing changes).
   */
  async create(grant: UploadGrant, o: { length?: number | undefined }): Promise<void> {
    if (o.length !== undefined) this.#checkSize(o.length);
    return this.#exclusive(grant.assetId, async () => {
      const length = o.length ?? 0;
      if (length > 0) await this.#allowance.stage(grant.assetId, { atLeast: length, atMost: length });
      else await this.#allowance.unstage(grant.assetId);
      await this.#area.create(grant, { length: o.length, expiresAt: grant.expiresAt });
    });
  }

  /**
   * Where the upload stands, or undefined when nothing is staged for the asset. A request still
   * writing to it in this process is stopped first (it is a stale connection when a client asks
   * where to resume).
   */
  status(assetId: string): Promise<StagedUpload | undefined> {
    return this.#exclusive(assetId, () => this.#area.status(assetId));
  }

  /**
   * Appends `stream` to the upload, which must stand at `expectedOffset` (UploadOffsetError
   * otherwise). `length`, the request's Content-Length when it has one, is checked before a
   * byte is read; a body growing past the declared length or maxBytes, or (without a declared
   * length) past what the owner's allowance has room for, stops with a PayloadTooLargeError
   * and none of its bytes kept. A body cut off keeps what arrived, so the
   * client resumes from there. The stream is left open when it is refused (so the caller can
   * answer on its connection), and destroyed when `signal` aborts or a newer request takes over.
   */
  append(
    assetId: string,
    stream: Readable,
    o: { expectedOffset: number; length?: number | undefined; signal?: AbortSignal | undefined },
  ): Promise<StagedUpload> {
    return this.#exclusive(assetId, async (takenOver) => {
      const now = await this.#area.status(assetId);
      if (!now) throw new NotFoundError();
      if (now.offset !== o.expectedOffset)
        throw new UploadOffsetError(`Upload-Offset is ${o.expectedOffset} but the upload stands at ${now.offset}`);
      const limit = Math.min(this.maxBytes, now.length ?? this.maxBytes);
      if (o.length !== undefined && now.offset + o.length > limit)
        throw new PayloadTooLargeError(`the upload would pass its ${limit} bytes`);
      const signal = o.signal ? AbortSignal.any([o.signal, takenOver]) : takenOver;
      // A declared length was reserved whole at creation; otherwise the bytes reserve as they come.
      const reserve =
        now.length === undefined
          ? (end: number) => this.#allowance.stage(assetId, { atLeast: end, atMost: Math.min(limit, end + STAGE_STEP) })
          : undefined;
      const offset = await this.#write(assetId, stream, { from: now, limit, signal, reserve });
      return { ...now, offset };
    });
  }

  /**
   * A direct upload (a PUT of the whole file): staged from the first byte, `length` long when
   * the request says. Nothing is kept when it fails; the caller then calls complete().
   */
  async put(
    grant: UploadGrant,
    stream: Readable,
    o: { length?: number | undefined; signal?: AbortSignal | undefined },
  ): Promise<void> {
    try {
      await this.create(grant, { length: o.length });
      await this.append(grant.assetId, stream, { expectedOffset: 0, ...o });
    } catch (err) {
      await this.remove(grant.assetId).catch(() => {});
      throw err;
    }
  }

  /**
   * The upload is whole: its bytes become the asset's source in the built-in store and its
   * task is queued (`sessions.finish`). False when the upload can no longer finish (it expired,
   * or its asset was deleted meanwhile): then the stored file goes too.
   */
  complete(grant: UploadGrant): Promise<boolean> {
    return this.#exclusive(grant.assetId, async () => {
      const now = await this.#area.status(grant.assetId);
      if (!now) throw new NotFoundError();
      if (now.length !== undefined && now.offset !== now.length)
        throw new ValidationError(`the upload has ${now.offset} of its ${now.length} bytes`);
      await this.#area.store(grant.assetId, assetSourceKey(grant.playbackId));
      const finished = await this.#sessions.finish(grant.assetId, now.offset);
      if (!finished) await this.#store.removePrefix(assetPrefix(grant.playbackId));
      return finished;
    });
  }

  /**
   * Frees what is staged for the asset, and what it held of its owner's allowance, stopping a
   * request that is writing to it; nothing staged is no error.
   */
  remove(assetId: string): Promise<void> {
    return this.#exclusive(assetId, async () => {
      await this.#area.drop(assetId);
      await this.#allowance.unstage(assetId);
    });
  }

  /**
   * Frees at most `limit` uploads whose URL expired (`now` past their record's expiry): every
   * upload ends by then (finished, failed or expired), so their bytes can only be leftovers (an
   * asset deleted while uploading, a crash between the store and the database). Returns how
   * many went.
   */
  async removeStale(limit: number, now = new Date()): Promise<number> {
    return this.#removeIdle(await this.#idleIds(), limit, async (id) => {
      const expiry = await this.#area.expiry(id);
      // No record beside the bytes (or a half-written one): a crash mid-create or mid-remove.
      if (expiry && expiry.getTime() >= now.getTime()) return false;
      await this.#area.drop(id);
      return true;
    });
  }

  /**
   * Frees at most `limit` staged uploads that `ended` (UploadSessions.ended) says can take no
   * more bytes, their asset deleted or failed meanwhile (by a request to any process), and
   * what they held of their owner's allowance. Returns how many went.
   */
  async removeEnded(limit: number, ended: (assetIds: string[]) => Promise<string[]>): Promise<number> {
    const gone = new Set(await ended(await this.#idleIds()));
    return this.#removeIdle(gone, limit, async (id) => {
      // Still there: an upload taken meanwhile and finished leaves nothing to drop.
      if (!(await this.#area.status(id))) return false;
      await this.#area.drop(id);
      await this.#allowance.unstage(id);
      return true;
    });
  }

  /** The uploads staged that no request of this process holds now. */
  async #idleIds(): Promise<string[]> {
    return (await this.#area.ids()).filter((id) => !this.#holders.has(id));
  }

  /** Runs `drop` on at most `limit` of `ids` that drops one, each holding its upload; how many it dropped. */
  async #removeIdle(ids: Iterable<string>, limit: number, drop: (id: string) => Promise<boolean>): Promise<number> {
    let removed = 0;
    for (const id of ids) {
      if (removed >= limit) break;
      // An upload a request holds is alive; one that a request takes meanwhile is waited for.
      if (this.#holders.has(id)) continue;
      if (await this.#exclusive(id, () => drop(id), { takeOver: false })) removed++;
    }
    return removed;
  }

  #checkSize(length: number): void {
    if (length > this.maxBytes)
      throw new PayloadTooLargeError(`the upload is larger than the ${this.maxBytes} bytes allowed`);
  }

  /**
   * Runs `work` holding the asset's upload: a request holding it is aborted first and waited
   * for, so the newest request wins (tusd does the same) and a stale connection never blocks a
   * client that resumes (the sweep waits instead: `takeOver: false`). Within this process
   * only; across processes the bucket kind checks the offset again before it changes the bucket.
   */
  async #exclusive<T>(
    assetId: string,
    work: (takenOver: AbortSignal) => Promise<T>,
    o: { takeOver?: boolean } = {},
  ): Promise<T> {
    if (!SAFE_ID.test(assetId)) throw new NotFoundError();
    for (let h = this.#holders.get(assetId); h; h = this.#holders.get(assetId)) {
      if (o.takeOver !== false) h.abort.abort(new TakenOverError('a newer request for this upload took over'));
      await h.done;
    }
    const { promise, resolve } = Promise.withResolvers<void>();
    const holder: Holder = { abort: new AbortController(), done: promise };
    this.#holders.set(assetId, holder);
    try {
      return await work(holder.abort.signal);
    } finally {
      if (this.#holders.get(assetId) === holder) this.#holders.delete(assetId);
      resolve();
    }
  }

  /**
   * Streams `stream` into the area after `o.from`; past `limit` the bytes of this request are
   * taken back. An abort destroys `stream`: a stale connection may never send another byte, and
   * only its end lets go of the upload. `reserve(end)`, when given, is asked for room before the
   * bytes up to `end` are written and answers how far they may go (or throws). The new offset.
   */
  async #write(
    assetId: string,
    stream: Readable,
    o: {
      from: StagedUpload;
      limit: number;
      signal: AbortSignal;
      reserve?: ((end: number) => Promise<number>) | undefined;
    },
  ): Promise<number> {
    const onAbort = () => stream.destroy(o.signal.reason instanceof Error ? o.signal.reason : undefined);
    if (o.signal.aborted) onAbort();
    o.signal.addEventListener('abort', onAbort, { once: true });
    try {
      return await this.#area.append(assetId, o.from, limited(stream, { start: o.from.offset, ...o }));
    } catch (err) {
      // The client went away (or its body broke off): its mistake or its network, not ours.
      if (!(err instanceof MediaplaneError) && stream.errored)
        throw new BadRequestError('the upload broke off before its end; ask for the offset and resume', { cause: err });
      throw err;
    } finally {
      o.signal.removeEventListener('abort', onAbort);
    }
  }
}

/**
 * The chunks of `stream`, stopped by a PayloadTooLargeError past `limit` and, with `reserve`,
 * reserving room before they pass what is reserved. Read without destroying the request when
 * the limit stops it, so it can still be answered (413) on its connection. Counting needs no
 * copy: the chunks pass through as they came.
 */
async function* limited(
  stream: Readable,
  o: { start: number; limit: number; reserve?: ((end: number) => Promise<number>) | undefined },
): AsyncGenerator<Buffer> {
  let end = o.start;
  // The bytes already staged were reserved when they came.
  let reserved = o.start;
  for await (const chunk of stream.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    end += chunk.length;
    if (end > o.limit) throw new PayloadTooLargeError(`the upload would pass its ${o.limit} bytes`);
    if (o.reserve && end > reserved) reserved = await o.reserve(end);
    yield chunk;
  }
}
