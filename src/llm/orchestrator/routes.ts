// The orchestrator's HTTP face, for gateways: GET /capabilities (models warm or cold, price,
// free capacity) and POST /v1/chat/completions, which always streams OpenAI-style SSE chunks
// (the gateway assembles non-streaming answers itself, and needs to see the first token to
// decide whether it may still fail over).

import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { formatSse } from '../../lib/sse.ts';
import { routineRouteLevel } from '../../lib/log.ts';
import { secretMatches } from '../../lib/bearer.ts';
import {
  AuthError,
  ContextLengthExceededError,
  ModelNotFoundError,
  NotFoundError,
  ValidationError,
} from '../../lib/errors.ts';
import { openAiWireError, wireErrorHandler } from '../../lib/wire-errors.ts';
import {
  type Capabilities,
  type ChatRequest,
  chunkEncoder,
  forwardedBodyLimit,
  maxTokensProblem,
  REQUEST_ID_HEADER,
  requiredFeatures,
  usageChunk,
  validateChatRequest,
} from '../protocol/index.ts';
import type { Engine, GenerateEvent, GenerateParams } from './engine.ts';
import { embeddingsRoute } from './embeddings.ts';
import type { Slots } from './slots.ts';
import { StreamPacer } from './stream-pacer.ts';
import type { Logger } from 'pino';

export interface OrchestratorState {
  engine: Engine;
  pricePerToken: number;
  /** Least ms between two SSE writes of a stream (StreamPacer). */
  streamIntervalMs: number;
  secret?: string | undefined;
  /** MEDIAPLANE_BODY_LIMIT_BYTES: the chat route takes a gateway's re-serialised body of a request that size. */
  bodyLimitBytes: number;
  slots: (model: string) => Slots;
  log: Logger;
  stats: { active: number };
}

export function capabilities(
  s: OrchestratorState,
): Capabilities & { stats: { active: number; tokensComputed: number } } {
  return {
    engine: s.engine.name,
    features: [...s.engine.features],
    pricePerToken: s.pricePerToken,
    models: s.engine.models().map((m) => {
      const slots = s.slots(m.id);
      return { ...m, free: slots.free, total: slots.total, queued: slots.queued };
    }),
    // Output tokens computed since start: shows that an abandoned request really stopped.
    stats: { active: s.stats.active, tokensComputed: s.engine.tokensComputed },
  };
}

export async function orchestratorRoutes(app: FastifyInstance, s: OrchestratorState): Promise<void> {
  // Gateways send JSON only (see the gateway's routes).
  app.removeContentTypeParser('text/plain');
  // The gateway passes an orchestrator's 400 on to its client and tries another orchestrator
  // on anything else, so every mistake of the caller is a 400 here (context_length_exceeded
  // keeps its code, which the gateway passes on too); 401 and 404 are kept.
  app.setErrorHandler(wireErrorHandler((err) => openAiWireError(err, { callerMistakesAs400: true }), s.log));
  app.setNotFoundHandler((req, reply) => {
    const { status, body } = openAiWireError(
      new NotFoundError(`no such route: ${req.method} ${req.url.split('?')[0]}`),
    );
    return reply.status(status).send(body);
  });
  // Liveness tells nothing and generates nothing: open to probes, as /metrics is.
  app.get('/healthz', { logLevel: routineRouteLevel(app.log.level) }, async () => ({ status: 'ok' }));
  await app.register(async (gateways) => {
    const secret = s.secret;
    if (secret) {
      gateways.addHook('onRequest', async (req) => {
        if (!secretMatches(req.headers.authorization, secret))
          throw new AuthError('orchestrator secret missing or wrong');
      });
    }
    // Every gateway polls it every few seconds (MEDIAPLANE_GATEWAY_POLL_MS): its request lines are debug.
    gateways.get('/capabilities', { logLevel: routineRouteLevel(gateways.log.level) }, async () => capabilities(s));
    gateways.post('/v1/chat/completions', { bodyLimit: forwardedBodyLimit(s.bodyLimitBytes) }, async (req, reply) =>
      generate(req, reply, s),
    );
    embeddingsRoute(gateways, s);
  });
}

