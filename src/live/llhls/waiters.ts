import { performance } from 'node:perf_hooks';

export type WaitOutcome = 'ready' | 'timeout' | 'aborted';

interface Held {
  /** performance.now() past which this wait answers 'timeout'. */
  deadline: number;
  settled: boolean;
}

/**
 * The requests one rendition holds (blocking playlist reloads, hinted parts): every waiter
 * awaits ONE shared promise that the next change (a part, restart, end) resolves, then
 * re-checks its own condition; so a thousand held requests cost one wake-up per part and no
 * timer each. The hold limit needs one timer for them all: deadlines are the arrival time plus
 * the same hold, so they come in arrival order and a FIFO gives the next one.
 */
export class ChangeWaiters {
  #change: PromiseWithResolvers<void> | undefined;
  #held: Held[] = [];
  #waiting = 0;
  #timer: NodeJS.Timeout | undefined;
  /** How many times a change woke the waiters (one per part, restart or end with anyone waiting). */
  wakeUps = 0;

  /** Requests held right now. */
  get waiting(): number {
    return this.#waiting;
  }

  /** Something changed: every waiter re-checks once. */
  wake(): void {
    const change = this.#change;
    if (change === undefined) return;
    this.#change = undefined;
    this.wakeUps++;
    change.resolve();
  }

  /** Resolves 'ready' once `ready()` holds (checked now and after each change), else 'timeout' or 'aborted'. */
  async until(ready: () => boolean, o: { holdMs: number; signal?: AbortSignal | undefined }): Promise<WaitOutcome> {
    if (ready()) return 'ready';
    if (o.signal?.aborted) return 'aborted';
    const held: Held = { deadline: performance.now() + o.holdMs, settled: false };
    this.#held.push(held);
    this.#waiting++;
    this.#arm();
    const aborted = abortPromise(o.signal);
    try {
      for (;;) {
        this.#change ??= Promise.withResolvers<void>();
        await Promise.race([this.#change.promise, aborted.promise]);
        if (o.signal?.aborted) return 'aborted';
        if (ready()) return 'ready';
        if (performance.now() >= held.deadline) return 'timeout';
      }
    } finally {
      held.settled = true;
      this.#waiting--;
      aborted.dispose();
      if (this.#waiting === 0) this.#disarm();
    }
  }

  /** Nobody waits: no timer keeps the process up for requests already answered. */
  #disarm(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#held = [];
  }

  /** One timer for the earliest deadline still held; it wakes everyone, the expired ones answer. */
  #arm(): void {
    if (this.#timer !== undefined) return;
    while (this.#held[0]?.settled) this.#held.shift();
    const next = this.#held[0];
    if (next === undefined) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        const now = performance.now();
        while (this.#held[0] !== undefined && (this.#held[0].settled || this.#held[0].deadline <= now)) {
          this.#held.shift();
        }
        this.wake();
        this.#arm();
      },
      Math.max(0, next.deadline - performance.now()),
    );
  }
}

/** A promise that resolves when `signal` aborts (never without one); dispose() removes the listener. */
function abortPromise(signal: AbortSignal | undefined): { promise: Promise<void>; dispose(): void } {
  if (signal === undefined) return { promise: new Promise<void>(() => {}), dispose: () => {} };
  const { promise, resolve } = Promise.withResolvers<void>();
  const onAbort = (): void => resolve();
  signal.addEventListener('abort', onAbort, { once: true });
  return { promise, dispose: () => signal.removeEventListener('abort', onAbort) };
}
