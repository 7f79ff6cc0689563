// One streamed chat request: POST /v1/chat/completions with stream: true, read as
// Server-Sent Events from fetch (EventSource cannot POST nor send the key). Chunks are
// OpenAI's chat.completion.chunk; a usage chunk comes because include_usage is asked; a
// failure after the stream began is `event: error` with the OpenAI error body (spec/API.md B).

import { ApiError, errorWords } from '../api.ts';
import { fetchDetailed } from '../api-detail.ts';
import { readSse, type SseEvent } from '../sse.ts';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatOptions {
  model: string;
  messages: ChatMessage[];
  temperature: number;
  maxTokens: number;
  /** response_format json_schema, strict: the output always parses and matches (docs/llm.md). */
  jsonSchema?: { name: string; schema: unknown };
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** What the stream said, as it goes. */
export interface StreamProgress {
  /** The answer's id: the ledger's requestId of its charge. */
  id?: string;
  text: string;
  finishReason?: string;
  usage?: Usage;
}

interface Chunk {
  id?: string;
  choices?: { index: number; delta?: { content?: string | null }; finish_reason?: string | null }[];
  usage?: Usage | null;
  error?: unknown;
}

export function chatBody(o: ChatOptions): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model: o.model,
    messages: o.messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: o.temperature,
    max_tokens: o.maxTokens,
  };
  if (o.jsonSchema)
    body.response_format = {
      type: 'json_schema',
      json_schema: { name: o.jsonSchema.name, schema: o.jsonSchema.schema, strict: true },
    };
  return body;
}

/** Applies one event to `p`; throws an ApiError for an error event or an error chunk. */
export function applyEvent(p: StreamProgress, e: SseEvent): StreamProgress {
  if (e.data === '[DONE]') return p;
  let parsed: unknown;
  try {
    parsed = JSON.parse(e.data);
  } catch {
    throw new ApiError(200, [`the stream sent something that is not JSON: ${e.data.slice(0, 200)}`]);
  }
  if (e.event === 'error' || (parsed as Chunk).error !== undefined) {
    const words = errorWords(parsed);
    throw new ApiError(200, words.length ? words : ['the stream ended with an error']);
  }
  const c = parsed as Chunk;
  const next: StreamProgress = { ...p };
  if (c.id && !next.id) next.id = c.id;
  const choice = c.choices?.find((x) => x.index === 0);
  if (choice?.delta?.content) next.text += choice.delta.content;
  if (choice?.finish_reason) next.finishReason = choice.finish_reason;
  if (c.usage) next.usage = c.usage;
  return next;
}

/** Streams one answer, calling `onProgress` after every chunk; resolves with the whole of it. */
export async function streamChat(
  o: ChatOptions,
  onProgress: (p: StreamProgress) => void,
  signal: AbortSignal,
): Promise<StreamProgress> {
  const res = await fetchDetailed('POST', '/v1/chat/completions', { body: chatBody(o), signal });
  let p: StreamProgress = { text: '' };
  if (!res.body) return p;
  let failure: unknown;
  await readSse(res.body, (e) => {
    if (failure) return;
    try {
      p = applyEvent(p, e);
      onProgress(p);
    } catch (err) {
      failure = err;
    }
  });
  if (failure) throw failure;
  return p;
}
