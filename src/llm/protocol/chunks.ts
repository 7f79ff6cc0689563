// The chunks of a streamed chat answer (`chat.completion.chunk`), as orchestrators write them
// and gateways relay them.

import type { FinishReason, TokenLogprob, Usage } from './types.ts';

/** A piece of tool call `index` in a streamed delta (OpenAI `delta.tool_calls[]`): id, type and name on its first. */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

/** What a chunk adds to its choice: the role on the choice's first chunk, then content or tool-call pieces. */
export interface ChunkDelta {
  role?: 'assistant';
  content?: string | null;
  tool_calls?: ToolCallDelta[];
}

/** One choice of a `chat.completion.chunk`. */
export interface ChunkChoice {
  index: number;
  delta: ChunkDelta;
  /** The tokens of `delta.content` (`logprobs.content`), only when the request asked for logprobs. */
  logprobs?: TokenLogprob[] | undefined;
  finish: FinishReason | null;
}

/** Builds a `chat.completion.chunk` event body (the id and created come from the gateway). */
export function chunk(opts: { id: string; created: number; model: string; choice: ChunkChoice }): string {
  const c = opts.choice;
  return JSON.stringify({
    id: opts.id,
    object: 'chat.completion.chunk',
    created: opts.created,
    model: opts.model,
    choices: [
      {
        index: c.index,
        delta: c.delta,
        ...(c.logprobs ? { logprobs: { content: c.logprobs } } : {}),
        finish_reason: c.finish,
      },
    ],
  });
}

/**
 * The wire form (`data: {chunk}\n\n`) of a stream's chunks, with everything but the choice
 * serialised once: byte for byte what formatSse({ data: chunk(...) }) gives, without a
 * JSON.stringify of the whole object for every token.
 */
export function chunkEncoder(meta: { id: string; created: number; model: string }): (choice: ChunkChoice) => string {
  const head = `data: {"id":${JSON.stringify(meta.id)},"object":"chat.completion.chunk","created":${JSON.stringify(meta.created)},"model":${JSON.stringify(meta.model)},"choices":[{"index":`;
  return (c) =>
    `${head}${c.index},"delta":${JSON.stringify(c.delta)}${c.logprobs ? `,"logprobs":{"content":${JSON.stringify(c.logprobs)}}` : ''},"finish_reason":${JSON.stringify(c.finish)}}]}\n\n`;
}

/** The last chunk before [DONE]: no choices, the usage summed over them. */
export function usageChunk(opts: { id: string; created: number; model: string; usage: Usage }): string {
  return JSON.stringify({
    id: opts.id,
    object: 'chat.completion.chunk',
    created: opts.created,
    model: opts.model,
    choices: [],
    usage: opts.usage,
  });
}
