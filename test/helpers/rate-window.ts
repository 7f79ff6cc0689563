// The keys' rate windows are fixed and aligned on the epoch (accounts/limit-sql.ts: the window
// starts at now - now % windowMs, by the database's clock, which is this host's). A test that
// counts exactly N requests in one window must not straddle two of them.

import { sleep } from './sleep.ts';

/** Waits, when needed, until the current `windowMs` window has at least `needMs` left. */
export async function freshWindow(windowMs: number, needMs: number): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < needMs) await sleep(left + 50);
}
