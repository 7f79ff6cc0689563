// The orchestrator's HTTP face, for gateways: GET /capabilities (models warm or cold, price,
// free capacity) and POST /v1/chat/completions, which always streams OpenAI-style SSE chunks
// (the gateway assembles non-streaming answers itself, and needs to see the first token to
// decide whether it may still fail over).

import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { drained, formatSse } from '../../lib/sse.ts';
import { isMediaplaneError, NotFoundError, UpstreamUnavailableError, ValidationError } from '../../lib/errors.ts';
import { chunkEncoder, REQUEST_ID_HEADER, secretMatches, usageChunk, validateChatRequest, type Capabilities, type ChatRequest } from '../protocol.ts';
import { PromptTooLongError, type Engine, type GenerateEvent } from './engine.ts';
import { Slots } from './slots.ts';
import type { Logger } from 'pino';

export interface OrchestratorState {
  engine: Engine;
  pricePerToken: number;
  secret?: string | undefined;
  slots: (model: string) => Slots;
  log: Logger;
  stats: { active: number };
}

function sendError(reply: FastifyReply, status: number, message: string, type: string, code: string): FastifyReply {
  return reply.status(status).send({ error: { message, type, code } });
}

export function capabilities(s: OrchestratorState): Capabilities & { stats: { active: number; tokensComputed: number } } {
  return {
    engine: s.engine.name,
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
  if (s.secret) {
    const secret = s.secret;
    app.addHook('onRequest', async (req, reply) => {
      if (!secretMatches(req.headers.authorization, secret)) return sendError(reply, 401, 'orchestrator secret missing or wrong', 'authentication_error', 'unauthorized');
      return undefined;
    });
  }
  app.setErrorHandler((err: Error & { statusCode?: number }, _req, reply) => {
    const status = err.statusCode && err.statusCode < 500 ? 400 : 500;
    if (status === 500) s.log.error({ err }, 'orchestrator error');
    return sendError(reply, status, status === 400 ? err.message : 'internal error', status === 400 ? 'invalid_request_error' : 'server_error', status === 400 ? 'invalid_request' : 'internal');
  });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/capabilities', async () => capabilities(s));
  app.post('/v1/chat/completions', async (req, reply) => generate(req, reply, s));
}

async function generate(req: FastifyRequest, reply: FastifyReply, s: OrchestratorState): Promise<FastifyReply | undefined> {
  let body: ChatRequest;
  try {
    body = validateChatRequest(req.body, { defaultMaxTokens: 256 });
  } catch (err) {
    if (err instanceof ValidationError) return sendError(reply, 400, err.message, 'invalid_request_error', 'invalid_request');
    throw err;
  }
  if (!s.engine.models().some((m) => m.id === body.model)) return sendError(reply, 404, `model ${body.model} is not served here`, 'invalid_request_error', 'model_not_found');

  // A client (the gateway) that goes away aborts the generation: no tokens for nobody.
  const res = reply.raw;
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });

  let release: () => void;
  try {
    release = await s.slots(body.model).acquire(abort.signal);
  } catch (err) {
    if (err instanceof UpstreamUnavailableError) return sendError(reply, 503, err.message, 'server_error', 'busy');
    throw err;
  }
  s.stats.active++;
  const header = req.headers[REQUEST_ID_HEADER];
  const meta = { id: typeof header === 'string' && /^[\w-]{1,100}$/.test(header) ? header : `chatcmpl-${randomBytes(12).toString('hex')}`, created: Math.floor(Date.now() / 1000), model: body.model };
  const events = s.engine.generate(body.model, {
    messages: body.messages, maxTokens: body.max_tokens, temperature: body.temperature, topP: body.top_p, topK: body.top_k,
    stop: body.stop, seed: body.seed, presencePenalty: body.presence_penalty, frequencyPenalty: body.frequency_penalty,
  }, abort.signal)[Symbol.asyncIterator]();
  try {
    // The first event decides the status code: errors before it are still plain JSON answers.
    let first: IteratorResult<GenerateEvent>;
    try {
      first = await events.next();
    } catch (err) {
      if (err instanceof PromptTooLongError) return sendError(reply, 400, err.message, 'invalid_request_error', 'context_length_exceeded');
      if (err instanceof ValidationError) return sendError(reply, 400, err.message, 'invalid_request_error', 'invalid_request');
      if (isMediaplaneError(err) && err instanceof NotFoundError) return sendError(reply, 404, err.message, 'invalid_request_error', 'model_not_found');
      throw err;
    }
    reply.hijack();
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    await relay(res, first, events, meta, s);
  } finally {
    s.stats.active--;
    release();
  }
  return undefined;
}

/**
 * Streams the engine's events as chat.completion.chunk events. Each event is written as soon
 * as it is taken (text the engine produced while a write waited arrives merged, as one chunk);
 * the final step's text rides with finish_reason, then the usage chunk and [DONE] go in the
 * same write (API.md section B).
 */
async function relay(res: ServerResponse, first: IteratorResult<GenerateEvent>, events: AsyncIterator<GenerateEvent>, meta: { id: string; created: number; model: string }, s: OrchestratorState): Promise<void> {
  const encode = chunkEncoder(meta);
  let started = false;
  let step = first;
  try {
    while (!step.done) {
      const ev = step.value;
      // The role rides on the first content chunk, so nothing reaches the gateway before a token.
      const delta = started ? { content: ev.text } : { role: 'assistant' as const, content: ev.text };
      started = true;
      if (ev.type === 'text') {
        if (!write(res, encode(delta, null))) await drained(res);
      } else {
        write(res, encode(delta, ev.finishReason) + formatSse({ data: usageChunk({ ...meta, usage: ev.usage }) }) + 'data: [DONE]\n\n');
      }
      if (res.destroyed) return;
      step = await events.next();
    }
  } catch (err) {
    s.log.error({ err, model: meta.model }, 'generation failed mid-stream');
    write(res, formatSse({ event: 'error', data: JSON.stringify({ error: { message: 'generation failed', type: 'server_error', code: 'upstream_failed' } }) }));
  } finally {
    await events.return?.();
    if (!res.destroyed) res.end();
  }
}

function write(res: ServerResponse, text: string): boolean {
  return res.destroyed ? true : res.write(text);
}

