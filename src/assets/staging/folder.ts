import { createWriteStream } from 'node:fs';
import { readdir, readFile, rename, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { PayloadTooLargeError, StorageDeniedError } from '../../lib/errors.ts';
import { ensurePrivateDir } from '../../lib/private-dir.ts';
import type { BuiltinStore } from '../../storage/builtin/index.ts';
import type { UploadGrant } from '../types.ts';
import type { StagedUpload, StagingArea } from './area.ts';

// The folder kind (the embedded default): `<dir>/<assetId>` holds the bytes received so far,
// so the offset of a tus upload is that file's size and survives a dropped connection or a
// restart of the service; `<dir>/<assetId>.json` (the sidecar) keeps what the file cannot say:
// the length declared at creation (tus Upload-Length) and when the upload URL expires, so stale
// bytes can be found and freed by a sweep without asking the database. The folder is this
// process's: with several API processes and this kind, one upload's requests must reach the
// same process (a sticky route by the upload URL's path); the bucket kind lifts that.

interface Sidecar {
  length: number | null;
  expiresAt: string;
}

// Asset ids are UUIDs; anything else never names a file here.
const SAFE_ID = /^[A-Za-z0-9_-]{1,100}$/;
const NEVER = new AbortController().signal;

export class FolderStagingArea implements StagingArea {
  readonly #dir: string;
  readonly #store: BuiltinStore;
  #ready: Promise<void> | undefined;

  /** `store`: the built-in store a whole upload moves into. */
  constructor(dir: string, store: BuiltinStore) {
    this.#dir = dir;
    this.#store = store;
  }

  async create(grant: UploadGrant, record: { length: number | undefined; expiresAt: Date }): Promise<void> {
    await this.#folder();
    const sidecar: Sidecar = { length: record.length ?? null, expiresAt: record.expiresAt.toISOString() };
    // The sidecar first: a data file never lacks one, so the sweep can always judge it.
    const tmp = `${this.#sidecar(grant.assetId)}.tmp`;
    await writeFile(tmp, JSON.stringify(sidecar), { mode: 0o600 });
    await rename(tmp, this.#sidecar(grant.assetId));
    await writeFile(this.#data(grant.assetId), '', { mode: 0o600 });
  }

  async status(assetId: string): Promise<StagedUpload | undefined> {
    const sidecar = await this.#readSidecar(assetId);
    const size = await this.#size(assetId).catch(() => undefined);
    if (!sidecar || size === undefined) return undefined;
    return { offset: size, length: sidecar.length ?? undefined, expiresAt: new Date(sidecar.expiresAt) };
  }

  async append(assetId: string, from: StagedUpload, body: AsyncIterable<Buffer>): Promise<number> {
    const file = this.#data(assetId);
    const out = createWriteStream(file, { flags: 'r+', start: from.offset });
    try {
      await pipeline(body, out);
    } catch (err) {
      // The file's size is the offset: wait until every write in flight has landed.
      if (!out.closed) await new Promise<void>((resolve) => out.once('close', () => resolve()));
      if (err instanceof PayloadTooLargeError) await truncate(file, from.offset);
      throw err;
    }
    return this.#size(assetId);
  }

  async store(assetId: string, key: string): Promise<void> {
    const file = this.#data(assetId);
    // Not tied to the request: a client that leaves now has sent every byte.
    await this.#store.putFile(key, file, { move: true, contentType: 'application/octet-stream', signal: NEVER });
    await this.drop(assetId);
  }

  /** The data file first, so a sidecar never goes before the bytes it speaks for. */
  async drop(assetId: string): Promise<void> {
    await rm(this.#data(assetId), { force: true });
    await rm(`${this.#sidecar(assetId)}.tmp`, { force: true });
    await rm(this.#sidecar(assetId), { force: true });
  }

  async ids(): Promise<string[]> {
    const names = await readdir(this.#dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    const ids = new Set(names.map((n) => n.replace(/\.json(\.tmp)?$/, '')).filter((id) => SAFE_ID.test(id)));
    return [...ids];
  }

  async expiry(assetId: string): Promise<Date | undefined> {
    const sidecar = await this.#readSidecar(assetId);
    return sidecar && new Date(sidecar.expiresAt);
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

  #data(assetId: string): string {
    if (!SAFE_ID.test(assetId)) throw new StorageDeniedError('not an asset id');
    return join(this.#dir, assetId);
  }

  #sidecar(assetId: string): string {
    return `${this.#data(assetId)}.json`;
  }
}
