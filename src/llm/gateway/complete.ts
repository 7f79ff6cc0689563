// One chat completion through the gateway, in three parts (issue #16): failover.ts decides who
// answers, billing.ts charges (reserve before forwarding, settle once the answer is out,
// release when an orchestrator fails before the first token, nothing reserved for a free one),
// and the outcome is recorded once, here (outcome.ts). This file picks the candidates, builds
// the body they are sent, and delivers the answer: the JSON, or the stream (relay.ts).

import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { ContextLengthExceededError, ModelNotFoundError, PayloadTooLargeError } from '../../lib/errors.ts';
import { maxTokensProblem, type ChatRequest } from '../protocol.ts';
import type { Billing, ChargeFor } from './billing.ts';
import { failover, type Answer, type Whole } from './failover.ts';
import type { GatewayMetrics } from './metrics.ts';
import { recordOutcome, type Ended } from './outcome.ts';
import type { Candidate, OrchestratorPool } from './pool.ts';
import { relay } from './relay.ts';

export interface CompleteDeps {
  pool: OrchestratorPool;
  billing: Billing;
  log: Logger;
  metrics: GatewayMetrics;
  /** The longest body it forwards (protocol.ts forwardedBodyLimit of its own body limit). */
  maxForwardBytes: number;
  maxPricePerToken: number;
  firstTokenTimeoutMs: number;
  idleTimeoutMs: number;
}

export interface CompleteOptions {
  owner: string;
  body: ChatRequest;
  res: ServerResponse;
  clientGone: AbortSignal;
}

/**
 * Answers one chat request: `json` for a non-streaming one; a streaming one is written to
 * `res`. Throws what the client is to be answered instead (its status and message).
 */
export async function complete(deps: CompleteDeps, opts: CompleteOptions): Promise<{ json?: unknown }> {
  const arrived = performance.now();
  const { body } = opts;
  const candidates = await candidatesFor(deps, body);
  const requestId = `chatcmpl-${randomBytes(12).toString('hex')}`;
  const forward = forwardBody(body, deps.maxForwardBytes);
  // Refusals above are not outcomes: the model label only takes models some orchestrator offers.
  const ended = await failover(
    deps,
    {
      candidates,
      model: body.model,
      forward,
      requestId,
      stream: body.stream,
      clientGone: opts.clientGone,
      arrived,
      charge: (c) => deps.billing.open(chargeFor(opts.owner, body, c, requestId)),
    },
    (answer) => deliver(deps, opts, answer, requestId),
  );
  return recordOutcome(deps.metrics, body.model, ended);
}

/** The orchestrators that may answer, best first; refused before anything is reserved when none. */
async function candidatesFor(deps: CompleteDeps, body: ChatRequest): Promise<Candidate[]> {
  const { pool } = deps;
  if (!pool.offers(body.model)) await pool.refresh();
  if (pool.candidates(body.model, 0).length === 0)
    throw new ModelNotFoundError(`no orchestrator offers the model ${body.model}`);
  const ceiling = ceilingOf(deps.maxPricePerToken, body.max_price_per_token);
  const affordable = pool.candidates(body.model, ceiling);
  if (affordable.length === 0)
    throw new ModelNotFoundError(`no orchestrator offers the model ${body.model} at or under ${ceiling} USD per token`);
  // Refused here when no orchestrator's context can hold max_tokens.
  const candidates = affordable.filter((c) => maxTokensProblem(body.max_tokens, c.contextLength) === undefined);
  if (candidates.length > 0) return candidates;
  const largest = Math.max(...affordable.map((c) => c.contextLength ?? 0));
  throw new ContextLengthExceededError(maxTokensProblem(body.max_tokens, largest) ?? 'max_tokens: too large');
}

/** The lower of two ceilings, where 0/undefined means none. */
function ceilingOf(operator: number, caller: number | undefined): number {
  const set = [operator, caller ?? 0].filter((x) => x > 0);
  return set.length ? Math.min(...set) : 0;
}

function chargeFor(owner: string, body: ChatRequest, c: Candidate, requestId: string): ChargeFor {
  return {
    owner,
    maxTokens: body.max_tokens,
    pricePerToken: c.pricePerToken,
    model: body.model,
    orchestrator: c.orchestrator.url,
    requestId,
  };
}

/**
 * The body sent to orchestrators: the validated request, always streamed, without the
 * caller's price ceiling. Re-serialised, it may be longer than the body that came (see
 * protocol.ts FORWARD_OVERHEAD_BYTES); only invalid UTF-8, each byte of it decoded to a
 * 3-byte U+FFFD, can take it past what an orchestrator with the same body limit accepts,
 * and that is refused here as too large, not there as a misleading 400 (issue #15).
 */
function forwardBody(body: ChatRequest, maxBytes: number): string {
  const { max_price_per_token: _ceiling, ...rest } = body;
  const forward = JSON.stringify({ ...rest, stream: true });
  const bytes = Buffer.byteLength(forward);
  if (bytes > maxBytes)
    throw new PayloadTooLargeError(
      `request body is too large: ${bytes} bytes once re-encoded as UTF-8 (invalid UTF-8 counts 3 bytes a byte), ${maxBytes} at most`,
    );
  return forward;
}

/** Sends the answer on and settles its charge: the tokens of its usage, or those delivered when none came. */
async function deliver(deps: CompleteDeps, opts: CompleteOptions, answer: Answer, requestId: string): Promise<Ended> {
  const { reply, charge } = answer;
  if (reply.kind === 'complete') {
    await charge.settle(reply.usage.completion_tokens);
    return { outcome: 'completed', usage: reply.usage, json: chatCompletion(reply, opts.body.model, requestId) };
  }
  const r = await relay(deps, reply, opts.res);
  await charge.settle(r.usage?.completion_tokens ?? r.delivered);
  if (r.usage) return { outcome: 'completed', usage: r.usage };
  return { outcome: opts.clientGone.aborted || opts.res.destroyed ? 'cancelled' : 'failed' };
}

function chatCompletion(whole: Whole, model: string, requestId: string): unknown {
  return {
    id: requestId,
    object: 'chat.completion',
    created: whole.created,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: whole.content }, finish_reason: whole.finish }],
    usage: whole.usage,
  };
}
