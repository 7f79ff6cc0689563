/**
 * A wake-up that is not lost when it fires while nobody waits (a NOTIFY during a read): the
 * next wait returns at once. One waiter at a time.
 */
export class Wakeup {
  #pending = false;
  #resolve: (() => void) | undefined;

  readonly fire = (): void => {
    this.#pending = true;
    this.#resolve?.();
  };

  /** Forgets a fire that no wait has taken yet (the poll loop's pass about to start covers it). */
  clear(): void {
    this.#pending = false;
  }

  /** Resolves on a fire (also one since the last wait), after `ms` (never without it), or on abort. */
  async wait(ms: number | undefined, signal: AbortSignal): Promise<void> {
    if (this.#pending || signal.aborted) {
      this.#pending = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.#resolve = undefined;
        resolve();
      };
      const timer = ms === undefined ? undefined : setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.#resolve = done;
    });
    this.#pending = false;
  }
}
