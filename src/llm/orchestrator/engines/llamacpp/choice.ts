// One choice of a request on the llama.cpp engine: one context sequence generating with LlamaChat
// (chat messages) or LlamaCompletion (a raw prompt), its output turned into the engine's events.
// The n choices of a request each run one of these on their own sequence at the same time, so
// node-llama-cpp decodes them in one batch.

import {
  type ChatHistoryItem,
  type ChatModelFunctions,
  type ChatWrapper,
  LlamaChat,
  type LlamaChatResponseFunctionCallParamsChunk,
  LlamaCompletion,
  type LlamaContextSequence,
  type LlamaGrammar,
  type LlamaModel,
  type Token,
  type TokenBias,
} from 'node-llama-cpp';
import type { FinishReason, TokenLogprob } from '../../../protocol/types.ts';
import { type GenerateEvent, type ToolCallPiece, toolCallId } from '../../engine.ts';
import { keepRecent, type Logprobs, tapSequence } from './logprobs.ts';
import { ForcedToolCall } from './tools.ts';

/** What a request generates, the same for each of its choices (LlamaCppEngine's plan). */
export interface ChoicePlan {
  /** A completion's prompt is text (tokenized as is) or tokens (a chat rendered by the engine). */
  input: { kind: 'chat'; history: ChatHistoryItem[] } | { kind: 'completion'; prompt: string | Token[] };
  /** text: content; forced_tool: one call under `grammar`; auto_tools: content or calls of `functions`. */
  output: 'text' | 'forced_tool' | 'auto_tools';
  grammar?: LlamaGrammar | undefined;
  functions?: ChatModelFunctions | undefined;
  /** Calls the model may make in one answer (auto_tools; parallel_tool_calls false: 1). */
  maxCalls?: number | undefined;
  maxTokens: number;
  temperature: number;
  topP: number;
  /** Unset: no top-k step (tapSequence). */
  topK?: number | undefined;
  presencePenalty?: number | undefined;
  frequencyPenalty?: number | undefined;
  stop?: string[] | undefined;
  tokenBias?: TokenBias | undefined;
  topLogprobs?: number | undefined;
}

export interface ChoiceRun {
  index: number;
  sequence: LlamaContextSequence;
  model: LlamaModel;
  chatWrapper: ChatWrapper;
  plan: ChoicePlan;
  seed: number;
  signal: AbortSignal;
  emit(event: GenerateEvent): void;
  /** Tokens released as they come (the engine's tokensComputed). */
  counted(tokens: number): void;
}

/** Generated tokens of the choice (every one sampled, those a stop string took included) and those `counted`. */
export interface ChoiceTokens {
  completion: number;
  counted: number;
}

type StopReason = 'eogToken' | 'stopGenerationTrigger' | 'functionCalls' | 'maxTokens' | 'abort' | 'customStopTrigger';

/** Runs the choice to its end; no `end` event when `signal` aborted it. */
export async function runChoice(run: ChoiceRun): Promise<ChoiceTokens> {
  const { sequence, plan } = run;
  const logprobs = tapSequence(sequence, { model: run.model, topLogprobs: plan.topLogprobs });
  const start = sequence.tokenMeter.usedOutputTokens;
  const out = new ChoiceOutput(run, plan.topLogprobs !== undefined);
  const callbacks = upToMaxTokens(run, out, logprobs);
  const stopReason =
    plan.input.kind === 'chat'
      ? await chat(run, plan.input.history, callbacks, out)
      : await completion(run, plan.input.prompt, callbacks);
  // At most max_tokens: see upToMaxTokens for the one node-llama-cpp may sample past it.
  const completionTokens = Math.min(sequence.tokenMeter.usedOutputTokens - start, plan.maxTokens);
  if (!run.signal.aborted) out.end(stopReason);
  return { completion: completionTokens, counted: out.released };
}

/**
 * node-llama-cpp's callbacks, into `out`. When the max_tokens-th token ends inside a UTF-8
 * character, node-llama-cpp samples one more and releases the two together: the answer stops
 * at max_tokens, as OpenAI's does (its text may then end in a partial character), so its
 * usage, its logprobs and the bill never exceed it.
 */
function upToMaxTokens(run: ChoiceRun, out: ChoiceOutput, logprobs: Logprobs | undefined): Callbacks {
  const recent: Token[] = [];
  // onTextChunk comes just after onToken, with the text of the same tokens.
  let cutText: string | undefined;
  return {
    onToken: (chunk) => {
      const room = run.plan.maxTokens - out.released;
      const tokens = chunk.length > room ? chunk.slice(0, Math.max(0, room)) : chunk;
      cutText = tokens === chunk ? undefined : run.model.detokenize(tokens, false, recent);
      keepRecent(recent, tokens);
      out.tokens(tokens, logprobs?.take(tokens));
    },
    onTextChunk: (text) => out.text(cutText ?? text),
  };
}

/** The sampling options of LlamaChat and LlamaCompletion. */
function sampling(run: ChoiceRun) {
  const p = run.plan;
  const penalties = p.presencePenalty !== undefined || p.frequencyPenalty !== undefined;
  return {
    signal: run.signal,
    stopOnAbortSignal: true,
    maxTokens: p.maxTokens,
    temperature: p.temperature,
    topP: p.topP,
    ...(p.topK ? { topK: p.topK } : {}),
    seed: run.seed,
    ...(p.stop ? { customStopTriggers: p.stop } : {}),
    ...(p.tokenBias ? { tokenBias: p.tokenBias } : {}),
    // node-llama-cpp's default is a repeat penalty of 1.1 over the last 64 tokens, newlines
    // exempt; OpenAI's is none, and its penalties count every token of the answer so far.
    repeatPenalty: penalties
      ? {
          penalty: 1,
          presencePenalty: p.presencePenalty ?? 0,
          frequencyPenalty: p.frequencyPenalty ?? 0,
          lastTokens: p.maxTokens,
          penalizeNewLine: true,
        }
      : (false as const),
  };
}

