// Which orchestrators may answer a request, best first (API.md section B): the one selection
// that chat, text completions and embeddings share. Each request says what an orchestrator
// must be able to do and how a refusal names what nobody can; the order, the poll of an
// unknown model and the price ceiling are decided here.

import { type MediaplaneError, ModelNotFoundError } from '../../lib/errors.ts';
import type { Candidate, OrchestratorPool } from './pool.ts';

export interface Wanted {
  model: string;
  /** Whether an orchestrator serving the model can honour the request (its features). */
  able(c: Candidate): boolean;
  /** The 400 when orchestrators serve the model but none of them is able. */
  unable(serving: Candidate[]): MediaplaneError;
  /** USD per token at most (0: no ceiling). */
  ceiling: number;
  /** What the able ones do, in the 404 when none is under the ceiling: `offers the model m`. */
  doing: string;
}

/**
 * The able orchestrators serving the model under the ceiling, best first. A model nobody is
 * known to offer polls every orchestrator first. Refused before anything is reserved: 404 for
 * a model nobody offers or nobody able offers under the ceiling, `unable` when nobody serving
 * it can honour the request.
 */
export async function selectCandidates(pool: OrchestratorPool, w: Wanted): Promise<Candidate[]> {
  if (!pool.offers(w.model)) await pool.refresh();
  const serving = pool.candidates(w.model, 0);
  if (serving.length === 0) throw new ModelNotFoundError(`no orchestrator offers the model ${w.model}`);
  if (!serving.some(w.able)) throw w.unable(serving);
  const affordable = pool.candidates(w.model, w.ceiling).filter(w.able);
  if (affordable.length === 0)
    throw new ModelNotFoundError(`no orchestrator ${w.doing} at or under ${w.ceiling} USD per token`);
  return affordable;
}
