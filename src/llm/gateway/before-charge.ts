// What a request meets before its charge: the key's model allowlist, then the orchestrators
// that may answer. A limited key's request is counted in the one statement that holds its
// charge (KeyLimiter.hold; bench/README.md "Limits"), so the path that charges costs a single
// round trip. One refused before it gets there is counted here instead, refusing: a key past
// its requests window is answered the window's 429 (with Retry-After) whatever else was wrong,
// as the task API answers it before anything else, and the refused request is not counted.

import { checkModel, type Principal } from '../../accounts/index.ts';
import type { Billing } from './billing.ts';
import type { OrchestratorPool } from './pool.ts';

/**
 * Runs `lookup` (the orchestrators for `model`) after the key's model allowlist. Any refusal
 * is the requests window's 429 when that is spent; a model no orchestrator offers yet (the
 * pool then polls every orchestrator) is looked up only for a key still within its window.
 */
export async function beforeCharge<T>(
  o: { billing: Billing; pool: OrchestratorPool; key: Principal | undefined; model: string },
  lookup: () => Promise<T>,
): Promise<T> {
  try {
    checkModel(o.key?.limits, o.model);
    // Off the hot path: a model some orchestrator offers goes straight to its charge.
    if (!o.pool.offers(o.model)) await o.billing.countNow(o.key);
    return await lookup();
  } catch (err) {
    // A request already counted (above, or in a hold) is not counted again: only `err` is thrown.
    await o.billing.countNow(o.key);
    throw err;
  }
}
