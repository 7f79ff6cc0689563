import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { StorageDeniedError } from '../../lib/errors.ts';
import { checkedObjectKey } from '../../lib/object-path.ts';
import type { ObjectStore, Published, PutBody, PutOptions } from '../types.ts';
import { publishDirectory, type PublishOptions, type PublishResult } from './publish.ts';
import { validateDwebProof } from './proof.ts';

// The dweb ObjectStore (storage/types.ts): content addressing needs the whole tree before
// there is a root CID, so `put` collects files in a staging folder and `close` publishes it
// as one UnixFS directory and answers `baseUrl: ipfs://<root>` with each file's CID and
// gateway URL (path style) in `files`.

export interface DwebStoreOptions extends Omit<PublishOptions, 'signal'> {
  /** Parent of the staging folder (the job's scratch dir is best); the OS temp dir when absent. */
  stagingParent?: string;
}

export class DwebObjectStore implements ObjectStore {
  readonly description: string;
  readonly #opts: DwebStoreOptions;
  #staging: Promise<string> | undefined;
  /** What `close` published, the root CID among it. */
  published: PublishResult | undefined;

  constructor(opts: DwebStoreOptions) {
    this.#opts = opts;
    this.description = `dweb.storage upload service ${new URL(opts.serviceUrl).origin}`;
  }

  /** The proof is checked again (it may have expired in the queue); nothing is uploaded yet. */
  async check(_signal?: AbortSignal): Promise<void> {
    try {
      await validateDwebProof(this.#opts.proof, { agentDid: this.#opts.agent.did() });
    } catch (err) {
      throw new StorageDeniedError(err instanceof Error ? err.message : 'storage.credentials.proof: refused', {
        cause: err,
      });
    }
  }

  #dir(): Promise<string> {
    this.#staging ??= mkdtemp(join(this.#opts.stagingParent ?? tmpdir(), 'dweb-'));
    return this.#staging;
  }

  async put(key: string, body: PutBody, opts: PutOptions): Promise<void> {
    const root = await this.#dir();
    // The path rule first (issue #15), then the folder check as a second line of defence.
    const dest = resolve(root, checkedObjectKey(key));
    if (!dest.startsWith(root + sep)) throw new StorageDeniedError(`output key ${key} leaves the output directory`);
    await mkdir(dirname(dest), { recursive: true });
    if ('file' in body) await copyFile(body.file, dest);
    else await pipeline(body.stream, createWriteStream(dest), { signal: opts.signal });
  }

  async close(signal: AbortSignal): Promise<Published> {
    const root = await this.#dir();
    try {
      const { stagingParent: _unused, ...publish } = this.#opts;
      this.published = await publishDirectory(root, { ...publish, signal });
      return { baseUrl: `ipfs://${this.published.rootCid}`, files: this.published.files };
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  }

  /** A failed job: the staging folder (a copy of every output so far) goes. */
  async discard(): Promise<void> {
    if (this.#staging) await rm(await this.#staging, { recursive: true, force: true });
  }
}
