import { backoffMs } from '../lib/backoff.ts';

// When a failed job runs again (issue #20). A retryable failure is mostly something outside
// the service being down for a while (a storage outage, an input server restarting), so the
// delays grow fast enough to outlast a minute-long outage in a few retries, jittered so
// that the tasks one outage failed together do not all come back in the same second.

export interface RetryBackoff {
  /** Delay before the first retry (MEDIAPLANE_RETRY_BACKOFF_MS); doubles with each retry. */
  baseMs: number;
  /** Longest delay before jitter (MEDIAPLANE_RETRY_BACKOFF_MAX_MS). */
  maxMs: number;
}

/** Each delay is spread over +-25% of its nominal value. */
export const RETRY_JITTER = 0.25;

/**
 * The delay before the retry that follows `failures` earlier failed runs of this task (0 for
 * the first retry): min(max, base * 2^failures), times a factor drawn from
 * [1 - RETRY_JITTER, 1 + RETRY_JITTER) by `random` (Math.random's range, [0, 1)).
 */
export function retryDelayMs(failures: number, b: RetryBackoff, random: () => number = Math.random): number {
  return backoffMs(failures, { ...b, jitter: [1 - RETRY_JITTER, 1 + RETRY_JITTER] }, random);
}

/**
 * The most retries an outage of `outageMs` can cost a task: its runs fail at once (the worst
 * case: no time spent before reaching the dead service), and every delay is the shortest the
 * jitter allows. The run that starts after the outage succeeds; each one before it was a retry
 * but the first. What operators read in the settings' descriptions, checked by the tests.
 */
export function worstCaseRetries(outageMs: number, b: RetryBackoff): number {
  let waited = 0;
  let retries = 0;
  // Bounded: a zero base would never get past the outage.
  while (waited < outageMs && retries < 1000) {
    waited += retryDelayMs(retries, b, () => 0);
    retries++;
  }
  return retries;
}
