// Multipart upload of a file on disk, part by part from file ranges. lib-storage takes a
// stream and copies its 64 KiB chunks into a fresh part-size buffer per part (and the
// garbage collector then sweeps them); here each part is read straight into a pooled buffer,
// which the SDK can also send again when it retries, `concurrency` parts at a time.
// Measured on a 30 s 1080p ladder (three MP4s, 47 MB, going up after ffmpeg exits), that
// copying and collecting was about half of the service's busy time in the upload tail.

import { webcrypto } from 'node:crypto';
import { open, type FileHandle } from 'node:fs/promises';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
  type CompletedPart,
  type S3Client,
} from '@aws-sdk/client-s3';
import type { FileRange, PartWriter } from './types.ts';

/**
 * Part-size buffers that uploads borrow and give back. Every byte of a job's uploads passes
 * through a few buffers instead of a fresh one per object or part: each fresh buffer counts as
 * external memory, and every ~64 MB of it made V8 mark the whole heap again (six full
 * collections during one 30 s ladder, most of a CPU-second on its helper threads).
 */
export class BufferPool {
  readonly #free: Buffer[] = [];
  readonly #size: number;
  readonly #keep: number;

  constructor(size: number, keep: number) {
    this.#size = size;
    this.#keep = keep;
  }

  /** A buffer of at least `min` bytes (the pool's size unless more is asked). */
  async with<T>(fn: (buffer: Buffer) => Promise<T>, min = 0): Promise<T> {
    if (min > this.#size) return fn(Buffer.allocUnsafe(min));
    const buffer = this.#free.pop() ?? Buffer.allocUnsafe(this.#size);
    try {
      return await fn(buffer);
    } finally {
      if (this.#free.length < this.#keep) this.#free.push(buffer);
    }
  }
}

export interface FileUpload {
  client: S3Client;
  bucket: string;
  key: string;
  file: string;
  size: number;
  contentType: string;
  partSize: number;
  concurrency: number;
  /** Buffers of partSize bytes. */
  buffers: BufferPool;
  signal: AbortSignal;
}

export async function uploadFileMultipart(u: FileUpload): Promise<void> {
  // The first failure stops the other workers' parts too.
  const stop = new AbortController();
  const signal = AbortSignal.any([u.signal, stop.signal]);
  const mp = await RangeMultipart.create({ ...u, signal });
  let failure: { err: unknown } | undefined;
  try {
    const count = Math.max(1, Math.ceil(u.size / u.partSize));
    let next = 0;
    const worker = async (): Promise<void> => {
      try {
        while (next < count && !signal.aborted) {
          const index = next++;
          const start = index * u.partSize;
          await mp.put(index + 1, { file: u.file, start, length: Math.min(u.partSize, u.size - start) });
        }
      } catch (err) {
        failure ??= { err };
        stop.abort();
      }
    };
    // Every worker has ended (none still reading the file) before a failure is reported.
    await Promise.all(Array.from({ length: Math.min(u.concurrency, count) }, worker));
    if (failure) throw failure.err;
    u.signal.throwIfAborted();
    await mp.complete();
  } catch (err) {
    // Parts left behind are billed storage: tell the server, whatever state the upload is in.
    await mp.abort();
    throw err;
  }
}

/** Reads a file range into a pooled buffer (a one-off one if the range is bigger) and runs `fn` on those bytes. */
export function withFileRange<T>(buffers: BufferPool, range: FileRange, fn: (body: Buffer) => Promise<T>): Promise<T> {
  return buffers.with(async (buffer) => {
    const fh = await open(range.file, 'r');
    const body = await readRange(fh, buffer, range.start, range.length).finally(() => fh.close());
    return fn(body);
  }, range.length);
}

/** Reads exactly `length` bytes at `offset` into the front of `buffer`. */
async function readRange(fh: FileHandle, buffer: Buffer, offset: number, length: number): Promise<Buffer> {
  let filled = 0;
  while (filled < length) {
    const { bytesRead } = await fh.read(buffer, filled, length - filled, offset + filled);
    if (bytesRead === 0) throw new Error(`the file ended ${length - filled} bytes early while it was being uploaded`);
    filled += bytesRead;
  }
  return buffer.subarray(0, length);
}

/**
 * A multipart upload fed part by part from file ranges, in any order, by a caller that knows
 * its layout (an MP4 still being written: its media data goes up during the encode, its head
 * once the encoder has finished). Each part's SHA-256 is kept, so `ensure` can tell whether
 * the file still holds what was sent.
 */
export class RangeMultipart implements PartWriter {
  readonly #u: Pick<FileUpload, 'client' | 'bucket' | 'key' | 'buffers' | 'signal'>;
  readonly #uploadId: string;
  readonly #parts = new Map<number, { etag: string | undefined; sha256: string }>();

  private constructor(u: Pick<FileUpload, 'client' | 'bucket' | 'key' | 'buffers' | 'signal'>, uploadId: string) {
    this.#u = u;
    this.#uploadId = uploadId;
  }

  static async create(
    u: Pick<FileUpload, 'client' | 'bucket' | 'key' | 'buffers' | 'signal' | 'contentType'>,
  ): Promise<RangeMultipart> {
    const created = await u.client.send(
      new CreateMultipartUploadCommand({ Bucket: u.bucket, Key: u.key, ContentType: u.contentType }),
      { abortSignal: u.signal },
    );
    if (!created.UploadId) throw new Error('the S3 server answered CreateMultipartUpload without an UploadId');
    return new RangeMultipart(u, created.UploadId);
  }

  async put(part: number, range: FileRange): Promise<void> {
    await this.#withRange(range, (body, sha256) => this.#send(part, body, sha256));
  }

  async ensure(part: number, range: FileRange): Promise<void> {
    await this.#withRange(range, async (body, sha256) => {
      if (this.#parts.get(part)?.sha256 !== sha256) await this.#send(part, body, sha256);
    });
  }

  async complete(): Promise<void> {
    const parts: CompletedPart[] = [...this.#parts]
      .sort((a, b) => a[0] - b[0])
      .map(([n, p]) => ({ PartNumber: n, ETag: p.etag }));
    await this.#u.client.send(
      new CompleteMultipartUploadCommand({
        Bucket: this.#u.bucket,
        Key: this.#u.key,
        UploadId: this.#uploadId,
        MultipartUpload: { Parts: parts },
      }),
      { abortSignal: this.#u.signal },
    );
  }

  async abort(): Promise<void> {
    await this.#u.client
      .send(new AbortMultipartUploadCommand({ Bucket: this.#u.bucket, Key: this.#u.key, UploadId: this.#uploadId }))
      .catch(() => undefined);
  }

  async #withRange(range: FileRange, fn: (body: Buffer, sha256: string) => Promise<void>): Promise<void> {
    await withFileRange(this.#u.buffers, range, async (body) => {
      // On the thread pool, like the signer's hash (s3.ts); the signer then takes this one.
      const sha256 = Buffer.from(await webcrypto.subtle.digest('SHA-256', body)).toString('hex');
      await fn(body, sha256);
    });
  }

  async #send(part: number, body: Buffer, sha256: string): Promise<void> {
    const cmd = new UploadPartCommand({
      Bucket: this.#u.bucket,
      Key: this.#u.key,
      UploadId: this.#uploadId,
      PartNumber: part,
      Body: body,
      ContentLength: body.length,
    });
    cmd.middlewareStack.add(
      (next) => async (args) => {
        (args.request as { headers: Record<string, string> }).headers['x-amz-content-sha256'] = sha256;
        return next(args);
      },
      { step: 'build', priority: 'high', name: 'mediaplaneKnownPayloadHash' },
    );
    const r = await this.#u.client.send(cmd, { abortSignal: this.#u.signal });
    this.#parts.set(part, { etag: r.ETag, sha256 });
  }
}
