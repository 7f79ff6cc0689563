import type { Readable } from 'node:stream';

// Storage's own words for where media comes from and goes to (issue #16): the API edge maps
// its request to these, so storage knows nothing of the jobs or the wire that use it.

/** An S3-compatible bucket and how to reach it. Messages name the bucket or endpoint, never the credentials. */
export interface S3Location {
  endpoint: string;
  bucket: string;
  region?: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
}

/** One object in a bucket; `path` is its key (a leading / is dropped). */
export type S3Object = S3Location & { path: string };

/** Where a job's input is: a URL (http(s), ipfs://, ar://) or an object in a bucket. */
export type InputSpec = { url: string } | ({ type: 's3' } & S3Object);

export type S3Target = { type: 's3' } & S3Location;
/** A Storacha space the service may write to with the user's UCAN proof (storage/dweb/). */
export type DwebTarget = { type: 'dweb.storage' | 'web3.storage'; credentials: { proof: string } };
/** Where a job's outputs go; `type` picks the ObjectStore. */
export type StorageTarget = S3Target | DwebTarget;

/**
 * Where a job's outputs go. One adapter per storage kind (s3.ts, local.ts, dweb/ later):
 * adding a kind means adding a file and a factory, not editing the pipeline (STYLE.md 7).
 *
 * Life cycle, driven by the pipeline:
 *   1. `check()` once before any download, so bad credentials or a missing bucket fail the
 *      job at once (StorageDeniedError, not retried) instead of after an hour of encoding;
 *   2. `put()` many times, concurrently (up to `uploadConcurrency`), HLS segments while
 *      ffmpeg still runs, playlists and MP4s at the end, the master playlist last;
 *   3. `close()` once after the last put; it returns what the store published (`Published`):
 *      a content-addressed store computes its root here and returns it as `baseUrl`
 *      (spec/API.md: `output.transcodeFile.baseUrl`), with each file's own address in
 *      `files`; a store that writes keys where the caller said (s3, a folder) returns `{}`;
 *      or, when the job fails at any step, `discard()`: nothing more is published and what
 *      the store holds (clients, sockets, staging folders) is freed.
 *
 * Keys are relative ("out/hls/360p0/0.ts", no leading slash). Each store asserts the path
 * rule on every key it writes, whatever the caller checked (lib/object-path.ts
 * `checkedObjectKey`, issue #15): a key with `..`, `//`, `%`, a backslash or a control
 * character is refused with a StorageDeniedError. Bodies are files on local
 * disk or streams: media is never buffered whole in memory (STYLE.md 6). Errors are from
 * lib/errors.ts: StorageDeniedError (never retried) or UpstreamUnavailableError (retried);
 * messages name the bucket or endpoint, never a credential.
 */
export interface ObjectStore {
  /** Words for logs and errors, e.g. `s3 bucket "videos" at https://s3.example.com`. */
  readonly description: string;
  check(signal: AbortSignal): Promise<void>;
  put(key: string, body: PutBody, opts: PutOptions): Promise<void>;
  close(signal: AbortSignal): Promise<Published>;
  discard(): Promise<void>;
  /**
   * Stores that can take an object in parts, sent in any order from ranges of files (S3
   * multipart), offer this: the pipeline then uploads an MP4's media data while ffmpeg is
   * still writing it. Every part but the last is at least `minBytes`.
   */
  readonly parts?: { minBytes: number; partBytes: number; open(key: string, opts: PutOptions): Promise<PartWriter> };
}

/**
 * What `close()` published. The caller shows it as it is (the transcode handler puts it in the
 * task's output), so a store kind adds what it publishes here, not a check of its class
 * where the result is used (issue #26).
 */
export interface Published {
  /** The root all keys are under, when the store computed one (`ipfs://<root CID>`). */
  baseUrl?: string;
  /** Each file by its own address, when the store gives files one (the dweb store's CIDs). */
  files?: PublishedFile[];
}

/** One file as a content-addressed store published it. */
export interface PublishedFile {
  /** Relative to the root, `/`-separated, no leading slash. */
  path: string;
  cid: string;
  size: number;
  /** The file at a gateway, path style: `<gateway>/ipfs/<root>/<path>`. */
  url: string;
}

export interface FileRange {
  file: string;
  start: number;
  length: number;
}

/** One object being written part by part; parts are numbered from 1 and may come in any order. */
export interface PartWriter {
  put(part: number, range: FileRange): Promise<void>;
  /** Makes sure the part holds these bytes, sending it (again) only if it does not. */
  ensure(part: number, range: FileRange): Promise<void>;
  complete(): Promise<void>;
  /** Frees the parts sent so far (they are billed storage); never throws. */
  abort(): Promise<void>;
}

/** A file's `size`, when the caller already has it, spares the store another stat. */
export type PutBody = { file: string; size?: number } | { stream: Readable; size?: number };

export interface PutOptions {
  contentType: string;
  signal: AbortSignal;
}

/**
 * Where a job's input comes from (http.ts, gateway.ts, s3-input.ts, file.ts). `fetch`
 * streams it to `dest` in the job's scratch directory, refusing more than `maxBytes`
 * (InputTooLargeError) and giving up after `timeoutMs` (TimeoutError). A local file is not
 * copied: `fetch` returns its own path.
 */
export interface InputSource {
  /** The input as it may be shown: no credentials, no query string secrets. */
  readonly description: string;
  fetch(opts: FetchOptions): Promise<FetchedInput>;
}

export interface FetchOptions {
  dest: string;
  signal: AbortSignal;
  /** Called with bytes received so far and the total when the source said it. */
  onBytes?(received: number, total: number | undefined): void;
}

export interface FetchedInput {
  path: string;
  size: number;
}
