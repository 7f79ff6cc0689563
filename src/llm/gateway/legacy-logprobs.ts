// The `logprobs` of OpenAI's legacy text completion (POST /v1/completions, `logprobs: k`):
// parallel arrays instead of the chat API's list of entries, alternatives as a map from token
// text to its log probability. Engines give the chat form (TokenLogprob); this is its
// translation, for whole answers and for each streamed chunk. (The vLLM engine reads vLLM's
// legacy chunks the other way, legacyToChatLogprobs in orchestrator/engines/vllm/stream.ts.)

import type { TokenLogprob } from '../protocol/index.ts';

export interface LegacyLogprobs {
  tokens: string[];
  token_logprobs: number[];
  /** Per token, its alternatives (the most likely first wins where two share a text). */
  top_logprobs: Array<Record<string, number>>;
  /** Where each token starts in the choice's text (UTF-16 code units, as OpenAI counts). */
  text_offset: number[];
}

/** `entries` in the legacy form; `offset`: where the first of them starts in the choice's text. */
export function chatToLegacyLogprobs(entries: readonly TokenLogprob[], offset = 0): LegacyLogprobs {
  const out: LegacyLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = offset;
  for (const e of entries) {
    out.tokens.push(e.token);
    out.token_logprobs.push(e.logprob);
    const alternatives: Record<string, number> = {};
    for (const a of e.top_logprobs) if (!Object.hasOwn(alternatives, a.token)) alternatives[a.token] = a.logprob;
    out.top_logprobs.push(alternatives);
    out.text_offset.push(at);
    at += e.token.length;
  }
  return out;
}
