// One orchestrator asked for a chat completion, up to the point where its answer is the
// client's: its first token (streaming) or its whole answer (not streaming). Until then nothing
// has reached the client, so any failure (connect error, 5xx, 503, timeout) is a 'failed' the
// failover loop (failover.ts) goes on from. Split from that loop (issue #26), which embeddings
// share with chat: this is what chat alone does.

import type { Logger } from 'pino';
import { MediaplaneError, TimeoutError, UpstreamFailedError, UpstreamUnavailableError } from '../../lib/errors.ts';
import type { SseBatch } from '../../lib/sse.ts';
import { decodeEvent } from '../openai-wire/index.ts';
import type { Usage } from '../protocol/index.ts';
import { type AssembledChoice, Assembler } from './assemble.ts';
import type { Charge } from './billing.ts';
import { refusal } from './errors.ts';
import type { Tried } from './failover.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { Ended } from './outcome.ts';
import type { Candidate, OrchestratorPool } from './pool.ts';
import { openCompletion, type SseReader } from './upstream.ts';

export interface ChatAttemptDeps {
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
  /** performance.now() when the orchestrator was asked, and when its first token came. */
  startedAt: number;
  firstAt: number;
}

/** A non-streaming answer, read whole: every choice, by index. */
export interface Whole {
  kind: 'complete';
  choices: AssembledChoice[];
  usage: Usage;
  created: number;
  startedAt: number;
  firstAt: number;
}

/** A chat answer whose first token came (streaming) or that came whole: the client's from here. */
export type ChatReply = Committed | Whole;

/** The orchestrator that answers, with its charge still open. */
export interface Answer {
  charge: Charge;
  reply: ChatReply;
}

type Failed = { kind: 'failed'; error: MediaplaneError };

/** What the orchestrator is asked. */
export interface ChatAsk {
  /** The body sent to each orchestrator (complete.ts forwardBody). */
  forward: string;
  requestId: string;
  stream: boolean;
  clientGone: AbortSignal;
}

/** Runs one orchestrator up to its first token (streaming) or its whole answer (not streaming). */
export async function askChat(deps: ChatAttemptDeps, c: Candidate, o: ChatAsk): Promise<Tried<ChatReply>> {
  const startedAt = performance.now();
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
    const times = { startedAt, firstAt };
    if (o.stream)
      return { kind: 'answered', answer: { kind: 'committed', events: opened.events, first, attempt: a, ...times } };
    const whole = await collect(deps, a, opened.events, first, times);
    a.done();
    // An answer refused part-way (error event, no usage) is not read further: free its socket.
    if (whole.kind === 'failed') a.controller.abort();
    return whole.kind === 'failed' ? whole : { kind: 'answered', answer: whole };
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
  deps: ChatAttemptDeps,
  a: Attempt,
  events: SseReader,
  first: SseBatch,
  times: { startedAt: number; firstAt: number },
): Promise<Whole | Failed> {
  const answer = new Assembler();
  let usage: Usage | undefined;
  let created = Math.floor(Date.now() / 1000);
  let batch = first;
  for (;;) {
    for (const ev of batch.events) {
      const w = decodeEvent(ev);
      if (w.type === 'error')
        return { kind: 'failed', error: new UpstreamFailedError('the orchestrator failed during the answer') };
      if (w.type === 'done') {
        if (!usage) return { kind: 'failed', error: new UpstreamFailedError('the answer carried no usage') };
        return { kind: 'complete', choices: answer.choices(), usage, created, ...times };
      }
      const c = w.chunk;
      if (typeof c.created === 'number') created = c.created;
      answer.add(c);
      if (c.usage) usage = c.usage;
    }
    const next = await a.next(events, deps.idleTimeoutMs);
    if (!next) return { kind: 'failed', error: new UpstreamFailedError('the answer ended without [DONE]') };
    batch = next;
  }
}

/**
 * Delivers a chat answer through `deliver` and measures the orchestrator: time to first token
 * always, latency per token once a completed answer is settled (as it always was, so the
 * ranking's numbers stay comparable).
 */
export async function deliverMeasured(
  deps: ChatAttemptDeps,
  c: Candidate,
  o: { reply: ChatReply; model: string; requestId: string; arrived: number },
  deliver: () => Promise<Ended>,
): Promise<Ended> {
  const { reply } = o;
  deps.metrics.firstToken(o.model, (reply.firstAt - o.arrived) / 1000);
  const ended = await deliver();
  const tokens = ended.outcome === 'completed' ? ended.usage.completion_tokens : 0;
  if (tokens > 1) deps.pool.recordLatency(c.orchestrator, (performance.now() - reply.firstAt) / (tokens - 1));
  if (reply.kind === 'committed')
    deps.log.debug(
      { requestId: o.requestId, orchestrator: c.orchestrator.url, ms: Math.round(performance.now() - reply.startedAt) },
      'completion relayed',
    );
  return ended;
}
