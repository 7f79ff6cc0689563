// One backoff for everything that tries again (issue #26: the task worker and the webhook
// dispatcher each had their own): a delay that doubles with each failure up to a cap, jittered
// so that the many retries one outage caused do not all come back at the same instant.

export interface Backoff {
  /** The delay after the first failure, before jitter. */
  baseMs: number;
  /** The longest delay, before jitter. */
  maxMs: number;
  /** The range the nominal delay is multiplied by, drawn uniformly: [low, high). */
  jitter: readonly [low: number, high: number];
}

/**
 * The delay after failure `n` (0 for the first): min(maxMs, baseMs * 2^n), times a factor drawn
 * from `jitter` by `random` (Math.random's range, [0, 1)), rounded to a whole ms.
 */
export function backoffMs(n: number, b: Backoff, random: () => number = Math.random): number {
  // 2^40 ms is 35 years, past any cap; the bound keeps a zero base from giving 0 * Infinity.
  const nominal = Math.min(b.maxMs, b.baseMs * 2 ** Math.min(Math.max(0, n), 40));
  const [low, high] = b.jitter;
  return Math.round(nominal * (low + (high - low) * random()));
}
