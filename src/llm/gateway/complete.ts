// One chat completion through the gateway: price it, reserve the charge, try orchestrators
// best-first until one produces its first token, relay the answer, settle the charge.
// Before the first token nothing has reached the client, so any failure (connect error, 5xx,
// 503, timeout) releases the reservation and the next orchestrator is tried; after it, a
// failure is told to a streaming client as `event: error` (API.md section B).

import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import {
  MediaplaneError,
  NotFoundError,
  PayloadTooLargeError,
  PaymentRequiredError,
  TimeoutError,
  UpstreamFailedError,
  UpstreamUnavailableError,
} from '../../lib/errors.ts';
import { drained, formatSse, type SseBatch } from '../../lib/sse.ts';
import type { Ledger } from '../ledger.ts';
import { maxTokensProblem, type ChatRequest, type FinishReason, type Usage } from '../protocol.ts';
import { RequestRefusedError } from './errors.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { Candidate, Registry } from './registry.ts';
import { openCompletion, type SseReader } from './upstream.ts';

export interface CompleteDeps {
  registry: Registry;
  ledger: Ledger;
  log: Logger;
  metrics: GatewayMetrics;
  /** The longest body it forwards (protocol.ts forwardedBodyLimit of its own body limit). */
  maxForwardBytes: number;
  maxPricePerToken: number;
  usageBased: boolean;
  firstTokenTimeoutMs: number;
  idleTimeoutMs: number;
}

interface Chunk {
  choices?: Array<{ delta?: { content?: string | null }; finish_reason?: FinishReason | null }>;
  usage?: Usage | null;
  created?: number;
}

/** The lower of two ceilings, where 0/undefined means none. */
function ceilingOf(operator: number, caller: number | undefined): number {
  const set = [operator, caller ?? 0].filter((x) => x > 0);
  return set.length ? Math.min(...set) : 0;
}

