// What vLLM's OpenAI-compatible server answers, read: its stream chunks (server-sent events)
// and its error bodies. The one place that parses vLLM's wire (issue #26: the shared OpenAI-wire
// client of the gateway is meant to replace this file).

import {
  ContextLengthExceededError,
  type MediaplaneError,
  UpstreamFailedError,
  ValidationError,
} from '../../../../lib/errors.ts';
import { parseSse } from '../../../../lib/sse.ts';
import {
  type ChunkLogprobs as WireLogprobs,
  type OpenAiChunk,
  readErrorBody,
  wireEvents,
} from '../../../openai-wire/index.ts';
import type { TokenLogprob } from '../../../protocol/types.ts';

/**
 * vLLM's chunks (chat.completion.chunk or text_completion) as the shared reader types them
 * (llm/openai-wire); entries of another project's server are read field by field.
 */
export type VllmChunk = OpenAiChunk<Partial<TokenLogprob>>;

/** A chunk's log probabilities: the chat API's `content`, or the completions API's parallel arrays. */
export type ChunkLogprobs = WireLogprobs<Partial<TokenLogprob>>;

/**
 * The chunks of a streamed answer, in order. A failure that vLLM writes as a chunk after the
 * stream began, and a [DONE] before the usage chunk (which ends the answer), are thrown.
 */
export async function* vllmChunks(body: ReadableStream<Uint8Array>): AsyncGenerator<VllmChunk> {
  for await (const w of wireEvents<Partial<TokenLogprob>>(parseSse(body))) {
    if (w.type === 'done') throw new UpstreamFailedError('vLLM ended the answer without its usage');
    if (w.type === 'error') throw new UpstreamFailedError(`vLLM failed during the answer: ${w.message}`);
    yield w.chunk;
  }
}

/**
 * vLLM's refusal as one of the error family: its 400 (and a 422 from its request parsing) is
 * the caller's request, passed on with vLLM's message and param; a context overflow keeps its
 * code (the prompt alone too long names `prompt` or `messages`, else max_tokens); anything
 * else is vLLM failing.
 */
export async function refusal(res: Response, promptField: 'messages' | 'prompt'): Promise<MediaplaneError> {
  const { message, param } = readErrorBody(res.status, await res.text().catch(() => ''));
  if (res.status !== 400 && res.status !== 422)
    return new UpstreamFailedError(`vLLM answered ${res.status}: ${message}`);
  if (/maximum context length/i.test(message)) {
    const promptAlone = /your request has \d+ input tokens\. Please reduce/i.test(message);
    return new ContextLengthExceededError(message, { param: promptAlone ? promptField : 'max_tokens' });
  }
  return new ValidationError(message, param ? { param } : {});
}
