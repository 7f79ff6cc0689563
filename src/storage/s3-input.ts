import { Readable } from 'node:stream';
import { GetObjectCommand, type GetObjectCommandOutput, type S3Client } from '@aws-sdk/client-s3';
import { InputUnreadableError, UpstreamUnavailableError } from '../lib/errors.ts';
import { objectPathProblem } from '../lib/object-path.ts';
import { privateAddressError, type Resolve, withAllowHint } from '../lib/net-guard.ts';
import { DownloadGuard, type DownloadLimits } from './download.ts';
import { endpointProblem, s3Client, s3Failure } from './s3.ts';
import type { FetchedInput, FetchOptions, InputSource, S3Location, S3Object } from './types.ts';

export interface S3InputSourceOptions {
  limits: DownloadLimits;
  maxAttempts: number;
  allowPrivate: boolean;
  /** How the endpoint's host name is resolved, checked and connected; a seam for tests (DNS rebinding, issue #15). */
  resolve?: Resolve;
}

/** An input object in an S3-compatible bucket, streamed with GetObject. */
export class S3InputSource implements InputSource {
  readonly description: string;
  readonly #loc: S3Location;
  readonly #key: string;
  /** What the path rule says of `input.path` (issue #15), asserted again before any request. */
  readonly #keyProblem: string | null;
  readonly #opts: S3InputSourceOptions;

  constructor(loc: S3Object, opts: S3InputSourceOptions) {
    this.#loc = loc;
    this.#keyProblem = objectPathProblem(loc.path);
    this.#key = loc.path.startsWith('/') ? loc.path.slice(1) : loc.path;
    this.#opts = opts;
    this.description = `s3 object "${this.#key}" in bucket "${loc.bucket}" at ${loc.endpoint}`;
  }

  async fetch(opts: FetchOptions): Promise<FetchedInput> {
    if (this.#keyProblem) throw new InputUnreadableError(`input.path: ${this.#keyProblem}`);
    const { allowPrivate, resolve, maxAttempts } = this.#opts;
    const problem = await endpointProblem(this.#loc.endpoint, { allowPrivate, resolve });
    if (problem) throw new InputUnreadableError(`the input S3 endpoint is not allowed: ${problem}`);
    const client = s3Client(this.#loc, { maxAttempts, allowPrivate, resolve });
    const guard = new DownloadGuard(opts.signal, this.#opts.limits);
    try {
      const body = await this.#open(client, guard);
      const size = await guard.toFile(body.stream, opts.dest, (n) => opts.onBytes?.(n, body.size));
      return { path: opts.dest, size };
    } catch (err) {
      throw guard.explain(err, `the input ${this.description}`);
    } finally {
      guard.done();
      client.destroy();
    }
  }

  async #open(client: S3Client, guard: DownloadGuard): Promise<{ stream: Readable; size: number | undefined }> {
    let res: GetObjectCommandOutput;
    try {
      res = await client.send(new GetObjectCommand({ Bucket: this.#loc.bucket, Key: this.#key }), {
        abortSignal: guard.signal,
      });
    } catch (err) {
      if (guard.signal.aborted) throw err;
      throw this.#explain(err);
    }
    if (!(res.Body instanceof Readable))
      throw new UpstreamUnavailableError(`the input ${this.description} returned no body`);
    guard.checkDeclaredSize(res.ContentLength);
    return { stream: res.Body, size: res.ContentLength };
  }

  #explain(err: unknown): InputUnreadableError | UpstreamUnavailableError {
    const { bucket, endpoint } = this.#loc;
    switch (s3Failure(err)) {
      case 'denied':
        return new InputUnreadableError(
          `the S3 server at ${endpoint} refused access to the input in bucket "${bucket}" (check the input credentials)`,
        );
      case 'no-bucket':
        return new InputUnreadableError(`the input bucket "${bucket}" does not exist at ${endpoint}`);
      case 'no-key':
        return new InputUnreadableError(`the input ${this.description} was not found`);
      case 'refused-address':
        return new InputUnreadableError(
          `the input S3 endpoint is not allowed: ${withAllowHint(`${privateAddressError(err)?.problem}, refused when connecting`)}`,
          { cause: err },
        );
      case 'unavailable':
        return new UpstreamUnavailableError(
          `the S3 server at ${endpoint} (input bucket "${bucket}") did not answer; it will be tried again`,
          { cause: err },
        );
    }
  }
}
