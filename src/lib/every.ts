// A job repeated on a timer by a long-lived component (a heartbeat, a sweep): never two runs
// at once, so a slow database does not pile them up (a tick while one runs is skipped); the
// timer keeps no process alive; stopping waits for the run under way.

export interface Repeating {
  /** No more runs; resolves once the run under way (if any) has finished. */
  stop(): Promise<void>;
}

/** Runs `job` every `everyMs` from now, one interval first. `job` must not throw: it logs its own failures. */
export function everyWithoutOverlap(everyMs: number, job: () => Promise<void>): Repeating {
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    running ??= job().finally(() => {
      running = undefined;
    });
  }, everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
