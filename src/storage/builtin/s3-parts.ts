import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import type { MediaplaneError } from '../../lib/errors.ts';
import { BufferPool, withFileRange } from '../s3-multipart.ts';
import { s3Failure } from '../s3.ts';
import type { FileRange } from '../types.ts';
import type { BuiltinMultipart, MultipartUpload, StoredPart } from './types.ts';

// The bucket store's multipart uploads across requests (BuiltinMultipart): upload staging
// keeps a tus upload here so that any API process takes its next PATCH. Unlike RangeMultipart
// (s3-multipart.ts), which remembers its parts for the one job that sends them all, nothing is
// remembered between calls: the parts are what ListParts says.

/** S3's smallest part but the last (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html). */
export const S3_MIN_PART_BYTES = 5 * 1024 * 1024;

export interface S3PartsOptions {
  client: S3Client;
  bucket: string;
  /** The bucket's key of a store key (the store's prefix and path rule). */
  full: (key: string) => string;
  /** The store's prefix, taken off the keys `keys` lists. */
  prefix: string;
  partBytes: number;
  /** The store's words for a failure (names the bucket, never a credential). */
  explain: (err: unknown) => MediaplaneError;
}

export class S3Parts implements BuiltinMultipart {
  readonly minPartBytes = S3_MIN_PART_BYTES;
  readonly partBytes: number;
  readonly #o: S3PartsOptions;
  // One request's part at a time per upload; two kept for uploads on several connections.
  readonly #buffers: BufferPool;

  constructor(o: S3PartsOptions) {
    this.#o = o;
    this.partBytes = Math.max(S3_MIN_PART_BYTES, o.partBytes);
    this.#buffers = new BufferPool(this.partBytes, 2);
  }

  async create(key: string): Promise<string> {
    const created = await this.#guard(
      this.#o.client.send(
        new CreateMultipartUploadCommand({
          Bucket: this.#o.bucket,
          Key: this.#o.full(key),
          ContentType: 'application/octet-stream',
        }),
      ),
    );
    if (!created.UploadId) throw this.#o.explain(new Error('CreateMultipartUpload answered without an UploadId'));
    return created.UploadId;
  }

  async parts({ key, uploadId }: MultipartUpload): Promise<StoredPart[] | undefined> {
    const parts: StoredPart[] = [];
    let marker: string | undefined;
    try {
      for (;;) {
        const page = await this.#o.client.send(
          new ListPartsCommand({
            Bucket: this.#o.bucket,
            Key: this.#o.full(key),
            UploadId: uploadId,
            PartNumberMarker: marker,
          }),
        );
        for (const p of page.Parts ?? [])
          if (p.PartNumber !== undefined) parts.push({ part: p.PartNumber, size: p.Size ?? 0, etag: p.ETag ?? '' });
        if (!page.IsTruncated || page.NextPartNumberMarker === undefined) break;
        marker = page.NextPartNumberMarker;
      }
    } catch (err) {
      // NoSuchUpload (404): completed or aborted.
      if (s3Failure(err) === 'no-key') return undefined;
      throw this.#o.explain(err);
    }
    return parts.sort((a, b) => a.part - b.part);
  }

  async putPart({ key, uploadId }: MultipartUpload, part: number, range: FileRange): Promise<void> {
    await withFileRange(this.#buffers, range, (body) =>
      this.#guard(
        this.#o.client.send(
          new UploadPartCommand({
            Bucket: this.#o.bucket,
            Key: this.#o.full(key),
            UploadId: uploadId,
            PartNumber: part,
            Body: body,
            ContentLength: body.length,
          }),
        ),
      ),
    );
  }

  async complete({ key, uploadId }: MultipartUpload, parts: StoredPart[]): Promise<void> {
    await this.#guard(
      this.#o.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.#o.bucket,
          Key: this.#o.full(key),
          UploadId: uploadId,
          MultipartUpload: { Parts: parts.map((p) => ({ PartNumber: p.part, ETag: p.etag })) },
        }),
      ),
    );
  }

  async abort({ key, uploadId }: MultipartUpload): Promise<void> {
    try {
      await this.#o.client.send(
        new AbortMultipartUploadCommand({ Bucket: this.#o.bucket, Key: this.#o.full(key), UploadId: uploadId }),
      );
    } catch (err) {
      if (s3Failure(err) !== 'no-key') throw this.#o.explain(err);
    }
  }

  async remove(key: string): Promise<void> {
    await this.#guard(this.#o.client.send(new DeleteObjectCommand({ Bucket: this.#o.bucket, Key: this.#o.full(key) })));
  }

  async keys(prefix: string, limit: number): Promise<string[]> {
    const out: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.#guard(
        this.#o.client.send(
          new ListObjectsV2Command({
            Bucket: this.#o.bucket,
            // A folder: the path rule refuses a key ending with `/`.
            Prefix: `${this.#o.full(prefix.replace(/\/+$/, ''))}/`,
            ContinuationToken: token,
            MaxKeys: Math.min(1000, limit - out.length),
          }),
        ),
      );
      for (const c of page.Contents ?? []) if (c.Key) out.push(c.Key.slice(this.#o.prefix.length));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token && out.length < limit);
    return out;
  }

  /** A request's answer, or its failure in the store's words. */
  async #guard<T>(request: Promise<T>): Promise<T> {
    try {
      return await request;
    } catch (err) {
      throw this.#o.explain(err);
    }
  }
}
