// One completion through the gateway, in three parts (issue #16): failover.ts decides who
// answers, billing.ts charges (reserve before forwarding, settle once the answer is out,
// release when an orchestrator fails before the first token, nothing reserved for a free one),
// and the outcome is recorded once, here (outcome.ts). This file picks the candidates, builds
// the body they are sent, and delivers the answer: the JSON, or the stream (relay.ts), as a
// chat completion or, for POST /v1/completions, a text completion.

import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import {
  BadRequestError,
  ContextLengthExceededError,
  ModelNotFoundError,
  PayloadTooLargeError,
} from '../../lib/errors.ts';
import { type ChatRequest, type Feature, maxTokensProblem, requiredFeatures } from '../protocol.ts';
import { type AnswerMeta, chatCompletion, textCompletion, textCompletionRewriter } from './assemble.ts';
import type { Billing, ChargeFor } from './billing.ts';
import { type Answer, failover, type Whole } from './failover.ts';
import type { GatewayMetrics } from './metrics.ts';
import { type Ended, recordOutcome } from './outcome.ts';
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

/** What the client is answered: OpenAI's chat.completion(.chunk), or text_completion (POST /v1/completions). */
export type AnswerShape = 'chat' | 'text_completion';

export interface CompleteOptions {
  owner: string;
  body: ChatRequest;
  res: ServerResponse;
  clientGone: AbortSignal;
  /** Default 'chat'. 'text_completion': each chunk rewritten, and ids `cmpl-`. */
  shape?: AnswerShape | undefined;
}

/**
 * Answers one chat request: `json` for a non-streaming one; a streaming one is written to
 * `res`. Throws what the client is to be answered instead (its status and message).
 */
export async function complete(deps: CompleteDeps, opts: CompleteOptions): Promise<{ json?: unknown }> {
  const arrived = performance.now();
  const { body } = opts;
  const candidates = await candidatesFor(deps, body);
  const prefix = opts.shape === 'text_completion' ? 'cmpl' : 'chatcmpl';
  const requestId = `${prefix}-${randomBytes(12).toString('hex')}`;
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

/**
 * The orchestrators that may answer, best first: those serving the model that can honour the
 * request (its features), under the price ceiling, with the context for max_tokens. Refused
 * before anything is reserved when none: 404 for a model nobody offers, 400 naming the field
 * nobody serving it can honour.
 */
async function candidatesFor(deps: CompleteDeps, body: ChatRequest): Promise<Candidate[]> {
  const { pool } = deps;
  if (!pool.offers(body.model)) await pool.refresh();
  const serving = pool.candidates(body.model, 0);
  if (serving.length === 0) throw new ModelNotFoundError(`no orchestrator offers the model ${body.model}`);
  const needs = requiredFeatures(body);
  const able = (c: Candidate) => needs.every((n) => c.features.includes(n.feature));
  if (!serving.some(able)) throw unsupported(body.model, needs, serving);
  const ceiling = ceilingOf(deps.maxPricePerToken, body.max_price_per_token);
  const affordable = pool.candidates(body.model, ceiling).filter(able);
  if (affordable.length === 0)
    throw new ModelNotFoundError(`no orchestrator offers the model ${body.model} at or under ${ceiling} USD per token`);
  // Refused here when no orchestrator's context can hold max_tokens.
  const candidates = affordable.filter((c) => maxTokensProblem(body.max_tokens, c.contextLength) === undefined);
  if (candidates.length > 0) return candidates;
  const largest = Math.max(...affordable.map((c) => c.contextLength ?? 0));
  throw new ContextLengthExceededError(maxTokensProblem(body.max_tokens, largest) ?? 'max_tokens: too large');
}

/**
 * The 400 for a request no orchestrator serving its model can honour, naming the first field
 * none of them can (or, when each could be honoured somewhere but not together, the first the
 * best one cannot).
 */
function unsupported(
  model: string,
  needs: Array<{ feature: Feature; param: string }>,
  serving: Candidate[],
): BadRequestError {
  const nowhere = needs.find((n) => !serving.some((c) => c.features.includes(n.feature)));
  if (nowhere)
    return new BadRequestError(`${nowhere.param}: not supported by any orchestrator serving ${model}`, {
      param: nowhere.param,
    });
  const best = serving[0];
  const first = needs.find((n) => !best?.features.includes(n.feature)) ?? needs[0];
  const param = first?.param ?? 'model';
  const all = needs.map((n) => n.param).join(', ');
  return new BadRequestError(`${param}: no orchestrator serving ${model} supports ${all} together`, { param });
}

/** The lower of two ceilings, where 0/undefined means none. */
function ceilingOf(operator: number, caller: number | undefined): number {
  const set = [operator, caller ?? 0].filter((x) => x > 0);
  return set.length ? Math.min(...set) : 0;
}

/** Each of the n choices may take max_tokens: the price basis is all of them. */
function chargeFor(owner: string, body: ChatRequest, c: Candidate, requestId: string): ChargeFor {
  const choices = body.n ?? 1;
  return {
    owner,
    maxTokens: body.max_tokens * choices,
    choices,
    pricePerToken: c.pricePerToken,
    model: body.model,
    orchestrator: c.orchestrator.url,
    requestId,
  };
}

/**
 * The body sent to orchestrators: the validated request, always streamed, without what only
 * the gateway reads (the caller's price ceiling, include_usage). Re-serialised, it may be
 * longer than the body that came (see protocol.ts FORWARD_OVERHEAD_BYTES): what takes it past
 * what an orchestrator with the same body limit accepts is refused here as too large, not
 * there as a misleading 400 (issue #15).
 */
function forwardBody(body: ChatRequest, maxBytes: number): string {
  const { max_price_per_token: _ceiling, include_usage: _usage, ...rest } = body;
  const forward = JSON.stringify({ ...rest, stream: true });
  const bytes = Buffer.byteLength(forward);
  if (bytes > maxBytes)
    throw new PayloadTooLargeError(
      `request body is too large: ${bytes} bytes once re-encoded for the orchestrator (invalid UTF-8 counts 3 bytes a byte), ${maxBytes} at most`,
    );
  return forward;
}

/** Sends the answer on and settles its charge: the tokens of its usage, or those delivered when none came. */
async function deliver(deps: CompleteDeps, opts: CompleteOptions, answer: Answer, requestId: string): Promise<Ended> {
  const { reply, charge } = answer;
  if (reply.kind === 'complete') {
    await charge.settle(reply.usage.completion_tokens);
    return { outcome: 'completed', usage: reply.usage, json: wholeAnswer(opts, reply, requestId) };
  }
  const text = opts.shape === 'text_completion';
  const r = await relay(deps, reply, opts.res, {
    includeUsage: opts.body.include_usage === true,
    rewrite: text ? textCompletionRewriter() : undefined,
  });
  await charge.settle(r.usage?.completion_tokens ?? r.delivered);
  if (r.usage) return { outcome: 'completed', usage: r.usage };
  return { outcome: opts.clientGone.aborted || opts.res.destroyed ? 'cancelled' : 'failed' };
}

function wholeAnswer(opts: CompleteOptions, whole: Whole, requestId: string): unknown {
  const meta: AnswerMeta = { id: requestId, created: whole.created, model: opts.body.model, usage: whole.usage };
  const withLogprobs = opts.body.logprobs === true;
  if (opts.shape === 'text_completion') return textCompletion(meta, whole.choices, withLogprobs);
  return chatCompletion(meta, whole.choices, withLogprobs);
}
