import { createWriteStream } from 'node:fs';
import { readdir, readFile, rename, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  BadRequestError,
  MediaplaneError,
  NotFoundError,
  PayloadTooLargeError,
  StorageDeniedError,
  ValidationError,
} from '../lib/errors.ts';
import { ensurePrivateDir } from '../lib/private-dir.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import { assetPrefix, assetSourceKey } from './keys.ts';
import type { StagedBytes, UploadGrant, UploadSessions } from './types.ts';

// Uploads not yet whole (issue #27): `<dir>/<assetId>` holds the bytes received so far, so the
// offset of a tus upload is that file's size and survives a dropped connection or a restart of
// the service; `<dir>/<assetId>.json` (the sidecar) keeps what the file cannot say: the length
// declared at creation (tus Upload-Length) and when the upload URL expires, so stale bytes can
// be found and freed by a sweep without asking the database. The folder lives in this
// process's data directory: with several API processes, one upload's requests must reach the
// same one (a sticky route by the upload URL's path).
//
// What an owner's unfinished uploads may hold at once is counted in the database instead
// (StagedBytes, MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER): each process has its own
// folder, but an owner's uploads may land on any of them. An upload reserves its declared
// length before its first byte is written; one of unknown length (a streamed direct PUT)
// reserves ahead of its bytes in steps of STAGE_STEP, and stops when the next step does not fit.

/** A tus PATCH whose Upload-Offset is not where the upload stands (tus 1.0: 409 Conflict). */
export class UploadOffsetError extends MediaplaneError {
  readonly code = 'upload_offset_mismatch';
  readonly statusCode = 409;
}

/** A writer stopped because a newer request for the same upload took over (as tus servers lock). */
class TakenOverError extends MediaplaneError {
  readonly code = 'upload_taken_over';
  readonly statusCode = 409;
}

/** An upload as staged: bytes received, the length declared at creation (none for a direct PUT), expiry. */
export interface StagedUpload {
  offset: number;
  length: number | undefined;
  expiresAt: Date;
}

interface Sidecar {
  length: number | null;
  expiresAt: string;
}

/** The request holding an upload now: a newer one aborts it and waits until it has let go. */
interface Holder {
  abort: AbortController;
  done: Promise<void>;
}

// Asset ids are UUIDs; anything else never names a file here.
const SAFE_ID = /^[A-Za-z0-9_-]{1,100}$/;
const NEVER = new AbortController().signal;
/** How far a streamed upload reserves ahead of its bytes: one database transaction per 64 MiB received. */
const STAGE_STEP = 64 * 1024 * 1024;

export class UploadStaging {
  /** MEDIAPLANE_UPLOAD_MAX_BYTES: no upload grows past it. */
  readonly maxBytes: number;
  readonly #dir: string;
  readonly #store: BuiltinStore;
  readonly #allowance: StagedBytes;
  readonly #holders = new Map<string, Holder>();
  #ready: Promise<void> | undefined;

  /** `allowance`: the owners' allowance of staged bytes (AssetStore in the service). */
  constructor(o: { dir: string; store: BuiltinStore; maxBytes: number; allowance: StagedBytes }) {
    this.#dir = o.dir;
    this.#store = o.store;
    this.maxBytes = o.maxBytes;
    this.#allowance = o.allowance;
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
      const sidecar: Sidecar = { length: o.length ?? null, expiresAt: grant.expiresAt.toISOString() };
      // The sidecar first: a data file never lacks one, so the sweep can always judge it.
      const tmp = `${this.#sidecar(grant.assetId)}.tmp`;
      await writeFile(tmp, JSON.stringify(sidecar), { mode: 0o600 });
      await rename(tmp, this.#sidecar(grant.assetId));
      await writeFile(this.#data(grant.assetId), '', { mode: 0o600 });
    });
  }

