// Capacity per model: MAX_NUM_SEQS requests run at once; a few more wait briefly for a free
// slot, then are refused (the gateway tries another orchestrator on that 503).

import { UpstreamUnavailableError } from '../../lib/errors.ts';

export class Slots {
  readonly total: number;
  #busy = 0;
  readonly #waiting: Array<{ grant: () => void }> = [];
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

  /** Resolves with a release function once a slot is free; throws 503 when none frees up in time. */
  async acquire(signal: AbortSignal): Promise<() => void> {
    if (this.#busy < this.total && this.#waiting.length === 0) return this.#take();
    if (this.#waiting.length >= this.#maxQueue || this.#queueMs === 0)
      throw new UpstreamUnavailableError(`busy: all ${this.total} sequences in use`);
    return new Promise((resolve, reject) => {
      const entry = {
        grant: () => {
          cleanup();
          resolve(this.#take());
        },
      };
      const fail = (err: Error): void => {
        cleanup();
        const i = this.#waiting.indexOf(entry);
        if (i !== -1) this.#waiting.splice(i, 1);
        reject(err);
      };
      const timer = setTimeout(
        () => fail(new UpstreamUnavailableError(`busy: all ${this.total} sequences in use for ${this.#queueMs} ms`)),
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

  #take(): () => void {
    this.#busy++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#busy--;
      this.#waiting.shift()?.grant();
    };
  }
}
