// The writes of a streamed answer: chunks paced to at most one write per interval (issue #26
// moved it out of routes.ts).

import type { ServerResponse } from 'node:http';
import { drained } from '../../lib/sse.ts';
import type { ChunkDelta, chunkEncoder, FinishReason, TokenLogprob, ToolCallDelta } from '../protocol/index.ts';
import type { ToolCallPiece } from './engine.ts';

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
export class StreamPacer {
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
