// The orchestrator's HTTP face, for gateways: GET /capabilities (models warm or cold, price,
// free capacity) and POST /v1/chat/completions, which always streams OpenAI-style SSE chunks
// (the gateway assembles non-streaming answers itself, and needs to see the first token to
// decide whether it may still fail over).

import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { drained, formatSse } from '../../lib/sse.ts';
import { secretMatches } from '../../lib/bearer.ts';
import { AuthError, ContextLengthExceededError, ModelNotFoundError, NotFoundError } from '../../lib/errors.ts';
import { openAiWireError, wireErrorHandler } from '../../lib/wire-errors.ts';
import {
  chunkEncoder,
  forwardedBodyLimit,
  maxTokensProblem,
  REQUEST_ID_HEADER,
  type FinishReason,
  usageChunk,
  validateChatRequest,
  type Capabilities,
} from '../protocol.ts';
import type { Engine, GenerateEvent } from './engine.ts';
import type { Slots } from './slots.ts';
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
  app.get('/healthz', async () => ({ status: 'ok' }));
  await app.register(async (gateways) => {
    const secret = s.secret;
    if (secret) {
      gateways.addHook('onRequest', async (req) => {
        if (!secretMatches(req.headers.authorization, secret))
          throw new AuthError('orchestrator secret missing or wrong');
      });
    }
    gateways.get('/capabilities', async () => capabilities(s));
    gateways.post('/v1/chat/completions', { bodyLimit: forwardedBodyLimit(s.bodyLimitBytes) }, async (req, reply) =>
      generate(req, reply, s),
    );
  });
}

async function generate(
  req: FastifyRequest,
  reply: FastifyReply,
  s: OrchestratorState,
): Promise<FastifyReply | undefined> {
  const body = validateChatRequest(req.body, { defaultMaxTokens: 256 });
  const model = s.engine.models().find((m) => m.id === body.model);
  if (!model) throw new ModelNotFoundError(`model ${body.model} is not served here`);
  // More tokens than the whole context can never be generated: refused rather than silently
  // cut to the room left (issue #15: max_tokens up to 1e6 was accepted).
  const tooMany = maxTokensProblem(body.max_tokens, model.contextLength);
  if (tooMany) throw new ContextLengthExceededError(tooMany);

  // A client (the gateway) that goes away aborts the generation: no tokens for nobody.
  const res = reply.raw;
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });

  // Busy: an UpstreamUnavailableError, a 503 that sends the gateway to another orchestrator.
  const release = await s.slots(body.model).acquire(abort.signal);
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
  const events = s.engine
    .generate(
      body.model,
      {
        messages: body.messages,
        maxTokens: body.max_tokens,
        temperature: body.temperature,
        topP: body.top_p,
        topK: body.top_k,
        stop: body.stop,
        seed: body.seed,
        presencePenalty: body.presence_penalty,
        frequencyPenalty: body.frequency_penalty,
      },
      abort.signal,
    )
    [Symbol.asyncIterator]();
  try {
    // The first event decides the status code: errors before it (a prompt too long for the
    // context, a model the engine does not have) are still plain JSON answers.
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
    await relay(res, first, events, meta, s);
  } finally {
    s.stats.active--;
    release();
  }
  return undefined;
}

/**
 * Streams the engine's events as chat.completion.chunk events through a StreamPacer; the final
 * step's text rides with finish_reason, then the usage chunk and [DONE] go in the same write,
 * which ends the response (API.md section B).
 */
async function relay(
  res: ServerResponse,
  first: IteratorResult<GenerateEvent>,
  events: AsyncIterator<GenerateEvent>,
  meta: { id: string; created: number; model: string },
  s: OrchestratorState,
): Promise<void> {
  const out = new StreamPacer(res, chunkEncoder(meta), s.streamIntervalMs);
  try {
    for (let step = first; !step.done; step = await events.next()) {
      const ev = step.value;
      if (ev.type === 'end') {
        // The end event is the last (Engine); the response is over, so nothing may follow it.
        out.finish(
          ev.text,
          ev.finishReason,
          `${formatSse({ data: usageChunk({ ...meta, usage: ev.usage }) })}data: [DONE]\n\n`,
        );
        return;
      }
      out.text(ev.text);
      if (res.destroyed) return;
    }
  } catch (err) {
    s.log.error({ err, model: meta.model }, 'generation failed mid-stream');
    out.finish(
      '',
      null,
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

/**
 * Writes generated text as SSE chunks, at most one write per `intervalMs`: the first token
 * and any token after a quiet interval go out at once; tokens that come faster are merged
 * into the next write (never held longer than the interval). While the socket is full
 * (backpressure) text is merged until it drains. A model slower than one token per interval
 * gets one write per token; a faster one saves a write, and a wake-up in each process
 * downstream, per merged token. On a host with few cores that CPU comes out of the decode's
 * share: at 30 ms instead of 10 the gateway and its client used 9 ms of CPU per 400-token
 * stream instead of 20 (docs/llm.md).
 */
class StreamPacer {
  readonly #res: ServerResponse;
  readonly #encode: ReturnType<typeof chunkEncoder>;
  readonly #intervalMs: number;
  #pending = '';
  #started = false;
  #lastWrite = -Infinity;
  #timer: NodeJS.Timeout | undefined;
  #blocked = false;

  constructor(res: ServerResponse, encode: ReturnType<typeof chunkEncoder>, intervalMs: number) {
    this.#res = res;
    this.#encode = encode;
    this.#intervalMs = intervalMs;
  }

  text(text: string): void {
    this.#pending += text;
    this.#schedule();
  }

  #schedule(): void {
    if (this.#timer || this.#blocked || !this.#pending) return;
    const wait = this.#lastWrite + this.#intervalMs - performance.now();
    if (wait <= 0) this.#flush();
    else this.#timer = setTimeout(() => this.#flush(), wait);
  }

  /**
   * The last content chunk (with `finish` as finish_reason, none when null) and `tail`, written
   * with the end of the response: one write where there were two.
   */
  finish(text: string, finish: FinishReason | null, tail: string): void {
    this.stop();
    const last = this.#pending + text;
    const head = finish !== null || last ? this.#chunk(last, finish) : '';
    this.#pending = '';
    if (!this.#res.destroyed) this.#res.end(head + tail);
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #chunk(content: string, finish: FinishReason | null): string {
    // The role rides on the first content chunk, so nothing reaches the gateway before a token.
    const delta = this.#started ? { content } : { role: 'assistant' as const, content };
    this.#started = true;
    return this.#encode(delta, finish);
  }

  #flush(): void {
    this.#timer = undefined;
    if (!this.#pending || this.#res.destroyed) return;
    const ok = write(this.#res, this.#chunk(this.#pending, null));
    this.#pending = '';
    this.#lastWrite = performance.now();
    if (ok) return;
    this.#blocked = true;
    void drained(this.#res).then(() => {
      this.#blocked = false;
      this.#schedule();
    });
  }
}

function write(res: ServerResponse, text: string): boolean {
  return res.destroyed ? true : res.write(text);
}
