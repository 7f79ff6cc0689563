// The chunks of an OpenAI-compatible stream, read in one place (issue #26), as openai-node's
// chunk stream reads them: the gateway reads its orchestrators' chat.completion.chunk events,
// the vLLM engine reads vLLM's (chat or text_completion). The types are a reader's: every
// field optional, since a chunk carries only what it adds.

import type { SseEvent } from '../../lib/sse.ts';
import type { FinishReason, TokenLogprob, Usage } from '../protocol/index.ts';

/** A piece of tool call `index` of a choice, as OpenAI streams them: id, type and name on the first only. */
export interface ToolCallDelta {
  index?: number;
  id?: string | null;
  type?: 'function';
  function?: { name?: string | null; arguments?: string | null } | null;
}

/**
 * A chunk's log probabilities: the chat API's `content` (OpenAI's TokenLogprob entries), or the
 * completions API's parallel arrays with alternatives as {token: logprob} maps. `Entry`: how
 * far the reader trusts the entries (a server of another project may leave fields out).
 */
export interface ChunkLogprobs<Entry = TokenLogprob> {
  content?: Entry[] | null;
  tokens?: string[];
  token_logprobs?: Array<number | null>;
  top_logprobs?: Array<Record<string, number> | null>;
}

/** One choice of a chunk: a chat delta, or a text completion's `text`. */
export interface ChunkChoice<Entry = TokenLogprob> {
  index?: number;
  delta?: { role?: string; content?: string | null; tool_calls?: ToolCallDelta[] | null } | null;
  text?: string | null;
  logprobs?: ChunkLogprobs<Entry> | null;
  finish_reason?: FinishReason | null;
}

/** The parts of a `data:` chunk its readers use (the rest passes through). */
export interface OpenAiChunk<Entry = TokenLogprob> {
  id?: string;
  object?: string;
  model?: string;
  created?: number;
  choices?: Array<ChunkChoice<Entry>>;
  usage?: Usage | null;
  /** A failure after the stream began, written as a chunk (vLLM's way). */
  error?: { message?: string } | string;
  message?: string;
}

/** What one event of a stream says. */
export type WireEvent<Entry = TokenLogprob> =
  | { type: 'chunk'; chunk: OpenAiChunk<Entry> }
  /** `data: [DONE]`, the end of the answer. */
  | { type: 'done' }
  /** A failure after the stream began, with the server's message. */
  | { type: 'error'; message: string };

const DONE = { type: 'done' } as const;

/**
 * Reads one event. A failure comes either as an `event: error` whose data is an error body
 * (the orchestrators', API.md section B) or as a chunk with `error` or `object: "error"`
 * (vLLM's): both are a WireEvent 'error'. A chunk that is no JSON throws.
 */
export function decodeEvent<Entry = TokenLogprob>(ev: SseEvent): WireEvent<Entry> {
  if (ev.event === 'error') return { type: 'error', message: errorMessage(ev.data) };
  if (ev.data === '[DONE]') return DONE;
  const chunk = JSON.parse(ev.data) as OpenAiChunk<Entry>;
  if (chunk.error !== undefined || chunk.object === 'error') return { type: 'error', message: errorMessage(chunk) };
  return { type: 'chunk', chunk };
}

/** The events of a stream read one by one (the chunk stream of a client that reads a whole SSE body). */
export async function* wireEvents<Entry = TokenLogprob>(
  events: AsyncIterable<SseEvent>,
): AsyncGenerator<WireEvent<Entry>> {
  for await (const ev of events) yield decodeEvent<Entry>(ev);
}

function errorMessage(body: string | OpenAiChunk<unknown>): string {
  let c: unknown = body;
  if (typeof body === 'string') {
    try {
      c = JSON.parse(body);
    } catch {
      return body || 'unknown error';
    }
  }
  if (typeof c !== 'object' || c === null) return 'unknown error';
  const { error, message } = c as { error?: unknown; message?: unknown };
  if (typeof error === 'string') return error;
  const inner = typeof error === 'object' && error !== null ? Reflect.get(error, 'message') : undefined;
  if (typeof inner === 'string') return inner;
  return typeof message === 'string' ? message : 'unknown error';
}
