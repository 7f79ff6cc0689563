// One completion through the gateway, in three parts (issue #16): failover.ts decides who
// answers, billing.ts charges (reserve before forwarding, settle once the answer is out,
// release when an orchestrator fails before the first token, nothing reserved for a free one),
// and the outcome is recorded once, here (outcome.ts). This file picks the candidates, builds
// the body they are sent, and delivers the answer: the JSON, or the stream (relay.ts), as a
// chat completion or, for POST /v1/completions, a text completion. The prompts of one text
// completion are answered together under one joint charge (completeJointly, issue #25).

import { randomBytes } from 'node:crypto';
import type { Principal } from '../../accounts/index.ts';
import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import {
  BadRequestError,
  ContextLengthExceededError,
  MediaplaneError,
  PayloadTooLargeError,
} from '../../lib/errors.ts';
import { type ChatRequest, type Feature, maxTokensProblem, requiredFeatures } from '../protocol/index.ts';
import { type AnswerMeta, chatCompletion, textCompletion, textCompletionRewriter } from './assemble.ts';
import { beforeCharge } from './before-charge.ts';
import type { Billing, Charge, ChargeFor } from './billing.ts';
import { type Answer, askChat, deliverMeasured, type Whole } from './chat-attempt.ts';
import { selectCandidates } from './candidates.ts';
import { failover } from './failover.ts';
import type { GatewayMetrics } from './metrics.ts';
import { type Ended, recordOutcome } from './outcome.ts';
import type { Candidate, OrchestratorPool } from './pool.ts';
import { relay } from './relay.ts';

export interface CompleteDeps {
  pool: OrchestratorPool;
  billing: Billing;
  log: Logger;
  metrics: GatewayMetrics;
  /** The longest body it forwards (llm/protocol/ forwardedBodyLimit of its own body limit). */
  maxForwardBytes: number;
  maxPricePerToken: number;
  firstTokenTimeoutMs: number;
  idleTimeoutMs: number;
}

/** What the client is answered: OpenAI's chat.completion(.chunk), or text_completion (POST /v1/completions). */
export type AnswerShape = 'chat' | 'text_completion';

export interface CompleteOptions {
  owner: string;
  /** The key the request came with: its model allowlist, tokens and budget (issue #32). */
  key?: Principal | undefined;
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
  const candidates = await beforeCharge(lookupOf(deps, opts.key, body.model), () => candidatesFor(deps, body));
  const requestId = newRequestId(opts.shape);
  const forward = forwardBody(body, deps.maxForwardBytes);
  // Refusals above are not outcomes: the model label only takes models some orchestrator offers.
  const ended = await answer(deps, opts, {
    candidates,
    requestId,
    arrived,
    forward,
    charge: (c) => deps.billing.open(chargeFor(opts, body, c, requestId)),
  });
  return recordOutcome(deps.metrics, body.model, ended);
}

/**
 * Answers several non-streaming chat requests that are one client's request (the prompts of
 * POST /v1/completions) at once, under one id: their JSON answers in order, or undefined when
 * the client went away. One charge covers all of them, reserved before any is forwarded (402
 * with nothing reserved when the balance cannot cover it) and settled once every one answered.
 * When one is refused or fails, the others are stopped and nothing is charged: none of their
 * answers reaches the client (issue #25). Throws what the client is to be answered instead.
 */
export async function completeJointly(
  deps: CompleteDeps,
  opts: Omit<CompleteOptions, 'body'> & { bodies: readonly ChatRequest[] },
): Promise<unknown[] | undefined> {
  const arrived = performance.now();
  const { bodies, ...shared } = opts;
  const [first] = bodies;
  if (!first) return [];
  // The requests differ only in their prompt: the same orchestrators can answer each.
  const candidates = await beforeCharge(lookupOf(deps, opts.key, first.model), () => candidatesFor(deps, first));
  const requestId = newRequestId(opts.shape);
  const parts = bodies.map((body) => ({ body, forward: forwardBody(body, deps.maxForwardBytes) }));
  const joint = await deps.billing.openJoint(
    jointChargeFor({ owner: opts.owner, key: opts.key, first, bodies, candidates, requestId }),
  );
  if (joint instanceof MediaplaneError) {
    recordOutcome(deps.metrics, first.model, { outcome: 'refused', error: joint });
    throw joint;
  }
  const stop = new AbortController();
  const gone = AbortSignal.any([opts.clientGone, stop.signal]);
  const ended = await Promise.allSettled(
    parts.map(async ({ body, forward }) => {
      const part = { ...shared, body, clientGone: gone };
      const charge = async (c: Candidate) => joint.part(chargeFor(opts, body, c, requestId));
      const e = await answer(deps, part, { candidates, requestId, arrived, forward, charge }).catch((err: unknown) => {
        stop.abort();
        throw err;
      });
      if (e.outcome !== 'completed') stop.abort();
      return e;
    }),
  );
  const completed = ended.every((e) => e.status === 'fulfilled' && e.value.outcome === 'completed');
  await (completed ? joint.settle() : joint.release());
  return jointAnswers(deps.metrics, first.model, ended);
}

