// Who answers a request: the candidates are tried best-first until one answers. Before that
// nothing has reached the client, so any failure (connect error, 5xx, 503, timeout) marks the
// orchestrator down, releases its charge and goes on to the next (API.md section B). One loop
// and one summary of the failures for every kind of request (issue #26): what differs between
// chat (chat-attempt.ts: up to its first token) and embeddings (embeddings.ts: the whole
// vectors) is given as a RequestKind. It counts failovers, never outcomes.

import type { Logger } from 'pino';
import { MediaplaneError, TimeoutError, UpstreamFailedError, UpstreamUnavailableError } from '../../lib/errors.ts';
import type { GatewayMetrics } from './metrics.ts';
import { CANCELLED, type Ended } from './outcome.ts';
import type { Candidate, OrchestratorPool } from './pool.ts';

export interface FailoverDeps {
  pool: OrchestratorPool;
  log: Logger;
  metrics: GatewayMetrics;
}

/** What one orchestrator did: answered, failed (the next is tried), or refused the caller's request. */
export type Tried<T> =
  | { kind: 'answered'; answer: T }
  | { kind: 'failed'; error: MediaplaneError }
  | { kind: 'rejected'; error: MediaplaneError };

/** What differs per kind of request: how a candidate is charged, asked, and its answer delivered. */
export interface RequestKind<T, C extends { release(): Promise<void> }> {
  /** Opens the charge for a candidate before it is asked; an error refuses the request (402). */
  charge(c: Candidate): Promise<C | MediaplaneError>;
  /** Asks one orchestrator, up to the point where its answer is the client's. */
  ask(c: Candidate): Promise<Tried<T>>;
  /** Sends the answer on and settles its charge. */
  deliver(answer: T, charge: C, c: Candidate): Promise<Ended>;
}

export interface FailoverRequest {
  /** Best first (OrchestratorPool.candidates). */
  candidates: readonly Candidate[];
  model: string;
  requestId: string;
  clientGone: AbortSignal;
}

/**
 * Finds the orchestrator that answers and hands its answer to `kind.deliver`, which sends it
 * on and settles the charge. The orchestrator counts as busy (`inflight`) until that is done.
 */
export async function failover<T, C extends { release(): Promise<void> }>(
  deps: FailoverDeps,
  req: FailoverRequest,
  kind: RequestKind<T, C>,
): Promise<Ended> {
  const failures: MediaplaneError[] = [];
  for (const c of req.candidates) {
    if (req.clientGone.aborted) return CANCELLED;
    const charge = await kind.charge(c);
    if (charge instanceof MediaplaneError) return { outcome: 'refused', error: charge };
    c.orchestrator.inflight++;
    try {
      const tried = await kind.ask(c);
      if (tried.kind === 'answered') return await kind.deliver(tried.answer, charge, c);
      await charge.release();
      if (tried.kind === 'rejected') return { outcome: 'refused', error: tried.error };
      if (req.clientGone.aborted) return CANCELLED;
      failedOver(deps, c, { model: req.model, requestId: req.requestId, error: tried.error });
      failures.push(tried.error);
    } finally {
      c.orchestrator.inflight--;
    }
  }
  return { outcome: 'failed', error: summarize(req.model, failures) };
}

function failedOver(
  deps: FailoverDeps,
  c: Candidate,
  o: { model: string; requestId: string; error: MediaplaneError },
): void {
  deps.metrics.failedBeforeFirstToken(o.model, c.orchestrator.url);
  deps.log.warn(
    { orchestrator: c.orchestrator.url, model: o.model, err: o.error.message, requestId: o.requestId },
    'orchestrator failed before the first token; trying the next',
  );
  deps.pool.markDown(c.orchestrator);
}

/** What the client is told when every orchestrator failed. */
function summarize(model: string, failures: MediaplaneError[]): MediaplaneError {
  const detail = failures.map((f) => f.message).join('; ');
  if (failures.length > 0 && failures.every((f) => f instanceof TimeoutError))
    return new TimeoutError(`every orchestrator for ${model} timed out (${detail})`);
  if (failures.every((f) => f instanceof UpstreamUnavailableError))
    return new UpstreamUnavailableError(`every orchestrator for ${model} is busy or down (${failures.length} tried)`);
  return new UpstreamFailedError(
    `the orchestrators for ${model} failed and no other could take the request (${failures.length} tried)`,
  );
}
