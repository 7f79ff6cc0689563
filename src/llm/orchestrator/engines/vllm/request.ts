// vLLM's requests: GenerateParams in the body of vLLM's OpenAI-compatible endpoints.

import type { ChatMessage } from '../../../protocol/types.ts';
import type { GenerateParams } from '../../engine.ts';

/**
 * The request vLLM's OpenAI server gets: every field of GenerateParams under OpenAI's name
 * (vLLM implements them natively: response_format through its guided decoding, tools with
 * tool_choice, n, logprobs, logit_bias). Unset fields are left out (JSON drops undefined), so
 * vLLM's own defaults apply to them, but temperature: unset is OpenAI's 1, never the model's.
 */
export function vllmBody(model: string, p: GenerateParams): Record<string, unknown> {
  const common = {
    model,
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: p.maxTokens,
    temperature: p.temperature ?? 1,
    top_p: p.topP,
    top_k: p.topK,
    stop: p.stop,
    seed: p.seed,
    presence_penalty: p.presencePenalty,
    frequency_penalty: p.frequencyPenalty,
    n: p.n > 1 ? p.n : undefined,
    logit_bias: p.logitBias,
    response_format: p.responseFormat,
  };
  // The legacy endpoint's `logprobs` is the number of alternatives (OpenAI's completions API).
  if (p.prompt !== undefined) return { ...common, prompt: p.prompt, logprobs: p.topLogprobs };
  return {
    ...common,
    messages: p.messages.map(vllmMessage),
    logprobs: p.topLogprobs === undefined ? undefined : true,
    top_logprobs: p.topLogprobs,
    tools: p.tools,
    tool_choice: p.toolChoice,
    parallel_tool_calls: p.parallelToolCalls,
  };
}

/** An assistant message that only called tools has `content: null`, as OpenAI's clients send it. */
function vllmMessage(m: ChatMessage): Record<string, unknown> {
  return m.role === 'assistant' && m.tool_calls?.length && m.content === '' ? { ...m, content: null } : { ...m };
}