/** Records each part's outcome; the answers, or the first part's refusal or failure thrown. */
function jointAnswers(
  metrics: GatewayMetrics,
  model: string,
  ended: ReadonlyArray<PromiseSettledResult<Ended>>,
): unknown[] | undefined {
  const answers: unknown[] = [];
  let problem: { error: unknown } | undefined;
  for (const e of ended) {
    if (e.status === 'rejected') {
      problem ??= { error: e.reason };
      continue;
    }
    try {
      answers.push(recordOutcome(metrics, model, e.value).json);
    } catch (err) {
      problem ??= { error: err };
    }
  }
  if (problem) throw problem.error;
  return answers.every((a) => a !== undefined) ? answers : undefined;
}

/** What the failover loop of one chat request is given (complete and completeJointly alike). */
interface Asked {
  candidates: readonly Candidate[];
  requestId: string;
  /** performance.now() when the request reached the gateway. */
  arrived: number;
  forward: string;
  charge(c: Candidate): Promise<Charge | MediaplaneError>;
}

/** Runs the failover loop for one request and delivers its answer. */
function answer(deps: CompleteDeps, opts: CompleteOptions, o: Asked): Promise<Ended> {
  const { body } = opts;
  const { requestId, arrived } = o;
  const ask = { forward: o.forward, requestId, stream: body.stream, clientGone: opts.clientGone };
  return failover(
    deps,
    { candidates: o.candidates, model: body.model, requestId, clientGone: opts.clientGone },
    {
      charge: o.charge,
      ask: (c) => askChat(deps, c, ask),
      deliver: (reply, charge, c) =>
        deliverMeasured(deps, c, { reply, model: body.model, requestId, arrived }, () =>
          deliver(deps, opts, { charge, reply }, requestId),
        ),
    },
  );
}

function newRequestId(shape: AnswerShape | undefined): string {
  const prefix = shape === 'text_completion' ? 'cmpl' : 'chatcmpl';
  return `${prefix}-${randomBytes(12).toString('hex')}`;
}

/** What beforeCharge needs of a request's key and model. */
function lookupOf(deps: CompleteDeps, key: Principal | undefined, model: string) {
  return { billing: deps.billing, pool: deps.pool, key, model };
}

/**
 * The orchestrators that may answer, best first (candidates.ts): those serving the model that
 * can honour the request (its features), under the price ceiling, with the context for
 * max_tokens; 400 naming the field nobody serving it can honour.
 */
async function candidatesFor(deps: CompleteDeps, body: ChatRequest): Promise<Candidate[]> {
  const needs = requiredFeatures(body);
  const affordable = await selectCandidates(deps.pool, {
    model: body.model,
    able: (c) => needs.every((n) => c.features.includes(n.feature)),
    unable: (serving) => unsupported(body.model, needs, serving),
    ceiling: ceilingOf(deps.maxPricePerToken, body.max_price_per_token),
    doing: `offers the model ${body.model}`,
  });
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

/**
 * A joint charge: each request's choices may take max_tokens, and each request may fail over to
 * any of the candidates, so the most it can cost is all of them at the highest price among them.
 */
function jointChargeFor(o: {
  owner: string;
  key: Principal | undefined;
  first: ChatRequest;
  bodies: readonly ChatRequest[];
  candidates: readonly Candidate[];
  requestId: string;
}): ChargeFor {
  return {
    owner: o.owner,
    key: o.key,
    maxTokens: o.bodies.reduce((sum, b) => sum + tokensReserved(b), 0),
    choices: o.first.n ?? 1,
    prompts: o.bodies.length,
    pricePerToken: Math.max(...o.candidates.map((c) => c.pricePerToken)),
    model: o.first.model,
    orchestrator: o.candidates[0]?.orchestrator.url ?? '',
    requestId: o.requestId,
  };
}

/** Each of the n choices may take max_tokens: the price basis is all of them. */
function tokensReserved(body: ChatRequest): number {
  return body.max_tokens * (body.n ?? 1);
}

/** One request's charge at one candidate. */
function chargeFor(
  who: { owner: string; key?: Principal | undefined },
  body: ChatRequest,
  c: Candidate,
  requestId: string,
): ChargeFor {
  return {
    owner: who.owner,
    key: who.key,
    maxTokens: tokensReserved(body),
    choices: body.n ?? 1,
    pricePerToken: c.pricePerToken,
    model: body.model,
    orchestrator: c.orchestrator.url,
    requestId,
  };
}

/**
 * The body sent to orchestrators: the validated request, always streamed, without what only
 * the gateway reads (the caller's price ceiling, include_usage). Re-serialised, it may be
 * longer than the body that came (see llm/protocol/transport.ts FORWARD_OVERHEAD_BYTES): what takes it past
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
  if (r.usage) {
    await charge.settle(r.usage.completion_tokens);
    return { outcome: 'completed', usage: r.usage };
  }
  if (opts.clientGone.aborted || opts.res.destroyed) {
    await charge.settle(r.delivered);
    return { outcome: 'cancelled' };
  }
  // Broken off by its orchestrator (event: error): the tokens the client got, not the rest (issue #25).
  await charge.cutOff(r.delivered);
  return { outcome: 'failed' };
}

function wholeAnswer(opts: CompleteOptions, whole: Whole, requestId: string): unknown {
  const meta: AnswerMeta = { id: requestId, created: whole.created, model: opts.body.model, usage: whole.usage };
  const withLogprobs = opts.body.logprobs === true;
  if (opts.shape === 'text_completion') return textCompletion(meta, whole.choices, withLogprobs);
  return chatCompletion(meta, whole.choices, withLogprobs);
}