async function generate(
  req: FastifyRequest,
  reply: FastifyReply,
  s: OrchestratorState,
): Promise<FastifyReply | undefined> {
  const body = validateChatRequest(req.body, { defaultMaxTokens: 256 });
  const slots = checkServable(body, s);
  const n = body.n ?? 1;

  // A client (the gateway) that goes away aborts the generation: no tokens for nobody.
  const res = reply.raw;
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });

  // Busy: an UpstreamUnavailableError, a 503 that sends the gateway to another orchestrator.
  const release = await slots.acquire(abort.signal, n);
  s.stats.active++;
  const header = req.headers[REQUEST_ID_HEADER];
  const meta = {
    id:
      typeof header === 'string' && /^[\w-]{1,100}$/.test(header)
        ? header
        : `chatcmpl-${randomBytes(12).toString('hex')}`,
    created: Math.floor(Date.now() / 1000),
    model: body.model,
  };
  const events = s.engine.generate(body.model, generateParams(body), abort.signal)[Symbol.asyncIterator]();
  try {
    // The first event decides the status code: errors before it (a prompt too long for the
    // context, a schema the grammar cannot enforce, a model the engine does not have) are
    // still plain JSON answers.
    let first: IteratorResult<GenerateEvent>;
    try {
      first = await events.next();
    } catch (err) {
      if (err instanceof NotFoundError) throw new ModelNotFoundError(err.message, { cause: err });
      throw err;
    }
    reply.hijack();
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    await relay({ res, first, events, meta, s, logprobs: body.logprobs === true });
  } finally {
    s.stats.active--;
    release();
  }
  return undefined;
}

/** The model's slots, once the request is one this orchestrator can serve; else a 400 (404 for the model). */
function checkServable(body: ChatRequest, s: OrchestratorState): Slots {
  const model = s.engine.models().find((m) => m.id === body.model);
  if (!model) throw new ModelNotFoundError(`model ${body.model} is not served here`);
  // A gateway routes on the features it was told of; one that was not told (an older gateway)
  // still gets the 400 naming the field, never a request half honoured.
  for (const { feature, param } of requiredFeatures(body))
    if (!s.engine.features.includes(feature))
      throw new ValidationError(`${param}: not supported by this orchestrator's engine (${s.engine.name})`, { param });
  // More tokens than the whole context can never be generated: refused rather than silently
  // cut to the room left (issue #15: max_tokens up to 1e6 was accepted).
  const tooMany = maxTokensProblem(body.max_tokens, model.contextLength);
  if (tooMany) throw new ContextLengthExceededError(tooMany);
  const slots = s.slots(body.model);
  const n = body.n ?? 1;
  if (n > slots.total)
    throw new ValidationError(
      `n: ${n} choices are decoded together on as many sequences, and this orchestrator runs at most ${slots.total} (MAX_NUM_SEQS)`,
      { param: 'n' },
    );
  return slots;
}

/** The engine's parameters for a validated request (OpenAI's names to the Engine's). */
function generateParams(body: ChatRequest): GenerateParams {
  return {
    messages: body.messages,
    prompt: body.prompt,
    maxTokens: body.max_tokens,
    temperature: body.temperature,
    topP: body.top_p,
    topK: body.top_k,
    stop: body.stop,
    seed: body.seed,
    presencePenalty: body.presence_penalty,
    frequencyPenalty: body.frequency_penalty,
    n: body.n ?? 1,
    topLogprobs: body.logprobs ? (body.top_logprobs ?? 0) : undefined,
    logitBias: body.logit_bias,
    responseFormat: body.response_format,
    tools: body.tools,
    toolChoice: body.tool_choice,
    parallelToolCalls: body.parallel_tool_calls,
  };
}

/**
 * Streams the engine's events as chat.completion.chunk events through a StreamPacer; each
 * choice's last step's text rides with its finish_reason, and the usage event (the last) goes
 * with whatever is still pending, the usage chunk and [DONE] in the write that ends the
 * response (API.md section B).
 */
async function relay(o: {
  res: ServerResponse;
  first: IteratorResult<GenerateEvent>;
  events: AsyncIterator<GenerateEvent>;
  meta: { id: string; created: number; model: string };
  s: OrchestratorState;
  logprobs: boolean;
}): Promise<void> {
  const { res, events, meta } = o;
  const out = new StreamPacer({
    res,
    encode: chunkEncoder(meta),
    intervalMs: o.s.streamIntervalMs,
    logprobs: o.logprobs,
  });
  try {
    for (let step = o.first; !step.done; step = await events.next()) {
      const ev = step.value;
      if (ev.type === 'usage') {
        // The usage event is the last (Engine); the response is over, so nothing may follow it.
        out.finish(`${formatSse({ data: usageChunk({ ...meta, usage: ev.usage }) })}data: [DONE]\n\n`);
        return;
      }
      if (ev.type === 'text') out.text(ev.index, ev.text, ev.logprobs);
      else if (ev.type === 'tool_call') out.toolCall(ev.index, ev.piece);
      else out.end(ev.index, ev.text, ev.logprobs, ev.finishReason);
      if (res.destroyed) return;
    }
  } catch (err) {
    o.s.log.error({ err, model: meta.model }, 'generation failed mid-stream');
    out.finish(
      formatSse({
        event: 'error',
        data: JSON.stringify({
          error: { message: 'generation failed', type: 'server_error', code: 'upstream_failed' },
        }),
      }),
    );
  } finally {
    out.stop();
    await events.return?.();
    if (!res.destroyed && !res.writableEnded) res.end();
  }
}
