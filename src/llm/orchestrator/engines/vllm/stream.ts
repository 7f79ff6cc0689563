// vLLM's stream chunks (wire.ts) as the GenerateEvents of the Engine contract.

import type { FinishReason, TokenLogprob } from '../../../protocol/types.ts';
import { type GenerateEvent, type ToolCallPiece, toolCallId } from '../../engine.ts';
import type { ChunkLogprobs, VllmChunk } from './wire.ts';

/**
 * Turns vLLM's chunks into the GenerateEvents of the Engine contract: per choice its text and
 * tool-call pieces, `end` once per choice (a choice that called tools ends `tool_calls`, which
 * older vLLM versions reported as `stop`), then the usage.
 */
export class VllmStream {
  /** Text and tool-call pieces seen (tokensComputed counts them until the usage is known). */
  pieces = 0;
  readonly #n: number;
  readonly #ended = new Set<number>();
  /** Per choice: vLLM's tool call index to its position in the choice, in order of appearance. */
  readonly #calls = new Map<number, Map<number, number>>();

  constructor(n: number) {
    this.#n = Math.max(1, n);
  }

  read(c: VllmChunk): GenerateEvent[] {
    const out: GenerateEvent[] = [];
    for (const choice of c.choices ?? []) this.#choice(choice, out);
    if (c.usage) {
      // Every choice has ended before the usage (vLLM sends each finish_reason first).
      for (let i = 0; i < this.#n; i++)
        if (!this.#ended.has(i)) out.push({ type: 'end', index: i, text: '', finishReason: 'stop' });
      out.push({ type: 'usage', usage: c.usage });
    }
    return out;
  }

  #choice(choice: NonNullable<VllmChunk['choices']>[number], out: GenerateEvent[]): void {
    const index = choice.index ?? 0;
    if (this.#ended.has(index)) return;
    const text = choice.delta?.content ?? choice.text ?? '';
    const logprobs = tokenLogprobs(choice.logprobs);
    const withLogprobs = logprobs ? { logprobs } : {};
    for (const call of choice.delta?.tool_calls ?? []) {
      const piece = this.#piece(index, call);
      if (!piece) continue;
      this.pieces++;
      out.push({ type: 'tool_call', index, piece });
    }
    if (choice.finish_reason) {
      this.#ended.add(index);
      const finishReason = this.#calls.has(index) && choice.finish_reason !== 'length' ? 'tool_calls' : finish(choice);
      if (text) this.pieces++;
      out.push({ type: 'end', index, text, ...withLogprobs, finishReason });
    } else if (text || logprobs?.length) {
      this.pieces++;
      out.push({ type: 'text', index, text, ...withLogprobs });
    }
  }

  #piece(
    index: number,
    call: NonNullable<NonNullable<NonNullable<VllmChunk['choices']>[number]['delta']>['tool_calls']>[number],
  ): ToolCallPiece | undefined {
    let calls = this.#calls.get(index);
    if (!calls) {
      calls = new Map();
      this.#calls.set(index, calls);
    }
    // vLLM numbers a named tool_choice's call by the choice's index: positions are per choice.
    const key = call.index ?? 0;
    let position = calls.get(key);
    const first = position === undefined;
    if (position === undefined) {
      position = calls.size;
      calls.set(key, position);
    }
    const name = call.function?.name ?? undefined;
    const args = call.function?.arguments ?? '';
    if (!first) return args ? { call: position, arguments: args } : undefined;
    return { call: position, id: call.id ?? toolCallId(), ...(name ? { name } : {}), arguments: args };
  }
}

function finish(choice: { finish_reason?: string | null }): FinishReason {
  if (choice.finish_reason === 'length') return 'length';
  return choice.finish_reason === 'tool_calls' ? 'tool_calls' : 'stop';
}

/** OpenAI's form of a chunk's log probabilities, from the chat or the completions API. */
function tokenLogprobs(lp: ChunkLogprobs | null | undefined): TokenLogprob[] | undefined {
  if (!lp) return undefined;
  if (lp.content) {
    return (lp.content ?? []).map((t) => ({
      token: t.token ?? '',
      logprob: t.logprob ?? 0,
      bytes: t.bytes ?? utf8Bytes(t.token ?? ''),
      top_logprobs: (t.top_logprobs ?? []).map((a) => ({
        token: a.token,
        logprob: a.logprob,
        bytes: a.bytes ?? utf8Bytes(a.token),
      })),
    }));
  }
  return legacyToChatLogprobs(lp);
}

/**
 * The legacy completions API's parallel arrays (vLLM's /v1/completions chunks) in the chat API's
 * form: the inverse of the gateway's chatToLegacyLogprobs (gateway/legacy-logprobs.ts).
 */
function legacyToChatLogprobs(lp: ChunkLogprobs): TokenLogprob[] {
  return (lp.tokens ?? []).map((token, i) => ({
    token,
    logprob: lp.token_logprobs?.[i] ?? 0,
    bytes: utf8Bytes(token),
    top_logprobs: Object.entries(lp.top_logprobs?.[i] ?? {})
      .sort((a, b) => b[1] - a[1])
      .map(([t, logprob]) => ({ token: t, logprob, bytes: utf8Bytes(t) })),
  }));
}

function utf8Bytes(text: string): number[] {
  return [...Buffer.from(text, 'utf8')];
}
