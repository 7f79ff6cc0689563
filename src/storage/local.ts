import { copyFile, mkdir, stat } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { InputUnreadableError, StorageDeniedError } from '../lib/errors.ts';
import { checkedObjectKey } from '../lib/object-path.ts';
import type { FetchedInput, InputSource, ObjectStore, Published, PutBody, PutOptions } from './types.ts';

/** Outputs in a local folder: `mediaplane transcode --out DIR` (and tests). */
export class LocalDirStore implements ObjectStore {
  readonly description: string;
  readonly #root: string;

  constructor(root: string) {
    this.#root = path.resolve(root);
    this.description = `folder ${this.#root}`;
  }

  async check(): Promise<void> {
    try {
      await mkdir(this.#root, { recursive: true });
    } catch (err) {
      throw new StorageDeniedError(`cannot create the output folder ${this.#root}`, { cause: err });
    }
  }

  async put(key: string, body: PutBody, opts: PutOptions): Promise<void> {
    // The path rule first (issue #15), then the folder check as a second line of defence.
    const dest = path.resolve(this.#root, checkedObjectKey(key));
    if (!dest.startsWith(this.#root + path.sep))
      throw new StorageDeniedError(`output key ${key} leaves the output folder`);
    await mkdir(path.dirname(dest), { recursive: true });
    if ('file' in body) await copyFile(body.file, dest);
    else await pipeline(body.stream, createWriteStream(dest), { signal: opts.signal });
  }

  async close(): Promise<Published> {
    return {};
  }

  async discard(): Promise<void> {}
}

/** A local file input (CLI only: the API never reads the server's own disk). Not copied. */
export class FileInput implements InputSource {
  readonly description: string;
  readonly #path: string;

  constructor(file: string) {
    this.#path = path.resolve(file);
    this.description = this.#path;
  }

  async fetch(): Promise<FetchedInput> {
    try {
      const s = await stat(this.#path);
      if (!s.isFile()) throw new Error('not a file');
      return { path: this.#path, size: s.size };
    } catch (err) {
      throw new InputUnreadableError(`cannot read the input file ${this.#path}`, { cause: err });
    }
  }
}
