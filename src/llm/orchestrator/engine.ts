// The Engine interface (STYLE.md, practice 7): an orchestrator runs one engine; adding a kind
// means adding a file under engines/ and one line in engines/index.ts.

import { ContextLengthExceededError } from '../../lib/errors.ts';
import type { ChatMessage, FinishReason, Usage } from '../protocol.ts';

export interface GenerateParams {
  messages: ChatMessage[];
  maxTokens: number;
  temperature?: number | undefined;
  topP?: number | undefined;
  topK?: number | undefined;
  stop?: string[] | undefined;
  seed?: number | undefined;
  presencePenalty?: number | undefined;
  frequencyPenalty?: number | undefined;
}

/**
 * `text` events carry the answer as it is generated; several tokens may arrive as one event
 * when the consumer was busy (nothing waits for them). `end` carries the text of the final
 * step, so the last content chunk can carry `finish_reason` (API.md section B): the last
 * token's text when generation was cut by max_tokens, "" when the model stopped by itself
 * (its end-of-generation token has no text).
 */
export type GenerateEvent =
  | { type: 'text'; text: string }
  | { type: 'end'; text: string; finishReason: FinishReason; usage: Usage };

export interface EngineModel {
  id: string;
  /** Loaded and ready; a cold model is loaded on its first request. */
  warm: boolean;
  /** Tokens per sequence (prompt + output) once known. */
  contextLength?: number | undefined;
}

export interface Engine {
  readonly name: string;
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
  close(): Promise<void>;
}

/** A prompt that cannot fit the context at all: the caller's fault, answered 400 context_length_exceeded. */
export class PromptTooLongError extends ContextLengthExceededError {
  constructor(promptTokens: number, contextLength: number) {
    super(
      `messages: the prompt is ${promptTokens} tokens, the model's context per request is ${contextLength} (MAX_MODEL_LEN)`,
      { param: 'messages' },
    );
  }
}
