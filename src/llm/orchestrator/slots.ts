// Capacity per model: MAX_NUM_SEQS sequences generate at once, one per request or n for a
// request with n choices; a few more requests wait briefly for free sequences, then are refused
// (the gateway tries another orchestrator on that 503).

import { UpstreamUnavailableError } from '../../lib/errors.ts';

export class Slots {
  readonly total: number;
  #busy = 0;
  /** In arrival order: the first is granted first, and none overtakes it (no starving a large n). */
  readonly #waiting: Array<{ n: number; grant: () => void }> = [];
  readonly #maxQueue: number;
  readonly #queueMs: number;

  constructor(opts: { total: number; maxQueue: number; queueMs: number }) {
    this.total = opts.total;
    this.#maxQueue = opts.maxQueue;
    this.#queueMs = opts.queueMs;
  }

  get free(): number {
    return this.total - this.#busy;
  }
  get queued(): number {
    return this.#waiting.length;
  }

  /**
   * Resolves with a release function once `n` sequences (at most `total`) are free; throws 503
   * when they do not free up in time.
   */
  async acquire(signal: AbortSignal, n = 1): Promise<() => void> {
    if (this.free >= n && this.#waiting.length === 0) return this.#take(n);
    if (this.#waiting.length >= this.#maxQueue || this.#queueMs === 0)
      throw new UpstreamUnavailableError(`busy: ${this.total - this.free} of ${this.total} sequences in use`);
    return new Promise((resolve, reject) => {
      const entry = {
        n,
        grant: () => {
          cleanup();
          resolve(this.#take(n));
        },
      };
      const fail = (err: Error): void => {
        cleanup();
        const i = this.#waiting.indexOf(entry);
        if (i !== -1) this.#waiting.splice(i, 1);
        // It may have held back smaller requests behind it.
        this.#grant();
        reject(err);
      };
      const timer = setTimeout(
        () =>
          fail(
            new UpstreamUnavailableError(
              `busy: ${n === 1 ? 'no sequence' : `not ${n} sequences`} of ${this.total} came free in ${this.#queueMs} ms`,
            ),
          ),
        this.#queueMs,
      );
      const onAbort = (): void => fail(new Error('client went away while queued'));
      signal.addEventListener('abort', onAbort, { once: true });
      const cleanup = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      };
      this.#waiting.push(entry);
    });
  }

  #take(n: number): () => void {
    this.#busy += n;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#busy -= n;
      this.#grant();
    };
  }

  /** Grants waiting requests in order while the first one's sequences are free. */
  #grant(): void {
    for (let next = this.#waiting[0]; next && this.free >= next.n; next = this.#waiting[0]) {
      this.#waiting.shift();
      next.grant();
    }
  }
}