interface Callbacks {
  onToken(tokens: Token[]): void;
  onTextChunk(text: string): void;
}

async function chat(
  run: ChoiceRun,
  history: ChatHistoryItem[],
  callbacks: Callbacks,
  out: ChoiceOutput,
): Promise<StopReason> {
  const llamaChat = new LlamaChat({
    contextSequence: run.sequence,
    chatWrapper: run.chatWrapper,
    autoDisposeSequence: false,
  });
  try {
    const p = run.plan;
    const base = { ...sampling(run), ...callbacks };
    if (p.output !== 'auto_tools' || !p.functions) {
      const r = await llamaChat.generateResponse(history, p.grammar ? { ...base, grammar: p.grammar } : base);
      return r.metadata.stopReason;
    }
    const r = await llamaChat.generateResponse(history, {
      ...base,
      functions: p.functions,
      ...(p.maxCalls !== undefined ? { maxParallelFunctionCalls: p.maxCalls } : {}),
      onFunctionCallParamsChunk: (chunk) => out.functionCallChunk(chunk),
    });
    // Calls whose parameters never streamed (a function without any) are sent whole.
    for (const [i, call] of (r.functionCalls ?? []).entries())
      out.functionCallWhole(i, call.functionName, JSON.stringify(call.params ?? {}));
    return r.metadata.stopReason;
  } finally {
    llamaChat.dispose({ disposeSequence: false });
  }
}

async function completion(run: ChoiceRun, prompt: string | Token[], callbacks: Callbacks): Promise<StopReason> {
  const llamaCompletion = new LlamaCompletion({ contextSequence: run.sequence, autoDisposeSequence: false });
  try {
    const r = await llamaCompletion.generateCompletionWithMeta(prompt, {
      ...sampling(run),
      ...callbacks,
      ...(run.plan.grammar ? { grammar: run.plan.grammar } : {}),
      // The prompt and max_tokens were checked to fit the context: nothing may be cut from the
      // prompt (LlamaCompletion keeps a tenth of the context free for shifting by default).
      contextShiftSize: 0,
      disableContextShift: true,
    });
    return r.metadata.stopReason;
  } finally {
    llamaCompletion.dispose({ disposeSequence: false });
  }
}

/**
 * The events of one choice from node-llama-cpp's callbacks. onToken comes just before
 * onTextChunk for the same tokens, so the text of the token that reaches max_tokens is known to
 * be the last and rides on the end event: the last content chunk carries finish_reason without
 * waiting for anything.
 */
class ChoiceOutput {
  released = 0;
  readonly #run: ChoiceRun;
  readonly #logprobs: TokenLogprob[] | undefined;
  readonly #forced: ForcedToolCall | undefined;
  /** Ids of the auto calls streamed, by node-llama-cpp's callIndex. */
  readonly #calls = new Map<number, string>();
  #last = false;
  #tail = '';

  constructor(run: ChoiceRun, logprobs: boolean) {
    this.#run = run;
    this.#logprobs = logprobs ? [] : undefined;
    this.#forced = run.plan.output === 'forced_tool' ? new ForcedToolCall() : undefined;
  }

  tokens(tokens: Token[], logprobs: TokenLogprob[] | undefined): void {
    this.released += tokens.length;
    this.#run.counted(tokens.length);
    this.#last = this.released >= this.#run.plan.maxTokens;
    if (logprobs) this.#logprobs?.push(...logprobs);
  }

  text(text: string): void {
    if (this.#forced) {
      for (const piece of this.#forced.push(text)) this.#piece(piece);
      return;
    }
    if (this.#last) this.#tail += text;
    else if (text) this.#run.emit({ type: 'text', index: this.#run.index, text, ...this.#takeLogprobs() });
  }

  functionCallChunk(chunk: LlamaChatResponseFunctionCallParamsChunk): void {
    const id = this.#calls.get(chunk.callIndex);
    if (id === undefined) {
      const first = toolCallId();
      this.#calls.set(chunk.callIndex, first);
      this.#piece({ call: chunk.callIndex, id: first, name: chunk.functionName, arguments: chunk.paramsChunk });
    } else if (chunk.paramsChunk) this.#piece({ call: chunk.callIndex, arguments: chunk.paramsChunk });
  }

  functionCallWhole(call: number, name: string, args: string): void {
    if (this.#calls.has(call)) return;
    const id = toolCallId();
    this.#calls.set(call, id);
    this.#piece({ call, id, name, arguments: args });
  }

  /** The last events: finish_reason tool_calls when the calls are whole, length when max_tokens cut one. */
  end(stopReason: StopReason): void {
    let finishReason: FinishReason = stopReason === 'maxTokens' ? 'length' : 'stop';
    if (this.#forced) {
      const { pieces, complete } = this.#forced.end();
      for (const piece of pieces) this.#piece(piece);
      if (complete) finishReason = 'tool_calls';
    } else if (this.#calls.size > 0 && stopReason !== 'maxTokens') finishReason = 'tool_calls';
    this.#run.emit({ type: 'end', index: this.#run.index, text: this.#tail, finishReason, ...this.#takeLogprobs() });
  }

  #piece(piece: ToolCallPiece): void {
    this.#run.emit({ type: 'tool_call', index: this.#run.index, piece });
  }

  /** The log probabilities of the text so far (one entry per token), when asked for. */
  #takeLogprobs(): { logprobs?: TokenLogprob[] } {
    if (!this.#logprobs) return {};
    return { logprobs: this.#logprobs.splice(0) };
  }
}
