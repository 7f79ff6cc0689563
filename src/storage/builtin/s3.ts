import { rm } from 'node:fs/promises';
import { Readable } from 'node:stream';
import {
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  type S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { NotFoundError, StorageDeniedError, UpstreamUnavailableError, type MediaplaneError } from '../../lib/errors.ts';
import { checkedObjectKey, objectPathProblem } from '../../lib/object-path.ts';
import type { DownloadLimits } from '../download.ts';
import { S3InputSource } from '../s3-input.ts';
import { S3ObjectStore, type S3StoreOptions } from '../s3-store.ts';
import { s3Client, s3Failure } from '../s3.ts';
import type { InputSource, ObjectStore, S3Location } from '../types.ts';
import { S3Parts } from './s3-parts.ts';
import type { BuiltinMultipart, BuiltinStore, ByteRange, StoredObject } from './types.ts';

export interface S3BuiltinStoreOptions {
  location: S3Location;
  /** Every key is stored under it (MEDIAPLANE_STORE_URL's path): '' or a folder ending with `/`. */
  prefix: string;
  maxAttempts: number;
  partSizeBytes: number;
  /** A job's download of a stored object (`input`). */
  inputLimits: DownloadLimits;
}

/**
 * The built-in store as an S3-protocol bucket (MEDIAPLANE_STORE_URL), for workers on several
 * machines. Writing is storage's S3ObjectStore under the store's prefix (PutObject, multipart
 * from file ranges above one part): an object appears whole or not at all.
 */
export class S3BuiltinStore implements BuiltinStore {
  readonly description: string;
  readonly #loc: S3Location;
  readonly #prefix: string;
  readonly #storeOpts: S3StoreOptions;
  readonly #inputLimits: DownloadLimits;
  readonly #client: S3Client;
  /** putFile's uploads; never closed: it lives as long as the store. */
  readonly #uploads: S3ObjectStore;
  readonly multipart: BuiltinMultipart;

  constructor(o: S3BuiltinStoreOptions) {
    this.#loc = o.location;
    this.#prefix = o.prefix;
    // The endpoint is the operator's setting, not a client's: a MinIO on this host or the
    // private network is the usual case, so the private-address guard (issue #15) is off.
    this.#storeOpts = { maxAttempts: o.maxAttempts, partSizeBytes: o.partSizeBytes, allowPrivate: true };
    this.#inputLimits = o.inputLimits;
    this.#client = s3Client(o.location, { maxAttempts: o.maxAttempts, allowPrivate: true });
    this.#uploads = new S3ObjectStore(o.location, this.#storeOpts);
    const under = o.prefix ? ` under "${o.prefix}"` : '';
    this.description = `s3 bucket "${o.location.bucket}" at ${o.location.endpoint}${under}`;
    this.multipart = new S3Parts({
      client: this.#client,
      bucket: o.location.bucket,
      full: (key) => this.#full(key),
      prefix: o.prefix,
      partBytes: o.partSizeBytes,
      explain: (err) => this.#explain(err),
    });
  }

  /** The bucket's key of a store key; the path rule is asserted on every key (issue #15). */
  #full(key: string): string {
    return this.#prefix + checkedObjectKey(key);
  }

  writer(prefix: string): ObjectStore {
    // One S3ObjectStore per job: its close() (or discard()) frees its own client.
    return underPrefix(new S3ObjectStore(this.#loc, this.#storeOpts), this.#prefix + prefix);
  }

  async stat(key: string): Promise<StoredObject | undefined> {
    if (objectPathProblem(key)) return undefined;
    try {
      const head = await this.#client.send(new HeadObjectCommand({ Bucket: this.#loc.bucket, Key: this.#full(key) }));
      const size = head.ContentLength ?? 0;
      const lastModified = head.LastModified ?? new Date(0);
      const etag = head.ETag
        ? quoted(head.ETag)
        : `"${size.toString(16)}-${Math.floor(lastModified.getTime()).toString(16)}"`;
      return { size, etag, lastModified };
    } catch (err) {
      if (s3Failure(err) === 'no-key') return undefined;
      throw this.#explain(err);
    }
  }

  async read(key: string, range?: ByteRange, signal?: AbortSignal): Promise<Readable> {
    const cmd = new GetObjectCommand({
      Bucket: this.#loc.bucket,
      Key: this.#full(key),
      Range: range ? `bytes=${range.start}-${range.end}` : undefined,
    });
    try {
      const res = await this.#client.send(cmd, signal ? { abortSignal: signal } : {});
      if (!(res.Body instanceof Readable))
        throw new UpstreamUnavailableError(`${this.description} answered GetObject without a body`);
      return res.Body;
    } catch (err) {
      if (s3Failure(err) === 'no-key') throw new NotFoundError();
      throw this.#explain(err);
    }
  }

  async presign(key: string, seconds: number): Promise<string> {
    const cmd = new GetObjectCommand({ Bucket: this.#loc.bucket, Key: this.#full(key) });
    return getSignedUrl(this.#client, cmd, { expiresIn: seconds });
  }

  async putFile(
    key: string,
    file: string,
    o: { contentType: string; signal: AbortSignal; move?: boolean },
  ): Promise<void> {
    await this.#uploads.put(this.#full(key), { file }, { contentType: o.contentType, signal: o.signal });
    // A move takes the file: once it is in the bucket the local copy is the caller's no more.
    if (o.move) await rm(file, { force: true });
  }

  input(key: string): InputSource {
    return new S3InputSource(
      { ...this.#loc, path: this.#full(key) },
      { limits: this.#inputLimits, maxAttempts: this.#storeOpts.maxAttempts, allowPrivate: true },
    );
  }

  async removePrefix(prefix: string): Promise<void> {
    const folder = prefix.replace(/\/+$/, '');
    // `checkedObjectKey` refuses '' too: removing "everything" is never what a caller means.
    const full = `${this.#full(folder)}/`;
    let startAfter: string | undefined;
    try {
      for (;;) {
        // StartAfter the last key seen, not a continuation token: the page before is deleted
        // by then, and a server whose token is an offset would skip as many keys.
        const page = await this.#client.send(
          new ListObjectsV2Command({ Bucket: this.#loc.bucket, Prefix: full, StartAfter: startAfter }),
        );
        const keys = (page.Contents ?? []).flatMap((c) => (c.Key ? [{ Key: c.Key }] : []));
        if (keys.length === 0) return;
        await this.#deleteObjects(keys);
        startAfter = keys[keys.length - 1]?.Key;
        if (!page.IsTruncated) return;
      }
    } catch (err) {
      throw this.#explain(err);
    }
  }

  /** One DeleteObjects of up to 1000 keys (one list page); a key it could not remove fails the whole. */
  async #deleteObjects(keys: { Key: string }[]): Promise<void> {
    const res = await this.#client.send(
      new DeleteObjectsCommand({ Bucket: this.#loc.bucket, Delete: { Objects: keys, Quiet: true } }),
    );
    const failed = res.Errors ?? [];
    if (failed.length > 0)
      throw new UpstreamUnavailableError(
        `${this.description} did not remove ${failed.length} of ${keys.length} objects (${failed[0]?.Code ?? 'no code'}); it will be tried again`,
      );
  }

  /** Names the bucket and endpoint, never a credential or a key. */
  #explain(err: unknown): MediaplaneError {
    if (err instanceof StorageDeniedError || err instanceof UpstreamUnavailableError || err instanceof NotFoundError)
      return err;
    switch (s3Failure(err)) {
      case 'denied':
      case 'refused-address':
        return new StorageDeniedError(
          `the built-in store (${this.description}) refused access (check MEDIAPLANE_STORE_ACCESS_KEY_ID, MEDIAPLANE_STORE_SECRET_ACCESS_KEY and the bucket's permissions)`,
        );
      case 'no-bucket':
      case 'no-key':
        return new StorageDeniedError(`the built-in store's bucket does not exist (${this.description})`);
      case 'unavailable':
        return new UpstreamUnavailableError(`the built-in store (${this.description}) did not answer`, { cause: err });
    }
  }
}

/** An ETag as HTTP writes it: some S3-protocol servers leave out the quotes. */
const quoted = (etag: string): string => (etag.startsWith('"') || etag.startsWith('W/') ? etag : `"${etag}"`);

/** `store` with every key it is given written under `prefix`. */
function underPrefix(store: ObjectStore, prefix: string): ObjectStore {
  const { parts } = store;
  return {
    description: `${store.description} under "${prefix}"`,
    check: (signal) => store.check(signal),
    put: (key, body, opts) => store.put(prefix + key, body, opts),
    close: (signal) => store.close(signal),
    discard: () => store.discard(),
    ...(parts && {
      parts: {
        minBytes: parts.minBytes,
        partBytes: parts.partBytes,
        open: (key, opts) => parts.open(prefix + key, opts),
      },
    }),
  };
}
