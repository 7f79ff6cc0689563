import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { StorageDeniedError } from '../../lib/errors.ts';
import { checkedObjectKey } from '../../lib/object-path.ts';
import { FileInput } from '../local.ts';
import { writeFileRange } from './file-body.ts';
import type { InputSource, ObjectStore, Published, PutBody, PutOptions } from '../types.ts';
import type { BuiltinStore, ByteRange, StoredObject } from './types.ts';

/**
 * The built-in store as a folder (`<dataDir>/media`), the embedded default. Every file is
 * written beside its place (`.partial/` under the root, so on the same filesystem) and renamed
 * into it once whole: a reader never sees half a file.
 */
export class FolderStore implements BuiltinStore {
  readonly description: string;
  readonly #root: string;
  readonly #partial: string;

  constructor(root: string) {
    this.#root = path.resolve(root);
    this.#partial = path.join(this.#root, '.partial');
    this.description = `folder ${this.#root}`;
  }

  /** The file of `key`; the path rule first (issue #15), then the folder check as a second line of defence. */
  #file(key: string): string {
    const file = path.resolve(this.#root, checkedObjectKey(key));
    if (!file.startsWith(this.#root + path.sep) || file.startsWith(this.#partial + path.sep))
      throw new StorageDeniedError(`key ${key} leaves the store's folder`);
    return file;
  }

  /** Writes `fill`'s file beside `key`'s place, then renames it there. */
  async #place(key: string, fill: (tmp: string) => Promise<void>): Promise<void> {
    const dest = this.#file(key);
    await mkdir(this.#partial, { recursive: true });
    const tmp = path.join(this.#partial, randomUUID());
    try {
      await fill(tmp);
      await mkdir(path.dirname(dest), { recursive: true });
      await rename(tmp, dest);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  writer(prefix: string): ObjectStore {
    return {
      description: `${this.description} under ${prefix}`,
      check: async () => {},
      put: (key: string, body: PutBody, opts: PutOptions) =>
        this.#place(prefix + key, async (tmp) => {
          if ('file' in body) await copyFile(body.file, tmp);
          else await pipeline(body.stream, createWriteStream(tmp), { signal: opts.signal });
        }),
      close: async (): Promise<Published> => ({}),
      discard: async () => {},
    };
  }

  async stat(key: string): Promise<StoredObject | undefined> {
    let file: string;
    try {
      file = this.#file(key);
    } catch {
      return undefined;
    }
    const s = await stat(file).catch(() => undefined);
    if (!s?.isFile()) return undefined;
    // Files are written once (renamed in whole), so size and mtime identify the content.
    return {
      size: s.size,
      etag: `"${s.size.toString(16)}-${Math.floor(s.mtimeMs).toString(16)}"`,
      lastModified: s.mtime,
    };
  }

  async read(key: string, range?: ByteRange): Promise<Readable> {
    return createReadStream(this.#file(key), range ? { start: range.start, end: range.end } : {});
  }

  writeTo(key: string, range: ByteRange, out: Writable): Promise<void> {
    return writeFileRange(this.#file(key), range, out);
  }

  async putFile(
    key: string,
    file: string,
    o: { contentType: string; signal: AbortSignal; move?: boolean },
  ): Promise<void> {
    if (o.move) {
      const dest = this.#file(key);
      await mkdir(path.dirname(dest), { recursive: true });
      try {
        await rename(file, dest);
        return;
      } catch (err) {
        // Another filesystem: copied below.
        if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
      }
    }
    await this.#place(key, (tmp) => copyFile(file, tmp));
  }

  input(key: string): InputSource {
    return new FileInput(this.#file(key));
  }

  async removePrefix(prefix: string): Promise<void> {
    const dir = this.#file(prefix.replace(/\/+$/, ''));
    await rm(dir, { recursive: true, force: true });
  }
}
