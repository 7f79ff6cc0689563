import { setTimeout as sleep } from 'node:timers/promises';
import { Wakeup } from './wakeup.ts';

// The poll loop of the task worker and of the webhook dispatcher (issue #26: they were two),
// after pg-boss's worker.ts: a pass, then a wait of `pollMs` that a wake-up (a NOTIFY, a job or
// a slot come free) ends at once. A wake-up that comes during a pass skips the next wait, so
// none is lost; stop() ends every wait and lets the pass under way finish.

export interface PollLoopOptions {
  /** One pass: look for work and start it. A throw goes to `onError` and the loop goes on. */
  pass: () => Promise<void>;
  /** How long an idle loop waits for a wake-up before it looks again. */
  pollMs: number;
  /**
   * Least time between the starts of two passes (default 0): wake-ups that come sooner join
   * the next pass instead of each costing one. Only stop() cuts this wait short.
   */
  gapMs?: number;
  onError: (err: unknown) => void;
}

export class PollLoop {
  readonly #o: PollLoopOptions;
  readonly #wakeup = new Wakeup();
  #stop = new AbortController();
  #loop: Promise<void> | undefined;
  #lastPassAt = -Infinity;

  constructor(opts: PollLoopOptions) {
    this.#o = opts;
  }

  /** From stop() until the next start(): a pass under way should wind up. */
  get stopping(): boolean {
    return this.#stop.signal.aborted;
  }

  /** Runs a pass soon: at once if the loop waits, else right after the pass under way. */
  readonly wake = (): void => this.#wakeup.fire();

  /** Runs passes in the background, once `first` (listening for wake-ups, say) has run. */
  start(first?: () => Promise<void>): void {
    if (this.#loop) return;
    this.#stop = new AbortController();
    this.#loop = this.#run(first);
  }

  /** Ends the waits and lets the pass under way finish; resolves when it has. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
    this.#loop = undefined;
  }

  async #run(first: (() => Promise<void>) | undefined): Promise<void> {
    await first?.();
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      await this.#spaced(signal);
      if (signal.aborted) break;
      this.#wakeup.clear();
      this.#lastPassAt = performance.now();
      try {
        await this.#o.pass();
      } catch (err) {
        this.#o.onError(err);
      }
      await this.#wakeup.wait(this.#o.pollMs, signal);
    }
  }

  /** Waits until `gapMs` after the last pass began. */
  async #spaced(signal: AbortSignal): Promise<void> {
    const wait = this.#lastPassAt + (this.#o.gapMs ?? 0) - performance.now();
    if (wait > 0) await sleep(wait, undefined, { signal }).catch(() => {});
  }
}
