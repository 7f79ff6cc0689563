// Who answers a completion: the candidates are tried best-first until one produces its first
// token (streaming) or its whole answer (not streaming). Before that nothing has reached the
// client, so any failure (connect error, 5xx, 503, timeout) marks the orchestrator down,
// releases its charge and goes on to the next (API.md section B). The loop charges through
// billing.ts and hands the answer on; it counts failovers and first tokens, never outcomes.

import type { Logger } from 'pino';
import { MediaplaneError, TimeoutError, UpstreamFailedError, UpstreamUnavailableError } from '../../lib/errors.ts';
import type { SseBatch } from '../../lib/sse.ts';
import type { Usage } from '../protocol.ts';
import { type AssembledChoice, Assembler } from './assemble.ts';
import type { Charge } from './billing.ts';
import { refusedByOrchestrator } from './errors.ts';
import type { GatewayMetrics } from './metrics.ts';
import { CANCELLED, type Ended } from './outcome.ts';
import type { Candidate, OrchestratorPool } from './pool.ts';
import { openCompletion, type CompletionChunk, type SseReader } from './upstream.ts';

export interface FailoverDeps {
  pool: OrchestratorPool;
  log: Logger;
  metrics: GatewayMetrics;
  firstTokenTimeoutMs: number;
  idleTimeoutMs: number;
}

/** One orchestrator's request: its abort, and the timer of each wait on it. */
export class Attempt {
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

/** A streaming answer whose first token came: the rest is relayed (relay.ts). */
export interface Committed {
  kind: 'committed';
  events: SseReader;
  first: SseBatch;
  attempt: Attempt;
  firstAt: number;
}

/** A non-streaming answer, read whole: every choice, by index. */
export interface Whole {
  kind: 'complete';
  choices: AssembledChoice[];
  usage: Usage;
  created: number;
  firstAt: number;
}

type Tried =
  | Committed
  | Whole
  | { kind: 'failed'; error: MediaplaneError }
  | { kind: 'rejected'; error: MediaplaneError };

/** The orchestrator that answers, with its charge still open. */
export interface Answer {
  charge: Charge;
  reply: Committed | Whole;
}

export interface FailoverRequest {
  /** Best first (OrchestratorPool.candidates). */
  candidates: readonly Candidate[];
  model: string;
  /** The body sent to each orchestrator (complete.ts forwardBody). */
  forward: string;
  requestId: string;
  stream: boolean;
  clientGone: AbortSignal;
  /** performance.now() when the request reached the gateway. */
  arrived: number;
  /** Opens the charge for a candidate before it is asked; an error refuses the request (402). */
  charge(c: Candidate): Promise<Charge | MediaplaneError>;
}

/**
 * Finds the orchestrator that answers and hands its answer to `deliver`, which relays it and
 * settles the charge. The orchestrator counts as busy (`inflight`) until `deliver` is done.
 */
export async function failover(
  deps: FailoverDeps,
  req: FailoverRequest,
  deliver: (answer: Answer) => Promise<Ended>,
): Promise<Ended> {
  const failures: MediaplaneError[] = [];
  for (const c of req.candidates) {
    if (req.clientGone.aborted) return CANCELLED;
    const charge = await req.charge(c);
    if (charge instanceof MediaplaneError) return { outcome: 'refused', error: charge };
    const started = performance.now();
    c.orchestrator.inflight++;
    try {
      const tried = await attempt(deps, c, req);
      if (tried.kind === 'failed' || tried.kind === 'rejected') {
        await charge.release();
        if (tried.kind === 'rejected') return { outcome: 'refused', error: tried.error };
        if (req.clientGone.aborted) return CANCELLED;
        failedOver(deps, c, { model: req.model, requestId: req.requestId, error: tried.error });
        failures.push(tried.error);
        continue;
      }
      deps.metrics.firstToken(req.model, (tried.firstAt - req.arrived) / 1000);
      const ended = await deliver({ charge, reply: tried });
      // Measured once the charge is settled, as it always was: the ranking's numbers stay comparable.
      if (ended.outcome === 'completed')
        measure(deps.pool, c, { firstAt: tried.firstAt, tokens: ended.usage.completion_tokens });
      if (tried.kind === 'committed')
        deps.log.debug(
          { requestId: req.requestId, orchestrator: c.orchestrator.url, ms: Math.round(performance.now() - started) },
          'completion relayed',
        );
      return ended;
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

function measure(pool: OrchestratorPool, c: Candidate, m: { firstAt: number; tokens: number }): void {
  if (m.tokens > 1) pool.recordLatency(c.orchestrator, (performance.now() - m.firstAt) / (m.tokens - 1));
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
  deps: FailoverDeps,
  c: Candidate,
  o: { forward: string; requestId: string; stream: boolean; clientGone: AbortSignal },
): Promise<Tried> {
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
    if (!opened.ok) return refusal(opened);
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

/** An orchestrator's error status: its 400 is the caller's request, anything else fails over. */
function refusal(opened: {
  status: number;
  message: string;
  code?: string | undefined;
  param?: string | undefined;
}): Tried {
  if (opened.status === 400) return { kind: 'rejected', error: refusedByOrchestrator(opened) };
  if (opened.status === 503 || opened.status === 404 || opened.status === 401)
    return { kind: 'failed', error: new UpstreamUnavailableError(`${opened.status}: ${opened.message}`) };
  return { kind: 'failed', error: new UpstreamFailedError(`${opened.status}: ${opened.message}`) };
}

/** Reads a whole answer for a non-streaming client; any failure before its end fails over. */
async function collect(
  deps: FailoverDeps,
  a: Attempt,
  events: SseReader,
  first: SseBatch,
  firstAt: number,
): Promise<Whole | { kind: 'failed'; error: MediaplaneError }> {
  const answer = new Assembler();
  let usage: Usage | undefined;
  let created = Math.floor(Date.now() / 1000);
  let batch = first;
  for (;;) {
    for (const ev of batch.events) {
      if (ev.event === 'error')
        return { kind: 'failed', error: new UpstreamFailedError('the orchestrator failed during the answer') };
      if (ev.data === '[DONE]') {
        if (!usage) return { kind: 'failed', error: new UpstreamFailedError('the answer carried no usage') };
        return { kind: 'complete', choices: answer.choices(), usage, created, firstAt };
      }
      const c = JSON.parse(ev.data) as CompletionChunk;
      if (typeof c.created === 'number') created = c.created;
      answer.add(c);
      if (c.usage) usage = c.usage;
    }
    const next = await a.next(events, deps.idleTimeoutMs);
    if (!next) return { kind: 'failed', error: new UpstreamFailedError('the answer ended without [DONE]') };
    batch = next;
  }
}
