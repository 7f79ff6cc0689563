// The Engine interface (STYLE.md, practice 7): an orchestrator runs one engine; adding a kind
// means adding a folder under engines/ (its index.ts the face, issue #26), one line in
// engines/index.ts and its options in EngineOptions (main.ts maps the settings to them).
// Engines see only the domain types of llm/protocol/types.ts (.dependency-cruiser.cjs).

import { randomInt } from 'node:crypto';
import { ContextLengthExceededError } from '../../lib/errors.ts';
import type {
  ChatMessage,
  Feature,
  FinishReason,
  ResponseFormat,
  TokenLogprob,
  ToolChoice,
  ToolDef,
  Usage,
} from '../protocol/types.ts';

export interface GenerateParams {
  /** Chat messages, rendered with the model's chat template; ignored when `prompt` is set. */
  messages: ChatMessage[];
  /** Raw text (POST /v1/completions): tokenized as is, no chat template. */
  prompt?: string | undefined;
  maxTokens: number;
  /** Unset: 1 (OpenAI's default), never the engine's own. */
  temperature?: number | undefined;
  /** Unset: off (1), unless the model ships its own generation defaults. */
  topP?: number | undefined;
  /** Unset: off. */
  topK?: number | undefined;
  stop?: string[] | undefined;
  /** Unset: a random seed per request (identical unseeded requests differ). */
  seed?: number | undefined;
  presencePenalty?: number | undefined;
  frequencyPenalty?: number | undefined;
  /** Choices decoded together, 1..8. */
  n: number;
  /** Log probabilities of each generated token with this many alternatives (0..20); unset: none. */
  topLogprobs?: number | undefined;
  /** Token id (decimal string) to a bias from -100 (never) to 100 (always). */
  logitBias?: Record<string, number> | undefined;
  responseFormat?: ResponseFormat | undefined;
  tools?: ToolDef[] | undefined;
  toolChoice?: ToolChoice | undefined;
  parallelToolCalls?: boolean | undefined;
}

/** A piece of a tool call of choice `index`: the first piece of call `call` has its id and name. */
export interface ToolCallPiece {
  /** Position of the call in the choice's tool_calls. */
  call: number;
  id?: string;
  name?: string;
  /** The next piece of the JSON arguments text (pieces joined are the whole). */
  arguments: string;
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * A tool call's id as OpenAI's look: `call_` and 24 random alphanumerics. One function for
 * every engine (issue #26), for the calls they generate or that came without one.
 */
export function toolCallId(): string {
  let id = 'call_';
  for (let i = 0; i < 24; i++) id += ALPHANUMERIC[randomInt(ALPHANUMERIC.length)];
  return id;
}

/**
 * Events of one generation, for every choice (`index`, 0..n-1):
 * - `text`: answer text as it is generated; several tokens may arrive as one event when the
 *   consumer was busy (nothing waits for them). `logprobs`: one entry per token in `text`.
 * - `tool_call`: a piece of a tool call.
 * - `end`: the choice is over; `text` (with its `logprobs`) is its final step's text, so its last
 *   content chunk can carry `finish_reason` (API.md section B).
 * - `usage`: once, after every choice ended, summed over the choices; nothing follows it.
 */
export type GenerateEvent =
  | { type: 'text'; index: number; text: string; logprobs?: TokenLogprob[] }
  | { type: 'tool_call'; index: number; piece: ToolCallPiece }
  | { type: 'end'; index: number; text: string; logprobs?: TokenLogprob[]; finishReason: FinishReason }
  | { type: 'usage'; usage: Usage };

export interface EngineModel {
  id: string;
  /** Loaded and ready; a cold model is loaded on its first request. */
  warm: boolean;
  /** Tokens per sequence (prompt + output) once known. */
  contextLength?: number | undefined;
}

export interface Engine {
  readonly name: string;
  /** What it can honour beyond plain chat, advertised to gateways (llm/protocol/types.ts Feature). */
  readonly features: readonly Feature[];
  /** Output tokens computed since start, abandoned requests included. */
  readonly tokensComputed: number;
  /** Loads the warm models and checks the tuning of every model offered; throws to stop start-up. */
  start(): Promise<void>;
  models(): EngineModel[];
  /**
   * Streams one completion. Aborting `signal` stops the computation itself (a client that
   * went away costs no more tokens); the iterator then ends without an `end` event.
   */
  generate(model: string, params: GenerateParams, signal: AbortSignal): AsyncIterable<GenerateEvent>;
  /** Embeddings of each input (feature `embeddings`); engines without it throw ValidationError naming `input`. */
  embed(model: string, input: string[], signal: AbortSignal): Promise<{ vectors: number[][]; promptTokens: number }>;
  close(): Promise<void>;
}

/** A prompt that cannot fit the context at all: the caller's fault, answered 400 context_length_exceeded. */
export class PromptTooLongError extends ContextLengthExceededError {
  /** `param`: `messages` (chat), `prompt` (a text completion). */
  constructor(promptTokens: number, contextLength: number, param: 'messages' | 'prompt' = 'messages') {
    super(
      `${param}: the prompt is ${promptTokens} tokens, the model's context per request is ${contextLength} (MAX_MODEL_LEN)`,
      { param },
    );
  }
}