class Attempt {
  readonly controller = new AbortController();
  timedOut = false;
  // One timer for the attempt, re-armed per wait: a new timer per token's chunk is measurable
  // when the gateway relays thousands of chunks a second.
  #timer: NodeJS.Timeout | undefined;
  #timerMs = 0;
  #waiting = false;
  constructor(clientGone: AbortSignal) {
    const stop = (): void => this.controller.abort();
    clientGone.addEventListener('abort', stop, { once: true });
    this.controller.signal.addEventListener(
      'abort',
      () => {
        clientGone.removeEventListener('abort', stop);
        clearTimeout(this.#timer);
      },
      { once: true },
    );
  }

  /** Next batch (undefined at the end), or the attempt is aborted (and TimeoutError thrown) after `ms` of silence. */
  async next(events: SseReader, ms: number): Promise<SseBatch | undefined> {
    this.#arm(ms);
    this.#waiting = true;
    try {
      return await events.next();
    } catch (err) {
      if (this.timedOut) throw new TimeoutError(`no token for ${ms} ms`);
      throw err;
    } finally {
      this.#waiting = false;
    }
  }

  /** The answer is over: no more waits to time. */
  done(): void {
    clearTimeout(this.#timer);
  }

  #arm(ms: number): void {
    if (this.#timer && this.#timerMs === ms) {
      this.#timer.refresh();
      return;
    }
    clearTimeout(this.#timer);
    this.#timerMs = ms;
    this.#timer = setTimeout(() => {
      // Fired while the relay waited on the client, not on the orchestrator: not silence.
      if (!this.#waiting) return;
      this.timedOut = true;
      this.controller.abort();
    }, ms);
    this.#timer.unref();
  }
}

type Outcome =
  | { kind: 'committed'; events: SseReader; first: SseBatch; attempt: Attempt; firstAt: number }
  | { kind: 'complete'; content: string; finish: FinishReason; usage: Usage; created: number; firstAt: number }
  | { kind: 'failed'; error: MediaplaneError }
  | { kind: 'rejected'; error: RequestRefusedError };

export async function complete(
  deps: CompleteDeps,
  opts: { owner: string; body: ChatRequest; res: ServerResponse; clientGone: AbortSignal },
): Promise<{ json?: unknown }> {
  const { registry, ledger, log, metrics } = deps;
  const { body, owner } = opts;
  const arrived = performance.now();
  if (!registry.offers(body.model)) await registry.refresh();
  if (registry.candidates(body.model, 0).length === 0)
    throw new NotFoundError(`no orchestrator offers the model ${body.model}`);
  const ceiling = ceilingOf(deps.maxPricePerToken, body.max_price_per_token);
  const affordable = registry.candidates(body.model, ceiling);
  if (affordable.length === 0)
    throw new NotFoundError(`no orchestrator offers the model ${body.model} at or under ${ceiling} USD per token`);
  // Refused here, before anything is reserved, when no orchestrator's context can hold max_tokens.
  const candidates = affordable.filter((c) => maxTokensProblem(body.max_tokens, c.contextLength) === undefined);
  const largest = Math.max(...affordable.map((c) => c.contextLength ?? 0));
  if (candidates.length === 0)
    throw new RequestRefusedError(
      maxTokensProblem(body.max_tokens, largest) ?? 'max_tokens: too large',
      'context_length_exceeded',
    );

  const requestId = `chatcmpl-${randomBytes(12).toString('hex')}`;
  const forward = forwardBody(body, deps.maxForwardBytes);
  const failures: MediaplaneError[] = [];
  for (const c of candidates) {
    if (opts.clientGone.aborted) {
      metrics.finished(body.model, 'cancelled');
      return {};
    }
    const charge = {
      owner,
      maxTokens: body.max_tokens,
      pricePerToken: c.pricePerToken,
      model: body.model,
      orchestrator: c.orchestrator.url,
      requestId,
    };
    // A priced request is reserved before forwarding (API.md, Pricing). A free one (price 0)
    // needs no balance: its zero charge is written in one statement once the answer is out,
    // not as two database writes around it (with the embedded database each one holds the
    // event loop for about a millisecond, which every stream on this gateway would feel).
    const priced = c.pricePerToken > 0;
    const reservation = priced ? await ledger.reserve(charge) : undefined;
    if (priced && !reservation) {
      metrics.finished(body.model, 'refused');
      throw new PaymentRequiredError(
        `balance too low for max_tokens ${body.max_tokens} at ${c.pricePerToken} USD per token (${(body.max_tokens * c.pricePerToken).toFixed(12).replace(/0+$/, '')} USD); add credits or lower max_tokens`,
      );
    }
    const keep = async (completionTokens: number): Promise<void> => {
      if (reservation) await ledger.settle(reservation.id, { completionTokens, usageBased: deps.usageBased });
      else await ledger.recordFree({ ...charge, completionTokens });
    };
    const started = performance.now();
    c.orchestrator.inflight++;
    try {
      const outcome = await attempt(deps, c, { forward, requestId, stream: body.stream, clientGone: opts.clientGone });
      if (outcome.kind === 'failed' || outcome.kind === 'rejected') {
        if (reservation) await ledger.release(reservation.id);
        if (outcome.kind === 'rejected') {
          metrics.finished(body.model, 'refused');
          throw outcome.error;
        }
        if (opts.clientGone.aborted) {
          metrics.finished(body.model, 'cancelled');
          return {};
        }
        metrics.failedBeforeFirstToken(body.model, c.orchestrator.url);
        log.warn(
          { orchestrator: c.orchestrator.url, model: body.model, err: outcome.error.message, requestId },
          'orchestrator failed before the first token; trying the next',
        );
        registry.markDown(c.orchestrator);
        failures.push(outcome.error);
        continue;
      }
      metrics.firstToken(body.model, (outcome.firstAt - arrived) / 1000);
      if (outcome.kind === 'complete') {
        await keep(outcome.usage.completion_tokens);
        measure(registry, c, { firstAt: outcome.firstAt, tokens: outcome.usage.completion_tokens });
        metrics.finished(body.model, 'completed', outcome.usage);
        return {
          json: {
            id: requestId,
            object: 'chat.completion',
            created: outcome.created,
            model: body.model,
            choices: [
              { index: 0, message: { role: 'assistant', content: outcome.content }, finish_reason: outcome.finish },
            ],
            usage: outcome.usage,
          },
        };
      }
      const r = await relay(deps, outcome, opts.res);
      await keep(r.usage?.completion_tokens ?? r.delivered);
      if (r.usage) measure(registry, c, { firstAt: outcome.firstAt, tokens: r.usage.completion_tokens });
      metrics.finished(
        body.model,
        r.usage ? 'completed' : opts.clientGone.aborted || opts.res.destroyed ? 'cancelled' : 'failed',
        r.usage,
      );
      log.debug(
        { requestId, orchestrator: c.orchestrator.url, ms: Math.round(performance.now() - started) },
        'completion relayed',
      );
      return {};
    } finally {
      c.orchestrator.inflight--;
    }
  }
  metrics.finished(body.model, 'failed');
  throw summarize(body.model, failures);
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

function measure(registry: Registry, c: Candidate, m: { firstAt: number; tokens: number }): void {
  if (m.tokens > 1) registry.recordLatency(c.orchestrator, (performance.now() - m.firstAt) / (m.tokens - 1));
}

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

/** Runs one orchestrator up to its first token (streaming) or its whole answer (not streaming). */
async function attempt(
  deps: CompleteDeps,
  c: Candidate,
  o: { forward: string; requestId: string; stream: boolean; clientGone: AbortSignal },
): Promise<Outcome> {
  const a = new Attempt(o.clientGone);
  const timer = setTimeout(() => {
    a.timedOut = true;
    a.controller.abort();
  }, deps.firstTokenTimeoutMs);
  try {
    const opened = await openCompletion(c.base, o.forward, {
      secret: c.secret,
      requestId: o.requestId,
      signal: a.controller.signal,
    });
    // From here `a.next` times each wait itself (first token, then idle gaps).
    clearTimeout(timer);
    if (!opened.ok) {
      if (opened.status === 400)
        return {
          kind: 'rejected',
          error: new RequestRefusedError(
            opened.message,
            opened.code === 'context_length_exceeded' ? opened.code : 'invalid_request',
          ),
        };
      if (opened.status === 503 || opened.status === 404 || opened.status === 401)
        return { kind: 'failed', error: new UpstreamUnavailableError(`${opened.status}: ${opened.message}`) };
      return { kind: 'failed', error: new UpstreamFailedError(`${opened.status}: ${opened.message}`) };
    }
    const first = await a.next(opened.events, deps.firstTokenTimeoutMs);
    const firstAt = performance.now();
    const head = first?.events[0];
    if (!first || !head || head.event === 'error' || head.data === '[DONE]') {
      a.controller.abort();
      return {
        kind: 'failed',
        error: new UpstreamFailedError(
          first ? 'the orchestrator sent an error before the first token' : 'the answer ended before its first token',
        ),
      };
    }
    if (o.stream) return { kind: 'committed', events: opened.events, first, attempt: a, firstAt };
    const whole = await collect(deps, a, opened.events, first, firstAt);
    a.done();
    // An answer refused part-way (error event, no usage) is not read further: free its socket.
    if (whole.kind === 'failed') a.controller.abort();
    return whole;
  } catch (err) {
    clearTimeout(timer);
    a.controller.abort();
    if (err instanceof MediaplaneError) return { kind: 'failed', error: err };
    if (a.timedOut)
      return { kind: 'failed', error: new TimeoutError(`no first token within ${deps.firstTokenTimeoutMs} ms`) };
    return {
      kind: 'failed',
      error: new UpstreamUnavailableError(`unreachable: ${(err as Error).message}`, { cause: err }),
    };
  }
}

/** Reads a whole answer for a non-streaming client; any failure before its end fails over. */
async function collect(
  deps: CompleteDeps,
  a: Attempt,
  events: SseReader,
  first: SseBatch,
  firstAt: number,
): Promise<Outcome> {
  let content = '';
  let finish: FinishReason = 'stop';
  let usage: Usage | undefined;
  let created = Math.floor(Date.now() / 1000);
  let batch = first;
  for (;;) {
    for (const ev of batch.events) {
      if (ev.event === 'error')
        return { kind: 'failed', error: new UpstreamFailedError('the orchestrator failed during the answer') };
      if (ev.data === '[DONE]') {
        if (!usage) return { kind: 'failed', error: new UpstreamFailedError('the answer carried no usage') };
        return { kind: 'complete', content, finish, usage, created, firstAt };
      }
      const c = JSON.parse(ev.data) as Chunk;
      if (typeof c.created === 'number') created = c.created;
      const choice = c.choices?.[0];
      if (choice?.delta?.content) content += choice.delta.content;
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (c.usage) usage = c.usage;
    }
    const next = await a.next(events, deps.idleTimeoutMs);
    if (!next) return { kind: 'failed', error: new UpstreamFailedError('the answer ended without [DONE]') };
    batch = next;
  }
}

/**
 * Relays a committed stream with backpressure; returns what was delivered. Chunks pass as the
 * orchestrator sent them (it already uses this request's id): a batch of token chunks only goes
 * on as the bytes that came, untouched; a batch with an error, the usage chunk or [DONE] in it
 * (as a rule the last) is parsed. What one network read brought goes on as one write.
 */
async function relay(
  deps: CompleteDeps,
  o: Extract<Outcome, { kind: 'committed' }>,
  res: ServerResponse,
): Promise<{ usage?: Usage; delivered: number }> {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  const got: Delivered = { delivered: 0 };
  const result = (): { usage?: Usage; delivered: number } =>
    got.usage ? { usage: got.usage, delivered: got.delivered } : { delivered: got.delivered };
  let batch = o.first;
  try {
    for (;;) {
      const r = tokenChunks(batch, got) ?? relayEvents(batch, got);
      if (r.end === 'done') {
        res.end(r.out);
        return result();
      }
      if (r.end === 'error') {
        if (r.out.length > 0) res.write(r.out);
        throw new UpstreamFailedError('the orchestrator failed during the answer');
      }
      if (!res.write(r.out)) await drained(res);
      if (res.destroyed) {
        o.attempt.controller.abort();
        return { delivered: got.delivered };
      }
      const next = await o.attempt.next(o.events, deps.idleTimeoutMs);
      if (!next) throw new UpstreamFailedError('the orchestrator closed the answer before its end');
      batch = next;
    }
  } catch (err) {
    o.attempt.controller.abort();
    if (res.destroyed) return { delivered: got.delivered };
    const e =
      err instanceof MediaplaneError
        ? err
        : new UpstreamFailedError('the orchestrator connection broke during the answer', { cause: err });
    deps.log.warn({ err: e.message }, 'answer failed after its first token');
    res.end(
      formatSse({
        event: 'error',
        data: JSON.stringify({ error: { message: e.message, type: 'server_error', code: e.code } }),
      }),
    );
    return result();
  } finally {
    o.attempt.done();
  }
}

interface Delivered {
  delivered: number;
  usage?: Usage | undefined;
}

interface Relayed {
  out: string | Buffer;
  /** 'done': [DONE] came (out ends with it); 'error': an error event came after out's events. */
  end?: 'done' | 'error';
}

// A batch with none of these in it is token chunks only. A token whose text happens to
// contain one is merely parsed like the last batch.
const MARKERS = ['event:', '[DONE]', '"usage":'];

/** A batch of token chunks only, passed on as the bytes that came; undefined for any other. */
function tokenChunks(batch: SseBatch, got: Delivered): Relayed | undefined {
  const bytes = batch.bytes;
  if (!bytes || MARKERS.some((m) => bytes.includes(m))) return undefined;
  got.delivered += batch.count;
  return { out: bytes };
}

/** Parses a batch with more than token chunks in it (the usage chunk, [DONE], an error). */
function relayEvents(batch: SseBatch, got: Delivered): Relayed {
  let out = '';
  for (const ev of batch.events) {
    if (ev.event === 'error') return { out, end: 'error' };
    if (ev.data === '[DONE]') return { out: out + 'data: [DONE]\n\n', end: 'done' };
    if (ev.data.includes('"usage":{')) got.usage = (JSON.parse(ev.data) as Chunk).usage ?? undefined;
    else got.delivered++;
    out += formatSse({ data: ev.data });
  }
  return { out };
}
