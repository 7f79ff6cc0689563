import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { readdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { NotFoundError, PayloadTooLargeError } from '../../lib/errors.ts';
import { ensurePrivateDir } from '../../lib/private-dir.ts';
import type { BuiltinMultipart, BuiltinStore, StoredPart } from '../../storage/builtin/index.ts';
import { assetSourceKey } from '../keys.ts';
import type { UploadGrant } from '../types.ts';
import { type StagedUpload, type StagingArea, UploadOffsetError } from './area.ts';

// The bucket kind: an upload stages in the built-in store's bucket, as tusd's S3 store keeps a
// tus upload, so any API process answers its HEAD and takes its next PATCH. Per upload:
// - a multipart upload at the asset's source key: CompleteMultipartUpload makes the source,
//   with no copy;
// - `uploads/<assetId>/info`: the record (declared length, expiry, the multipart upload's id);
// - `uploads/<assetId>/incomplete`: bytes not yet a part. S3 refuses a part under 5 MiB
//   (EntityTooSmall) unless it is the last, and tus clients send far smaller PATCHes: they
//   wait here until a part's worth has arrived (tusd's `.part` object).
// The offset is what the store says, the parts listed plus the incomplete object, never local
// state. A PATCH's bytes are spooled to a local file for the length of the request (so that
// a body refused halfway leaves the bucket as it was), then sent as parts.
//
// Two requests for one upload on two processes at once are not serialized (a process only
// serializes its own, UploadStaging): each checks the offset again just before it changes the
// bucket, which leaves a window of a few requests to the store. tus clients send one PATCH at
// a time. A multipart upload created just before a crash, whose record was never written, is
// unknown to the sweep: a bucket lifecycle rule (AbortIncompleteMultipartUpload) frees it.

interface UploadRecord {
  length: number | null;
  expiresAt: string;
  /** The asset's source key, where the multipart upload is. */
  key: string;
  uploadId: string;
}

interface State {
  record: UploadRecord;
  parts: StoredPart[];
  /** Bytes in the incomplete object. */
  incomplete: number;
  offset: number;
}

const NEVER = new AbortController().signal;
const SAFE_ID = /^[A-Za-z0-9_-]{1,100}$/;
/**
 * A spool file no request has written to for this long was left by a process that stopped
 * mid-request (a live request's body comes within MEDIAPLANE_UPLOAD_IDLE_TIMEOUT_MS or ends).
 */
const SPOOL_LEFTOVER_MS = 60 * 60_000;
/** The most records one sweep looks at; the rest wait for the next. */
const MAX_LISTED = 10_000;
const folder = (assetId: string) => `uploads/${assetId}`;
const recordKey = (assetId: string) => `${folder(assetId)}/info`;
const incompleteKey = (assetId: string) => `${folder(assetId)}/incomplete`;

export class BucketStagingArea implements StagingArea {
  readonly #store: BuiltinStore;
  readonly #parts: BuiltinMultipart;
  readonly #scratch: string;
  /** What status() read, for the append that follows it in the same request (three requests to the store fewer). */
  readonly #seen = new WeakMap<StagedUpload, State>();
  #ready: Promise<void> | undefined;

  /** `scratch`: a private local folder for the bytes of requests in flight (and nothing else). */
  constructor(o: { store: BuiltinStore; multipart: BuiltinMultipart; scratch: string }) {
    this.#store = o.store;
    this.#parts = o.multipart;
    this.#scratch = o.scratch;
  }

  async create(grant: UploadGrant, record: { length: number | undefined; expiresAt: Date }): Promise<void> {
    await this.drop(grant.assetId);
    const key = assetSourceKey(grant.playbackId);
    const uploadId = await this.#parts.create(key);
    const r: UploadRecord = { length: record.length ?? null, expiresAt: record.expiresAt.toISOString(), key, uploadId };
    await this.#putBytes(recordKey(grant.assetId), Buffer.from(JSON.stringify(r)), 'application/json');
  }

  async status(assetId: string): Promise<StagedUpload | undefined> {
    const s = await this.#state(assetId);
    if (!s) return undefined;
    const staged = { offset: s.offset, length: s.record.length ?? undefined, expiresAt: new Date(s.record.expiresAt) };
    this.#seen.set(staged, s);
    return staged;
  }

  async append(assetId: string, from: StagedUpload, body: AsyncIterable<Buffer>): Promise<number> {
    const state = this.#seen.get(from) ?? (await this.#state(assetId));
    if (!state) throw new NotFoundError();
    if (state.offset !== from.offset) throw moved(from.offset, state.offset);
    const spool = await this.#file();
    try {
      // The incomplete bytes first: the spool is what follows the last part.
      const head = state.incomplete > 0 ? await this.#store.read(incompleteKey(assetId)) : undefined;
      const failure = await this.#spool(spool, head, body);
      const size = (await stat(spool)).size;
      // A body that broke off keeps what arrived (after the incomplete bytes, which all did).
      if (size > state.incomplete) await this.#commit(assetId, state, { file: spool, size });
      if (failure) throw failure.err;
      return state.offset - state.incomplete + size;
    } finally {
      await rm(spool, { force: true });
    }
  }

  async store(assetId: string, key: string): Promise<void> {
    const state = await this.#state(assetId);
    if (!state) throw new NotFoundError();
    if (key !== state.record.key) throw new Error(`the upload of ${assetId} was staged for another key`);
    let parts = state.parts;
    if (state.incomplete > 0) {
      // The last part may be of any size: what waited in the incomplete object goes up as it.
      const file = await this.#file();
      try {
        await pipeline(await this.#store.read(incompleteKey(assetId)), createWriteStream(file));
        await this.#parts.putPart(state.record, nextPart(parts), {
          file,
          start: 0,
          length: state.incomplete,
        });
      } finally {
        await rm(file, { force: true });
      }
      parts = (await this.#parts.parts(state.record)) ?? [];
    }
    if (parts.length > 0) await this.#parts.complete(state.record, parts);
    else {
      // S3 completes no upload without a part: an empty file is an empty object.
      await this.#parts.abort(state.record);
      await this.#putBytes(key, Buffer.alloc(0), 'application/octet-stream');
    }
    await this.#store.removePrefix(folder(assetId));
  }

  /** The multipart upload's parts first, so a record never goes before the bytes it speaks for. */
  async drop(assetId: string): Promise<void> {
    const record = await this.#record(assetId);
    if (record) await this.#parts.abort(record);
    await this.#store.removePrefix(folder(assetId));
  }

  async ids(): Promise<string[]> {
    const keys = await this.#parts.keys('uploads', MAX_LISTED);
    const ids = keys.map((k) => /^uploads\/([^/]+)\//.exec(k)?.[1] ?? '').filter((id) => SAFE_ID.test(id));
    return [...new Set(ids)];
  }

  async expiry(assetId: string): Promise<Date | undefined> {
    const record = await this.#record(assetId);
    return record && new Date(record.expiresAt);
  }

  async #state(assetId: string): Promise<State | undefined> {
    const record = await this.#record(assetId);
    return record && this.#stateOf(assetId, record);
  }

  async #stateOf(assetId: string, record: UploadRecord): Promise<State | undefined> {
    const parts = await this.#parts.parts(record);
    // Completed (its source made) or aborted: nothing is staged any more.
    if (!parts) return undefined;
    const incomplete = (await this.#store.stat(incompleteKey(assetId)))?.size ?? 0;
    const offset = parts.reduce((sum, p) => sum + p.size, 0) + incomplete;
    return { record, parts, incomplete, offset };
  }

  /**
   * Writes the incomplete bytes and then `body` into `spool`. A PayloadTooLargeError is thrown
   * (nothing is kept); any other failure is returned, once every write in flight has landed.
   */
  async #spool(
    spool: string,
    head: Readable | undefined,
    body: AsyncIterable<Buffer>,
  ): Promise<{ err: unknown } | undefined> {
    const out = createWriteStream(spool, { mode: 0o600 });
    try {
      await pipeline(async function* () {
        if (head) yield* head;
        yield* body;
      }, out);
      return undefined;
    } catch (err) {
      if (!out.closed) await new Promise<void>((resolve) => out.once('close', () => resolve()));
      if (err instanceof PayloadTooLargeError) throw err;
      return { err };
    }
  }

  /**
   * Replaces the incomplete object with the spool's bytes: whole parts of partBytes, the rest
   * as the new incomplete object (or as the last part when the upload is then whole). The old
   * incomplete object goes first: a crash after that loses those bytes (the offset goes back
   * and the client sends them again) instead of counting them twice.
   */
  async #commit(assetId: string, state: State, spool: { file: string; size: number }): Promise<void> {
    // The record is the one read before: a new one (the upload created again) has no parts of this one.
    const again = await this.#stateOf(assetId, state.record);
    if (!again || again.offset !== state.offset) throw moved(state.offset, again?.offset);
    const { length } = state.record;
    if (state.incomplete > 0) await this.#parts.remove(incompleteKey(assetId));
    const whole = length !== null && state.offset - state.incomplete + spool.size === length;
    let part = nextPart(state.parts);
    let pos = 0;
    while (pos < spool.size) {
      const left = spool.size - pos;
      const bytes = Math.min(left, this.#parts.partBytes);
      if (bytes === left && bytes < this.#parts.minPartBytes && !whole) break;
      await this.#parts.putPart(state.record, part++, { file: spool.file, start: pos, length: bytes });
      pos += bytes;
    }
    if (pos < spool.size) await this.#putRange(incompleteKey(assetId), spool.file, pos);
  }

  async #record(assetId: string): Promise<UploadRecord | undefined> {
    if (!SAFE_ID.test(assetId)) return undefined;
    let text: string;
    try {
      const chunks: Buffer[] = [];
      for await (const c of await this.#store.read(recordKey(assetId))) chunks.push(c as Buffer);
      text = Buffer.concat(chunks).toString('utf8');
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
    try {
      const r = JSON.parse(text) as Partial<UploadRecord>;
      if (typeof r.expiresAt !== 'string' || typeof r.key !== 'string' || typeof r.uploadId !== 'string')
        return undefined;
      return {
        length: typeof r.length === 'number' ? r.length : null,
        expiresAt: r.expiresAt,
        key: r.key,
        uploadId: r.uploadId,
      };
    } catch {
      return undefined;
    }
  }

  /** Stores `bytes` at `key` (a record, an empty source) through a scratch file. */
  async #putBytes(key: string, bytes: Buffer, contentType: string): Promise<void> {
    const file = await this.#file();
    try {
      await writeFile(file, bytes, { mode: 0o600 });
      await this.#store.putFile(key, file, { move: true, contentType, signal: NEVER });
    } finally {
      await rm(file, { force: true });
    }
  }

  /** Stores `file` from byte `start` on at `key`. */
  async #putRange(key: string, file: string, start: number): Promise<void> {
    const tail = await this.#file();
    try {
      await pipeline(createReadStream(file, { start }), createWriteStream(tail, { mode: 0o600 }));
      await this.#store.putFile(key, tail, { move: true, contentType: 'application/octet-stream', signal: NEVER });
    } finally {
      await rm(tail, { force: true });
    }
  }

  /**
   * A fresh scratch file's name. On first use the folder is made private (0700) and what a
   * stopped process left in it is freed.
   */
  async #file(): Promise<string> {
    if (!this.#ready)
      this.#ready = ensurePrivateDir(this.#scratch)
        .then(() => this.#freeLeftovers())
        .catch((err: unknown) => {
          this.#ready = undefined;
          throw err;
        });
    await this.#ready;
    return join(this.#scratch, randomUUID());
  }

  async #freeLeftovers(): Promise<void> {
    const before = Date.now() - SPOOL_LEFTOVER_MS;
    for (const name of await readdir(this.#scratch)) {
      const file = join(this.#scratch, name);
      const s = await stat(file).catch(() => undefined);
      if (s && s.mtimeMs < before) await rm(file, { force: true });
    }
  }
}

const nextPart = (parts: StoredPart[]): number => (parts.at(-1)?.part ?? 0) + 1;

function moved(expected: number, now: number | undefined): UploadOffsetError {
  return new UploadOffsetError(
    `the upload moved on from ${expected} (now ${now ?? 'gone'}) while this request was taken: ask for the offset and resume`,
  );
}
