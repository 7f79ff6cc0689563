import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { GetObjectCommand, HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { InputUnreadableError, UpstreamUnavailableError } from '../lib/errors.ts';
import { objectPathProblem } from '../lib/object-path.ts';
import type { BuiltinStore, ByteRange } from './builtin/types.ts';
import { gatewayCandidates, type GatewayConfig } from './gateway.ts';
import { openUrl, showUrl } from './http.ts';
import { endpointProblem, s3Client } from './s3.ts';
import type { InputSpec, S3Object } from './types.ts';

// Issue #30: reading a byte range of a job's input, so a chunk of a long video reads only its
// part. Every kind goes through our own guarded clients (the private-address guard of
// lib/net-guard.ts for HTTP and S3 endpoints); storage/range-proxy.ts serves a reader to
// ffmpeg on 127.0.0.1. A source that cannot answer ranges gets no reader: the caller copies
// it once into the built-in store and reads ranges from there.

/** One input read range by range. */
export interface RangeReader {
  /** Words for logs and errors; no credentials, no query string. */
  readonly description: string;
  /** Bytes in the whole object. */
  readonly size: number;
  /** Streams bytes `start` to `end` (both included). */
  read(range: ByteRange, signal: AbortSignal): Promise<Readable>;
  /** Frees the client (sockets). */
  close(): void;
}

export interface RangeReaderOptions extends GatewayConfig {
  allowPrivateUrls: boolean;
  maxRedirects: number;
  s3MaxAttempts: number;
}

/**
 * A reader of `input` by ranges, or undefined when the source does not answer a range (no
 * 206 to `Range: bytes=0-0`), is a content gateway (several hosts, tried in turn: copied
 * once), or cannot be opened at all: the ordinary download then says why, in its words.
 */
export async function openRangeReader(
  input: InputSpec,
  o: RangeReaderOptions,
  signal: AbortSignal,
): Promise<RangeReader | undefined> {
  try {
    if ('type' in input) return await S3RangeReader.open(input, o);
    if (gatewayCandidates(input.url, o)) return undefined;
    return await HttpRangeReader.open(new URL(input.url), o, signal);
  } catch {
    return undefined;
  }
}

/** The built-in store's object `key` (a copied source), read by ranges. */
export async function storedRangeReader(store: BuiltinStore, key: string): Promise<RangeReader> {
  const stat = await store.stat(key);
  if (!stat) throw new UpstreamUnavailableError(`the copied input ${key} is not in the built-in store`);
  return {
    description: `${key} in the built-in store`,
    size: stat.size,
    read: (range, signal) => store.read(key, range, signal),
    close: () => {},
  };
}

const rangeHeader = (r: ByteRange): Record<string, string> => ({ range: `bytes=${r.start}-${r.end}` });

/** `bytes a-b/SIZE` -> SIZE. */
function totalOf(contentRange: string | undefined): number | undefined {
  const m = /^bytes \d+-\d+\/(\d+)$/.exec(contentRange ?? '');
  return m?.[1] ? Number(m[1]) : undefined;
}

class HttpRangeReader implements RangeReader {
  readonly description: string;
  readonly size: number;
  readonly #url: URL;
  readonly #o: RangeReaderOptions;

  private constructor(url: URL, size: number, o: RangeReaderOptions, shown: string) {
    this.#url = url;
    this.size = size;
    this.#o = o;
    this.description = shown;
  }

  /** Asks for the first byte; a 206 with the total size says ranges work. Redirects are followed once, here. */
  static async open(url: URL, o: RangeReaderOptions, signal: AbortSignal): Promise<HttpRangeReader | undefined> {
    const shown = showUrl(url);
    const { res, url: final } = await openUrl(url, {
      ...HttpRangeReader.#http(o),
      signal,
      shown,
      headers: rangeHeader({ start: 0, end: 0 }),
    });
    // A 206 holds one byte; a 200 would be the whole file (the download runs beside this): not read.
    if (res.statusCode === 206) res.resume();
    else res.destroy();
    const size = res.statusCode === 206 ? totalOf(res.headers['content-range']) : undefined;
    return size === undefined ? undefined : new HttpRangeReader(final, size, o, shown);
  }

  static #http(o: RangeReaderOptions) {
    return { allowPrivate: o.allowPrivateUrls, maxRedirects: o.maxRedirects };
  }

  async read(range: ByteRange, signal: AbortSignal): Promise<Readable> {
    const { res } = await openUrl(this.#url, {
      ...HttpRangeReader.#http(this.#o),
      signal,
      shown: this.description,
      headers: rangeHeader(range),
    });
    return checkedPart(res, range, this.description);
  }

  close(): void {}
}

/** A 200 to a range would send the whole object from its start: refused. */
function checkedPart(res: IncomingMessage, range: ByteRange, shown: string): Readable {
  if (res.statusCode === 206) return res;
  res.destroy();
  throw new UpstreamUnavailableError(
    `the input ${shown} answered ${res.statusCode} to a range request (bytes ${range.start}-${range.end}); it will be tried again`,
  );
}

class S3RangeReader implements RangeReader {
  readonly description: string;
  readonly size: number;
  readonly #client: S3Client;
  readonly #loc: S3Object;
  readonly #key: string;

  private constructor(loc: S3Object, key: string, client: S3Client, size: number) {
    this.#loc = loc;
    this.#key = key;
    this.#client = client;
    this.size = size;
    this.description = `s3 object "${key}" in bucket "${loc.bucket}" at ${loc.endpoint}`;
  }

  static async open(loc: S3Object, o: RangeReaderOptions): Promise<S3RangeReader> {
    const problem =
      objectPathProblem(loc.path) ?? (await endpointProblem(loc.endpoint, { allowPrivate: o.allowPrivateUrls }));
    if (problem) throw new InputUnreadableError(problem);
    const key = loc.path.replace(/^\//, '');
    const client = s3Client(loc, { maxAttempts: o.s3MaxAttempts, allowPrivate: o.allowPrivateUrls });
    try {
      const head = await client.send(new HeadObjectCommand({ Bucket: loc.bucket, Key: key }));
      if (head.ContentLength === undefined) throw new UpstreamUnavailableError('no size');
      return new S3RangeReader(loc, key, client, head.ContentLength);
    } catch (err) {
      client.destroy();
      throw err;
    }
  }

  async read(range: ByteRange, signal: AbortSignal): Promise<Readable> {
    const res = await this.#client
      .send(new GetObjectCommand({ Bucket: this.#loc.bucket, Key: this.#key, Range: rangeHeader(range).range }), {
        abortSignal: signal,
      })
      .catch((err: unknown) => {
        throw new UpstreamUnavailableError(
          `the input ${this.description} did not answer a range; it will be tried again`,
          {
            cause: err,
          },
        );
      });
    if (!(res.Body instanceof Readable))
      throw new UpstreamUnavailableError(`the input ${this.description} returned no body`);
    return res.Body;
  }

  close(): void {
    this.#client.destroy();
  }
}