  /**
   * Where the upload stands, or undefined when nothing is staged for the asset. A request still
   * writing to it is stopped first (it is a stale connection when a client asks where to resume).
   */
  status(assetId: string): Promise<StagedUpload | undefined> {
    return this.#exclusive(assetId, () => this.#status(assetId));
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
      const now = await this.#status(assetId);
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
      await this.#write(this.#data(assetId), stream, { start: now.offset, limit, signal, reserve });
      return { ...now, offset: await this.#size(assetId) };
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
   * Moves the whole upload into the built-in store at the asset's source key and queues its
   * task (`sessions.finish`). False when the upload can no longer finish (it expired, or its
   * asset was deleted meanwhile): then the stored file goes too.
   */
  complete(grant: UploadGrant, sessions: Pick<UploadSessions, 'finish'>): Promise<boolean> {
    return this.#exclusive(grant.assetId, async () => {
      const now = await this.#status(grant.assetId);
      if (!now) throw new NotFoundError();
      if (now.length !== undefined && now.offset !== now.length)
        throw new ValidationError(`the upload has ${now.offset} of its ${now.length} bytes`);
      // Not tied to the request: a client that leaves now has sent every byte.
      const file = this.#data(grant.assetId);
      const key = assetSourceKey(grant.playbackId);
      await this.#store.putFile(key, file, { move: true, contentType: 'application/octet-stream', signal: NEVER });
      await this.#drop(grant.assetId);
      const finished = await sessions.finish(grant.assetId, now.offset);
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
      await this.#drop(assetId);
      await this.#allowance.unstage(assetId);
    });
  }

  /**
   * Frees at most `limit` uploads whose URL expired (`now` past their sidecar's expiry): every
   * upload ends by then (finished, failed or expired), so their bytes can only be leftovers (an
   * asset deleted while uploading, a crash between the store and the database). Returns how
   * many went.
   */
  async removeStale(limit: number, now = new Date()): Promise<number> {
    return this.#removeIdle(await this.#idleIds(), limit, async (id) => {
      if (!(await this.#isStale(id, now))) return false;
      await this.#drop(id);
      return true;
    });
  }

  /**
   * Frees at most `limit` uploads staged here that `ended` (UploadSessions.ended) says can take
   * no more bytes, their asset deleted or failed meanwhile (by a request to any process), and
   * what they held of their owner's allowance. Returns how many went.
   */
  async removeEnded(limit: number, ended: (assetIds: string[]) => Promise<string[]>): Promise<number> {
    const gone = new Set(await ended(await this.#idleIds()));
    return this.#removeIdle(gone, limit, async (id) => {
      // Still there: an upload taken meanwhile and finished leaves nothing to drop.
      if (!(await this.#status(id))) return false;
      await this.#drop(id);
      await this.#allowance.unstage(id);
      return true;
    });
  }

  /** The uploads staged in the folder that no request holds now. */
  async #idleIds(): Promise<string[]> {
    const names = await readdir(this.#dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    const ids = new Set(names.map((n) => n.replace(/\.json(\.tmp)?$/, '')).filter((id) => SAFE_ID.test(id)));
    return [...ids].filter((id) => !this.#holders.has(id));
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

  async #isStale(assetId: string, now: Date): Promise<boolean> {
    const sidecar = await this.#readSidecar(assetId);
    // No sidecar beside a data file (or a half-written one): a crash mid-create or mid-remove.
    if (!sidecar) return true;
    return new Date(sidecar.expiresAt).getTime() < now.getTime();
  }

  #checkSize(length: number): void {
    if (length > this.maxBytes)
      throw new PayloadTooLargeError(`the upload is larger than the ${this.maxBytes} bytes allowed`);
  }

  /**
   * Runs `work` holding the asset's upload: a request holding it is aborted first and waited
   * for, so the newest request wins (tusd does the same) and a stale connection never blocks a
   * client that resumes (the sweep waits instead: `takeOver: false`). Within this process
   * only: the staging folder is this process's.
   */
  async #exclusive<T>(
    assetId: string,
    work: (takenOver: AbortSignal) => Promise<T>,
    o: { takeOver?: boolean } = {},
  ): Promise<T> {
    if (!SAFE_ID.test(assetId)) throw new NotFoundError();
    await this.#folder();
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

  /** The staging folder, made private (0700, as the data dir) on first use; tried again after a failure. */
  #folder(): Promise<void> {
    if (!this.#ready)
      this.#ready = ensurePrivateDir(this.#dir).catch((err: unknown) => {
        this.#ready = undefined;
        throw err;
      });
    return this.#ready;
  }

