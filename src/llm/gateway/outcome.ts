// How a completion that reached an orchestrator ended. The failover loop and the relay return
// one of these instead of counting it themselves, so the outcome is recorded in one place
// (issue #16: it used to be counted at seven).

import type { MediaplaneError } from '../../lib/errors.ts';
import type { Usage } from '../protocol/index.ts';
import type { GatewayMetrics } from './metrics.ts';

export type Ended =
  /** `json`: the whole answer of a non-streaming request; absent when it was streamed. */
  | { outcome: 'completed'; usage: Usage; json?: unknown }
  /** The client went away; nothing more is sent. */
  | { outcome: 'cancelled' }
  /** `error`: what the client is answered; absent when a stream already told it (`event: error`). */
  | { outcome: 'failed'; error?: MediaplaneError }
  /** Refused for credit (402) or as an orchestrator refused the request (its 400). */
  | { outcome: 'refused'; error: MediaplaneError };

export const CANCELLED: Ended = { outcome: 'cancelled' };

/** Records how the completion ended, then answers: the JSON to send, or the error to throw. */
export function recordOutcome(metrics: GatewayMetrics, model: string, ended: Ended): { json?: unknown } {
  metrics.finished(model, ended.outcome, ended.outcome === 'completed' ? ended.usage : undefined);
  if ((ended.outcome === 'failed' || ended.outcome === 'refused') && ended.error) throw ended.error;
  return ended.outcome === 'completed' && ended.json !== undefined ? { json: ended.json } : {};
}
