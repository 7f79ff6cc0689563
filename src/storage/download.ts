import { createWriteStream } from 'node:fs';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  CancelledError,
  InputTooLargeError,
  isMediaplaneError,
  TimeoutError,
  UpstreamUnavailableError,
  type MediaplaneError,
} from '../lib/errors.ts';

export interface DownloadLimits {
  maxBytes: number;
  /** The whole download, connect included. */
  timeoutMs: number;
  /** Longest gap between two chunks (a stalled server holds a job forever otherwise). */
  idleTimeoutMs: number;
}

/**
 * One download's deadlines and abort wiring. `signal` aborts on the job's signal, the total
 * timeout, the idle timeout or the size limit; `explain()` turns whatever a stream or client
 * threw into the error family, so every input kind reports the same words.
 */
export class DownloadGuard {
  readonly signal: AbortSignal;
  readonly #job: AbortSignal;
  readonly #ctrl = new AbortController();
  readonly #limits: DownloadLimits;
  #idle: NodeJS.Timeout | undefined;
  readonly #total: NodeJS.Timeout;

  constructor(job: AbortSignal, limits: DownloadLimits) {
    this.#job = job;
    this.#limits = limits;
    this.signal = AbortSignal.any([job, this.#ctrl.signal]);
    this.#total = setTimeout(
      () => this.fail(new TimeoutError(`the input download took longer than ${limits.timeoutMs / 1000} s`)),
      limits.timeoutMs,
    );
    this.touch();
  }

  /** Resets the idle timer; call on every chunk. */
  touch(): void {
    clearTimeout(this.#idle);
    this.#idle = setTimeout(
      () => this.fail(new TimeoutError(`the input stopped sending data for ${this.#limits.idleTimeoutMs / 1000} s`)),
      this.#limits.idleTimeoutMs,
    );
  }

  fail(err: MediaplaneError): void {
    if (!this.#ctrl.signal.aborted) this.#ctrl.abort(err);
  }

  tooLarge(size: number): InputTooLargeError {
    return new InputTooLargeError(
      `the input is too large: ${size} bytes or more, the limit is ${this.#limits.maxBytes} bytes`,
    );
  }

  checkDeclaredSize(size: number | undefined): void {
    if (size !== undefined && size > this.#limits.maxBytes) throw this.tooLarge(size);
  }

  done(): void {
    clearTimeout(this.#idle);
    clearTimeout(this.#total);
  }

  /** Maps a thrown error to the family: cancel, our own abort reason, or a retryable network error. */
  explain(err: unknown, what: string): MediaplaneError {
    if (this.#job.aborted) return new CancelledError('cancelled', { cause: this.#job.reason });
    const reason: unknown = this.#ctrl.signal.reason;
    if (this.#ctrl.signal.aborted && isMediaplaneError(reason)) return reason;
    if (isMediaplaneError(err)) return err;
    const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : '';
    return new UpstreamUnavailableError(
      `${what} could not be read${code ? ` (${code})` : ''}; it will be tried again`,
      { cause: err },
    );
  }

  /** Streams `body` to `dest`, counting bytes against the limit. Returns the byte count. */
  async toFile(body: Readable, dest: string, onBytes?: (n: number) => void): Promise<number> {
    let received = 0;
    const counter = new Transform({
      transform: (chunk: Buffer, _enc, cb) => {
        received += chunk.length;
        this.touch();
        if (received > this.#limits.maxBytes) return cb(this.tooLarge(received));
        onBytes?.(received);
        cb(null, chunk);
      },
    });
    await pipeline(body, counter, createWriteStream(dest, { highWaterMark: 1 << 20 }), { signal: this.signal });
    return received;
  }
}