  /**
   * Streams `stream` into `file` from `start`; past `limit` the bytes of this request are taken
   * back. An abort destroys `stream`: a stale connection may never send another byte, and only
   * its end lets go of the upload. `reserve(end)`, when given, is asked for room before the
   * bytes up to `end` are written and answers how far they may go (or throws).
   */
  async #write(
    file: string,
    stream: Readable,
    o: {
      start: number;
      limit: number;
      signal: AbortSignal;
      reserve?: ((end: number) => Promise<number>) | undefined;
    },
  ) {
    const out = createWriteStream(file, { flags: 'r+', start: o.start });
    const onAbort = () => stream.destroy(o.signal.reason instanceof Error ? o.signal.reason : undefined);
    if (o.signal.aborted) onAbort();
    o.signal.addEventListener('abort', onAbort, { once: true });
    let end = o.start;
    // The bytes already staged were reserved when they came.
    let reserved = o.start;
    const reserve = o.reserve;
    try {
      // Read without destroying the request when the limit stops it, so it can still be answered
      // (413) on its connection. Counting needs no copy: the chunks pass through as they came.
      await pipeline(async function* () {
        for await (const chunk of stream.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
          end += chunk.length;
          if (end > o.limit) throw new PayloadTooLargeError(`the upload would pass its ${o.limit} bytes`);
          if (reserve && end > reserved) reserved = await reserve(end);
          yield chunk;
        }
      }, out);
    } catch (err) {
      // The file's size is the offset: wait until every write in flight has landed.
      if (!out.closed) await new Promise<void>((resolve) => out.once('close', () => resolve()));
      if (err instanceof PayloadTooLargeError) await truncate(file, o.start);
      // The client went away (or its body broke off): its mistake or its network, not ours.
      if (!(err instanceof MediaplaneError) && stream.errored)
        throw new BadRequestError('the upload broke off before its end; ask for the offset and resume', { cause: err });
      throw err;
    } finally {
      o.signal.removeEventListener('abort', onAbort);
    }
  }

  async #status(assetId: string): Promise<StagedUpload | undefined> {
    const sidecar = await this.#readSidecar(assetId);
    const size = await this.#size(assetId).catch(() => undefined);
    if (!sidecar || size === undefined) return undefined;
    return { offset: size, length: sidecar.length ?? undefined, expiresAt: new Date(sidecar.expiresAt) };
  }

  async #size(assetId: string): Promise<number> {
    return (await stat(this.#data(assetId))).size;
  }

  async #readSidecar(assetId: string): Promise<Sidecar | undefined> {
    try {
      const s = JSON.parse(await readFile(this.#sidecar(assetId), 'utf8')) as Partial<Sidecar>;
      if (typeof s.expiresAt !== 'string') return undefined;
      return { length: typeof s.length === 'number' ? s.length : null, expiresAt: s.expiresAt };
    } catch {
      return undefined;
    }
  }

  /** The data file first, so a sidecar never goes before the bytes it speaks for. */
  async #drop(assetId: string): Promise<void> {
    await rm(this.#data(assetId), { force: true });
    await rm(`${this.#sidecar(assetId)}.tmp`, { force: true });
    await rm(this.#sidecar(assetId), { force: true });
  }

  #data(assetId: string): string {
    if (!SAFE_ID.test(assetId)) throw new StorageDeniedError('not an asset id');
    return join(this.#dir, assetId);
  }

  #sidecar(assetId: string): string {
    return `${this.#data(assetId)}.json`;
  }
}
