// The OpenAI wire as a client reads it (issue #26): error bodies and stream chunks, shared by
// the gateway (reading orchestrators) and the orchestrator's vLLM engine (reading vLLM). It
// knows neither side: both import it, as they import llm/protocol.

export { type ErrorBody, readErrorBody } from './error-body.ts';
export {
  type ChunkChoice,
  type ChunkLogprobs,
  decodeEvent,
  type OpenAiChunk,
  type ToolCallDelta,
  type WireEvent,
  wireEvents,
} from './chunks.ts';
