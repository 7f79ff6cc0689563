import type { Readable, Writable } from 'node:stream';
import type { FileRange, InputSource, ObjectStore } from '../types.ts';

// The service's own store (issue #27, spec/API.md section C): where assets and the outputs of
// a transcode without `storage` are kept and served from. A folder in the data directory by
// default (folder.ts), or an S3-protocol bucket (s3.ts, MEDIAPLANE_STORE_URL) once workers
// run on several machines. Keys follow lib/object-path.ts like every store's.

/** What the store says of one whole object. */
export interface StoredObject {
  size: number;
  /** A strong validator, quoted as HTTP writes it (`"..."`). */
  etag: string;
  lastModified: Date;
}

/** Bytes `start` to `end` of an object, both included (HTTP's byte ranges). */
export interface ByteRange {
  start: number;
  end: number;
}

/** One part of a multipart upload, as the store lists it. */
export interface StoredPart {
  part: number;
  size: number;
  etag: string;
}

/** One multipart upload: the key it makes and the store's id of it. */
export interface MultipartUpload {
  key: string;
  uploadId: string;
}

/**
 * Multipart uploads that outlive a request and a process (upload staging in a bucket, as
 * tusd's S3 store keeps a tus upload): the parts are whatever the store lists, so any process
 * may add the next one. Every key is a store key, under the store's prefix like any other.
 */
export interface BuiltinMultipart {
  /** The smallest part but the last that the store takes (S3: 5 MiB, EntityTooSmall otherwise). */
  readonly minPartBytes: number;
  /** The size of the parts to send (MEDIAPLANE_UPLOAD_PART_SIZE_BYTES, at least minPartBytes). */
  readonly partBytes: number;
  /** Starts a multipart upload of `key`; its upload id. */
  create(key: string): Promise<string>;
  /** The parts stored so far, by number; undefined when there is no such upload (completed or aborted). */
  parts(upload: MultipartUpload): Promise<StoredPart[] | undefined>;
  putPart(upload: MultipartUpload, part: number, range: FileRange): Promise<void>;
  /** Joins `parts` into the object at the upload's key. */
  complete(upload: MultipartUpload, parts: StoredPart[]): Promise<void>;
  /** Frees the upload's parts; an upload that is gone is no error. */
  abort(upload: MultipartUpload): Promise<void>;
  /** Removes one object; none there is no error. */
  remove(key: string): Promise<void>;
  /** The keys under `prefix` (at most `limit`), without the store's own prefix. */
  keys(prefix: string, limit: number): Promise<string[]>;
}

export interface BuiltinStore {
  /** Words for logs and errors (`folder /data/media`, `s3 bucket "media" at https://...`); never a credential. */
  readonly description: string;
  /**
   * An ObjectStore for one job's outputs, every key it is given written under `prefix`
   * (`asset/<playbackId>/`, `task/<taskId>/`). A file is visible to `stat` and `read` only
   * once it is whole: a folder store writes beside it and renames; an S3 PUT is atomic.
   */
  writer(prefix: string): ObjectStore;
  /** The object, or undefined when there is none (or it is not whole yet). */
  stat(key: string): Promise<StoredObject | undefined>;
  /** Streams the object, or `range` of it; the caller has checked the range against `stat`. */
  read(key: string, range?: ByteRange, signal?: AbortSignal): Promise<Readable>;
  /**
   * Writes `range` of the object into `out` (left open), where a store can do better than
   * `read`'s stream: the folder store reads into buffers it uses again (file-body.ts). Rejects
   * when `out` closes before the end.
   */
  writeTo?(key: string, range: ByteRange, out: Writable): Promise<void>;
  /**
   * A URL a client may GET the object at for `seconds`, for the redirect way of serving
   * (MEDIAPLANE_STORE_SERVE=redirect). Only stores that can sign URLs have it (S3).
   */
  presign?(key: string, seconds: number): Promise<string>;
  /**
   * Stores a whole local file at `key`. With `move` the file may be taken instead of copied
   * (a folder store on the same filesystem renames it); the caller must not use it afterwards.
   */
  putFile(key: string, file: string, o: { contentType: string; signal: AbortSignal; move?: boolean }): Promise<void>;
  /** Where a job reads `key` from: the folder store's own file (not copied), or a download from S3. */
  input(key: string): InputSource;
  /** Removes every object under `prefix` (`asset/<playbackId>/`); removing nothing is no error. */
  removePrefix(prefix: string): Promise<void>;
  /** Multipart uploads across requests: only a bucket store has them (upload staging in the store). */
  readonly multipart?: BuiltinMultipart;
}
