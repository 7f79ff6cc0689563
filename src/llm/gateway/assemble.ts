// What a client gets when it does not stream, and what POST /v1/completions' clients get: the
// orchestrator always streams chat.completion.chunk events (API.md section B), so a whole
// answer is assembled from them here, choice by choice, and a text completion is a chunk
// rewritten into OpenAI's `text_completion` object.

import type { FinishReason, TokenLogprob, ToolCall, Usage } from '../protocol/index.ts';
import { chatToLegacyLogprobs } from './legacy-logprobs.ts';
import type { ChunkChoice, OpenAiChunk, ToolCallDelta } from '../openai-wire/index.ts';

/** One choice of a whole answer. */
export interface AssembledChoice {
  index: number;
  content: string;
  toolCalls: ToolCall[];
  logprobs: TokenLogprob[];
  finish: FinishReason;
}

interface Building {
  content: string;
  calls: Map<number, ToolCall>;
  logprobs: TokenLogprob[];
  finish: FinishReason;
}

/** Gathers the choices of an answer from its chunks, in the order they came. */
export class Assembler {
  readonly #choices = new Map<number, Building>();

  add(chunk: OpenAiChunk): void {
    for (const c of chunk.choices ?? []) this.#add(c);
  }

  #add(c: ChunkChoice): void {
    const index = c.index ?? 0;
    let b = this.#choices.get(index);
    if (!b) {
      b = { content: '', calls: new Map(), logprobs: [], finish: 'stop' };
      this.#choices.set(index, b);
    }
    if (c.delta?.content) b.content += c.delta.content;
    for (const piece of c.delta?.tool_calls ?? []) addPiece(b.calls, piece);
    if (c.logprobs?.content) b.logprobs.push(...c.logprobs.content);
    if (c.finish_reason) b.finish = c.finish_reason;
  }

  /** The choices by index. */
  choices(): AssembledChoice[] {
    return [...this.#choices]
      .sort(([a], [b]) => a - b)
      .map(([index, b]) => ({
        index,
        content: b.content,
        toolCalls: [...b.calls].sort(([x], [y]) => x - y).map(([, call]) => call),
        logprobs: b.logprobs,
        finish: b.finish,
      }));
  }
}

/** A call's pieces joined: id, type and name from its first piece, the arguments text from all. */
function addPiece(calls: Map<number, ToolCall>, piece: ToolCallDelta): void {
  const k = piece.index ?? 0;
  const call = calls.get(k);
  if (!call) {
    calls.set(k, {
      id: piece.id ?? '',
      type: 'function',
      function: { name: piece.function?.name ?? '', arguments: piece.function?.arguments ?? '' },
    });
    return;
  }
  if (piece.id && !call.id) call.id = piece.id;
  if (piece.function?.name && !call.function.name) call.function.name = piece.function.name;
  call.function.arguments += piece.function?.arguments ?? '';
}

export interface AnswerMeta {
  id: string;
  created: number;
  model: string;
  usage: Usage;
}

/**
 * OpenAI's `chat.completion`: content null when the choice only called tools, `logprobs` null
 * unless they were asked for (`withLogprobs`).
 */
export function chatCompletion(meta: AnswerMeta, choices: AssembledChoice[], withLogprobs: boolean): unknown {
  return {
    id: meta.id,
    object: 'chat.completion',
    created: meta.created,
    model: meta.model,
    choices: choices.map((c) => ({
      index: c.index,
      message: {
        role: 'assistant',
        content: c.content === '' && c.toolCalls.length > 0 ? null : c.content,
        refusal: null,
        ...(c.toolCalls.length > 0 ? { tool_calls: c.toolCalls } : {}),
      },
      logprobs: withLogprobs ? { content: c.logprobs, refusal: null } : null,
      finish_reason: c.finish,
    })),
    usage: meta.usage,
  };
}

/**
 * OpenAI's legacy `text_completion` (POST /v1/completions); `logprobs` in its legacy form
 * (legacy-logprobs.ts) when they were asked for (`withLogprobs`), else null.
 */
export function textCompletion(meta: AnswerMeta, choices: AssembledChoice[], withLogprobs: boolean): unknown {
  return {
    id: meta.id,
    object: 'text_completion',
    created: meta.created,
    model: meta.model,
    choices: choices.map((c) => ({
      index: c.index,
      text: c.content,
      logprobs: withLogprobs ? chatToLegacyLogprobs(c.logprobs) : null,
      finish_reason: c.finish,
    })),
    usage: meta.usage,
  };
}

/**
 * Rewrites the chat.completion.chunk JSON of one answer into the `text_completion` chunks
 * POST /v1/completions streams: the same id, created and model, each choice's delta content as
 * its `text`, its logprobs in the legacy form (their text offsets counted per choice across the
 * chunks, hence one rewriter per answer); the usage chunk keeps `choices: []` and its usage.
 */
export function textCompletionRewriter(): (data: string) => string {
  const offsets = new Map<number, number>();
  return (data) => {
    const c = JSON.parse(data) as OpenAiChunk;
    const head = { id: c.id, object: 'text_completion', created: c.created, model: c.model };
    if (c.usage) return JSON.stringify({ ...head, choices: [], usage: c.usage });
    const choices = (c.choices ?? []).map((x) => {
      const index = x.index ?? 0;
      const text = x.delta?.content ?? '';
      const at = offsets.get(index) ?? 0;
      offsets.set(index, at + text.length);
      const entries = x.logprobs?.content;
      return {
        index,
        text,
        logprobs: entries ? chatToLegacyLogprobs(entries, at) : null,
        finish_reason: x.finish_reason ?? null,
      };
    });
    return JSON.stringify({ ...head, choices });
  };
}
