// The orchestrator's HTTP face, for gateways: GET /capabilities (models warm or cold, price,
// free capacity) and POST /v1/chat/completions, which always streams OpenAI-style SSE chunks
// (the gateway assembles non-streaming answers itself, and needs to see the first token to
// decide whether it may still fail over).

import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { drained, formatSse } from '../../lib/sse.ts';
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
  type ChunkDelta,
  chunkEncoder,
  type FinishReason,
  forwardedBodyLimit,
  maxTokensProblem,
  REQUEST_ID_HEADER,
  requiredFeatures,
  type TokenLogprob,
  type ToolCallDelta,
  usageChunk,
  validateChatRequest,
} from '../protocol.ts';
import type { Engine, GenerateEvent, GenerateParams, ToolCallPiece } from './engine.ts';
import { embeddingsRoute } from './embeddings.ts';
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

/** What one choice has generated and not written yet. */
interface ChoiceBuffer {
  started: boolean;
  text: string;
  logprobs: TokenLogprob[];
  tools: ToolCallPiece[];
  /** The choice made tool calls: it ends with an empty delta, not a content one. */
  called: boolean;
  /** Set by its end event; `closed` once its finish chunk is written. */
  finish: FinishReason | null;
  closed: boolean;
}

/**
 * Writes generated text and tool-call pieces as SSE chunks, at most one write per `intervalMs`
 * for all the choices of a stream: the first token and any token after a quiet interval go out
 * at once; tokens that come faster are merged into the next write (never held longer than the
 * interval). While the socket is full (backpressure) text is merged until it drains. A model
 * slower than one token per interval gets one write per token; a faster one saves a write, and
 * a wake-up in each process downstream, per merged token. On a host with few cores that CPU
 * comes out of the decode's share: at 30 ms instead of 10 the gateway and its client used 9 ms
 * of CPU per 400-token stream instead of 20 (docs/llm.md). A choice's end is written with the
 * next write rather than at once: for a single choice that is the write that ends the response
 * (with the usage), one write where there were two.
 */
class StreamPacer {
  readonly #res: ServerResponse;
  readonly #encode: ReturnType<typeof chunkEncoder>;
  readonly #intervalMs: number;
  readonly #logprobs: boolean;
  readonly #choices: ChoiceBuffer[] = [];
  #lastWrite = -Infinity;
  #timer: NodeJS.Timeout | undefined;
  #blocked = false;

  constructor(o: {
    res: ServerResponse;
    encode: ReturnType<typeof chunkEncoder>;
    intervalMs: number;
    logprobs: boolean;
  }) {
    this.#res = o.res;
    this.#encode = o.encode;
    this.#intervalMs = o.intervalMs;
    this.#logprobs = o.logprobs;
  }

  text(index: number, text: string, logprobs: TokenLogprob[] | undefined): void {
    const c = this.#choice(index);
    c.text += text;
    if (logprobs) c.logprobs.push(...logprobs);
    this.#schedule();
  }

  toolCall(index: number, piece: ToolCallPiece): void {
    const c = this.#choice(index);
    const last = c.tools.at(-1);
    // Consecutive pieces of one call are one piece (the id and name only ever on its first).
    if (last && last.call === piece.call && piece.id === undefined) last.arguments += piece.arguments;
    else c.tools.push({ ...piece });
    c.called = true;
    this.#schedule();
  }

  end(index: number, text: string, logprobs: TokenLogprob[] | undefined, finish: FinishReason): void {
    const c = this.#choice(index);
    c.text += text;
    if (logprobs) c.logprobs.push(...logprobs);
    c.finish = finish;
  }

  /** Everything pending, then `tail`, written with the end of the response: one write. */
  finish(tail: string): void {
    this.stop();
    const head = this.#chunks();
    if (!this.#res.destroyed) this.#res.end(head + tail);
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #choice(index: number): ChoiceBuffer {
    let c = this.#choices[index];
    if (!c) {
      c = { started: false, text: '', logprobs: [], tools: [], called: false, finish: null, closed: false };
      this.#choices[index] = c;
    }
    return c;
  }

  #schedule(): void {
    if (this.#timer || this.#blocked) return;
    const wait = this.#lastWrite + this.#intervalMs - performance.now();
    if (wait <= 0) this.#flush();
    else this.#timer = setTimeout(() => this.#flush(), wait);
  }

  /** The chunks of every choice's pending output, in order of the choices. */
  #chunks(): string {
    let out = '';
    for (const [index, c] of this.#choices.entries()) if (c) out += this.#choiceChunks(index, c);
    return out;
  }

  #choiceChunks(index: number, c: ChoiceBuffer): string {
    let out = '';
    const ending = c.finish !== null && !c.closed;
    // The last text rides with finish_reason, unless tool-call pieces follow it.
    if (c.text || (ending && !c.called)) {
      const finish = ending && !c.called && c.tools.length === 0 ? c.finish : null;
      const logprobs = this.#logprobs ? c.logprobs.splice(0) : undefined;
      out += this.#encode({ index, delta: this.#delta(c, { content: c.text }), logprobs, finish });
      c.text = '';
      if (finish !== null) c.closed = true;
    }
    if (c.tools.length > 0) {
      const tool_calls = c.tools.splice(0).map(toolCallDelta);
      // OpenAI's first chunk of a choice that calls a tool has `content: null` beside the role.
      const delta = this.#delta(c, c.started ? { tool_calls } : { content: null, tool_calls });
      out += this.#encode({ index, delta, finish: null });
    }
    if (ending && !c.closed) {
      out += this.#encode({ index, delta: {}, finish: c.finish });
      c.closed = true;
    }
    return out;
  }

  /** `delta` with the role on the choice's first chunk (the gateway sees nothing before a token). */
  #delta(c: ChoiceBuffer, delta: ChunkDelta): ChunkDelta {
    if (c.started) return delta;
    c.started = true;
    return { role: 'assistant', ...delta };
  }

  #flush(): void {
    this.#timer = undefined;
    if (this.#res.destroyed) return;
    const chunks = this.#chunks();
    if (!chunks) return;
    const ok = write(this.#res, chunks);
    this.#lastWrite = performance.now();
    if (ok) return;
    this.#blocked = true;
    void drained(this.#res).then(() => {
      this.#blocked = false;
      this.#schedule();
    });
  }
}

function toolCallDelta(piece: ToolCallPiece): ToolCallDelta {
  return {
    index: piece.call,
    ...(piece.id === undefined ? {} : { id: piece.id, type: 'function' as const }),
    function: { ...(piece.name === undefined ? {} : { name: piece.name }), arguments: piece.arguments },
  };
}

function write(res: ServerResponse, text: string): boolean {
  return res.destroyed ? true : res.write(text);
}
