// What the llama.cpp engine changes in how a sequence samples, and how it reads log probabilities.
// LlamaChat and LlamaCompletion generate through `sequence.evaluate`, which neither exposes the
// probabilities nor lets top-k be off; tapSequence replaces that method on one sequence with the
// same loop over `evaluateWithMetadata` (LlamaContextSequence.evaluate is exactly that loop,
// node-llama-cpp 3.21), so the chat's stop triggers, detokenizing, grammar and function calling
// stay node-llama-cpp's own.

import type { LlamaContextSequence, LlamaModel, Token } from 'node-llama-cpp';
import type { TokenLogprob } from '../../../protocol/types.ts';

/** OpenAI's floor for a token the sampler could not pick (ln 0 is -Infinity, which JSON cannot hold). */
const MIN_LOGPROB = -9999;
/** Tokens before a token that its text is detokenized after (SentencePiece's leading space). */
const CONTEXT_TOKENS = 4;

interface Sampled {
  token: Token;
  /** The sampled token's probability. */
  p: number;
  /** The most likely tokens with their probabilities, most likely first. */
  top: Array<[Token, number]>;
}

/** What a sampling step yields with the metadata asked for (SequenceEvaluateOutput, either form). */
interface Step {
  token: Token;
  probabilities?: Map<Token, number>;
  confidence?: number;
}

export interface Logprobs {
  /** Entries for `tokens`, the next ones the chat released as text (in order; some sampled ones never are). */
  take(tokens: readonly Token[]): TokenLogprob[];
}

/**
 * Makes `sequence` sample with top-k off unless the options name one, and, with `topLogprobs`
 * set, record each sampled token's probability and the `topLogprobs` most likely alternatives.
 *
 * Top-k off: node-llama-cpp fills in topK 40 for an option left out, and its "whole vocabulary"
 * (topK 0) sorts every candidate each token (5x slower here: 350 against 1,700 tok/s on
 * tiny-random-llama-2). A null topK is dropped from the sampler config, so no top-k step runs;
 * the distribution sampler then softmaxes all candidates unsorted (1,320 tok/s, the true price
 * of sampling from the whole distribution as OpenAI does).
 *
 * Probabilities: node-llama-cpp computes them from the candidates after the sampler chain (logit
 * bias, penalties, top-k, top-p, temperature, the grammar), i.e. the distribution the token was
 * drawn from; with the defaults (temperature 1, no top-k or top-p) that is the model's own.
 * top_logprobs 0 asks only for the token's own (`confidence`, no map of the whole vocabulary).
 */
export function tapSequence(
  sequence: LlamaContextSequence,
  opts: { model: LlamaModel; topLogprobs?: number | undefined },
): Logprobs | undefined {
  const { topLogprobs } = opts;
  const metadata = topLogprobs === undefined ? {} : topLogprobs === 0 ? { confidence: true } : { probabilities: true };
  const sampled: Sampled[] = [];
  const original = sequence.evaluateWithMetadata;
  sequence.evaluate = async function* evaluate(tokens, options = {}) {
    // Reflect.apply: node-llama-cpp's option types have no null topK, which is the way to drop it.
    const steps: AsyncGenerator<Step, void, Token | Token[] | undefined> = Reflect.apply(original, sequence, [
      tokens,
      metadata,
      { ...options, topK: options.topK ?? null },
    ]);
    let input: Token | Token[] | undefined;
    try {
      for (;;) {
        const { value, done } = await steps.next(input);
        if (done) return;
        if (topLogprobs !== undefined) sampled.push(record(value, topLogprobs));
        // What the caller hands back: the next tokens to evaluate (a replacement), or none.
        const next = yield value.token;
        input = typeof next === 'number' || Array.isArray(next) ? next : undefined;
      }
    } finally {
      await steps.return();
    }
  };
  return topLogprobs === undefined ? undefined : logprobsOf(sampled, opts.model);
}

function record(step: Step, topLogprobs: number): Sampled {
  const top: Array<[Token, number]> = [];
  if (step.probabilities)
    for (const entry of step.probabilities) {
      if (top.length >= topLogprobs) break;
      top.push(entry);
    }
  return { token: step.token, p: step.probabilities?.get(step.token) ?? step.confidence ?? 0, top };
}

const logprob = (p: number): number => (p > 0 ? Math.min(0, Math.max(MIN_LOGPROB, Math.log(p))) : MIN_LOGPROB);

function logprobsOf(sampled: Sampled[], model: LlamaModel): Logprobs {
  const recent: Token[] = [];
  const entry = (text: string, p: number): { token: string; logprob: number; bytes: number[] } => ({
    token: text,
    logprob: logprob(p),
    bytes: [...Buffer.from(text, 'utf8')],
  });
  return {
    take(tokens) {
      const out: TokenLogprob[] = [];
      const texts = tokenTexts(model, tokens, recent);
      for (const [i, token] of tokens.entries()) {
        // Tokens sampled but never released (a stop trigger, a function call's syntax, a thought
        // segment) come first in the queue: passed over.
        let s = sampled.shift();
        while (s && s.token !== token) s = sampled.shift();
        const alternatives = (top: Array<[Token, number]>) =>
          top.map(([t, p]) => entry(model.detokenize([t], false, recent), p));
        if (s) out.push({ ...entry(texts[i] ?? '', s.p), top_logprobs: alternatives(s.top) });
      }
      keepRecent(recent, tokens);
      return out;
    },
  };
}

/** Adds `tokens` to `recent`, which keeps the last CONTEXT_TOKENS: what the next text is detokenized after. */
export function keepRecent(recent: Token[], tokens: readonly Token[]): void {
  recent.push(...tokens);
  recent.splice(0, Math.max(0, recent.length - CONTEXT_TOKENS));
}

/**
 * The text of each of `tokens`, released together: the chat holds back a token that is part of a
 * character until the character is whole, so the character's text goes with its last token
 * (the entries' texts and bytes then join to the content).
 */
function tokenTexts(model: LlamaModel, tokens: readonly Token[], before: Token[]): string[] {
  if (tokens.length === 1 && tokens[0] !== undefined) return [model.detokenize([tokens[0]], false, before)];
  const texts: string[] = [];
  let assigned = '';
  for (let i = 0; i < tokens.length; i++) {
    const text = model.detokenize(tokens.slice(0, i + 1), false, before).replace(/\uFFFD+$/, '');
    const piece = text.startsWith(assigned) ? text.slice(assigned.length) : '';
    texts.push(piece);
    assigned += piece;
  }
  return texts;
}
