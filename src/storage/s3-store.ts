import { stat } from 'node:fs/promises';
import { HeadBucketCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { CancelledError, StorageDeniedError, UpstreamUnavailableError, type MediaplaneError } from '../lib/errors.ts';
import { checkedObjectKey } from '../lib/object-path.ts';
import { privateAddressError, type Resolve, withAllowHint } from '../lib/net-guard.ts';
import { BufferPool, RangeMultipart, uploadFileMultipart, withFileRange } from './s3-multipart.ts';
import { endpointProblem, s3Client, s3Failure } from './s3.ts';
import type { FileRange, ObjectStore, PartWriter, Published, PutBody, PutOptions, S3Location } from './types.ts';

// Parts in flight per upload: QUEUE_SIZE x partSize is one upload's memory (2 x 8 MiB by
// default), and up to uploadConcurrency uploads run at once: kept small so a worker stays far
// below 250 MB.
const QUEUE_SIZE = 2;
// Part buffers a store keeps for its next uploads (the rest are left to the collector).
const KEEP_BUFFERS = 4;
// S3's smallest part but the last (AWS S3 quotas; MinIO and others follow it).
const MIN_PART_BYTES = 5 * 1024 ** 2;

export interface S3StoreOptions {
  maxAttempts: number;
  partSizeBytes: number;
  allowPrivate: boolean;
  /** How the endpoint's host name is resolved, checked and connected; a seam for tests (DNS rebinding, issue #15). */
  resolve?: Resolve;
}

/** Outputs in a caller's S3-compatible bucket: files as one PutObject up to one part, multipart from file ranges above; streams through lib-storage. */
export class S3ObjectStore implements ObjectStore {
  readonly description: string;
  readonly #loc: S3Location;
  readonly #opts: S3StoreOptions;
  readonly #client: S3Client;
  readonly #buffers: BufferPool;
  readonly parts: NonNullable<ObjectStore['parts']>;

  constructor(loc: S3Location, opts: S3StoreOptions) {
    this.#loc = loc;
    this.#opts = opts;
    this.parts = { minBytes: MIN_PART_BYTES, partBytes: opts.partSizeBytes, open: (key, o) => this.#openParts(key, o) };
    this.#buffers = new BufferPool(opts.partSizeBytes, KEEP_BUFFERS);
    this.#client = s3Client(loc, {
      maxAttempts: opts.maxAttempts,
      allowPrivate: opts.allowPrivate,
      resolve: opts.resolve,
    });
    this.description = `s3 bucket "${loc.bucket}" at ${loc.endpoint}`;
  }

  async check(signal: AbortSignal): Promise<void> {
    const problem = await endpointProblem(this.#loc.endpoint, {
      allowPrivate: this.#opts.allowPrivate,
      resolve: this.#opts.resolve,
    });
    if (problem) throw new StorageDeniedError(`the storage endpoint is not allowed: ${problem}`);
    try {
      await this.#client.send(new HeadBucketCommand({ Bucket: this.#loc.bucket }), { abortSignal: signal });
    } catch (err) {
      throw this.#explain(err, signal);
    }
  }

  async put(rawKey: string, body: PutBody, opts: PutOptions): Promise<void> {
    // Asserted again here (issue #15): some S3-protocol servers resolve `..` in keys.
    const key = checkedObjectKey(rawKey);
    if ('file' in body) return this.#putFile(key, body, opts);
    const { stream } = body;
    const upload = new Upload({
      client: this.#client,
      params: { Bucket: this.#loc.bucket, Key: key, Body: stream, ContentType: opts.contentType },
      queueSize: QUEUE_SIZE,
      partSize: this.#opts.partSizeBytes,
      leavePartsOnError: false,
    });
    const onAbort = (): void => void upload.abort().catch(() => undefined);
    opts.signal.addEventListener('abort', onAbort, { once: true });
    try {
      await upload.done();
    } catch (err) {
      stream.destroy();
      throw this.#explain(err, opts.signal);
    } finally {
      opts.signal.removeEventListener('abort', onAbort);
    }
  }

  /**
   * A file of one part or less (HLS segments, playlists) is read whole into a pooled part
   * buffer and sent as one PutObject; a larger one goes up part by part from file ranges
   * (s3-multipart.ts). Either way the SDK can send a buffer again when it retries, and memory
   * stays at `queueSize` parts per upload.
   */
  async #putFile(key: string, { file, size: known }: { file: string; size?: number }, opts: PutOptions): Promise<void> {
    const { bucket } = this.#loc;
    const partSize = this.#opts.partSizeBytes;
    try {
      const size = known ?? (await stat(file)).size;
      if (size > partSize) {
        await uploadFileMultipart({
          client: this.#client,
          bucket,
          key,
          file,
          size,
          contentType: opts.contentType,
          partSize,
          concurrency: QUEUE_SIZE,
          buffers: this.#buffers,
          signal: opts.signal,
        });
        return;
      }
      await withFileRange(this.#buffers, { file, start: 0, length: size }, async (body) => {
        await this.#client.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key: key,
            Body: body,
            ContentLength: size,
            ContentType: opts.contentType,
          }),
          { abortSignal: opts.signal },
        );
      });
    } catch (err) {
      throw this.#explain(err, opts.signal);
    }
  }

  async #openParts(rawKey: string, opts: PutOptions): Promise<PartWriter> {
    const u = {
      client: this.#client,
      bucket: this.#loc.bucket,
      key: checkedObjectKey(rawKey),
      buffers: this.#buffers,
      signal: opts.signal,
      contentType: opts.contentType,
    };
    const explained =
      <A extends unknown[], R>(fn: (...a: A) => Promise<R>) =>
      async (...a: A): Promise<R> => {
        try {
          return await fn(...a);
        } catch (err) {
          throw this.#explain(err, opts.signal);
        }
      };
    const mp = await explained(() => RangeMultipart.create(u))();
    return {
      put: explained((part: number, range: FileRange) => mp.put(part, range)),
      ensure: explained((part: number, range: FileRange) => mp.ensure(part, range)),
      complete: explained(() => mp.complete()),
      abort: () => mp.abort(),
    };
  }

  async close(): Promise<Published> {
    this.#client.destroy();
    return {};
  }

  async discard(): Promise<void> {
    this.#client.destroy();
  }

  /** Names the bucket and endpoint, never a key (STYLE.md 11). */
  #explain(err: unknown, signal: AbortSignal): MediaplaneError {
    if (signal.aborted) return new CancelledError('cancelled', { cause: signal.reason });
    const { bucket, endpoint } = this.#loc;
    switch (s3Failure(err)) {
      case 'denied':
        return new StorageDeniedError(
          `storage denied: the S3 server at ${endpoint} refused access to bucket "${bucket}" (check the access key, secret and bucket permissions)`,
        );
      case 'no-bucket':
      case 'no-key':
        return new StorageDeniedError(`storage denied: bucket "${bucket}" does not exist at ${endpoint}`);
      case 'refused-address':
        return new StorageDeniedError(
          `the storage endpoint is not allowed: ${withAllowHint(`${privateAddressError(err)?.problem}, refused when connecting`)}`,
          { cause: err },
        );
      case 'unavailable':
        return new UpstreamUnavailableError(
          `storage unreachable: the S3 server at ${endpoint} (bucket "${bucket}") did not answer; it will be tried again`,
          { cause: err },
        );
    }
  }
}
