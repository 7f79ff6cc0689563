// The wire between gateways and orchestrators, and the chat request both check (issue #26 split
// it by concern). Gateway and orchestrator talk over HTTP only (STYLE.md: separate processes at
// scale); this folder holds the shapes and the validation they share, no state:
// - types.ts: the domain types, the only part engines import (.dependency-cruiser.cjs);
// - fields.ts, chat-schema.ts: the request schemas; chat-request.ts: their checks;
// - chunks.ts: the streamed chunks; capabilities.ts: an orchestrator's advertisement and its
//   schema; transport.ts: the header and body allowance between the two.

export { type Capabilities, readCapabilities } from './capabilities.ts';
export { maxTokensProblem, requiredFeatures, toChatRequest, validateChatRequest } from './chat-request.ts';
export { ChatRequestBody, ForwardedChatBody, unknownFields } from './chat-schema.ts';
export { type ChunkChoice, type ChunkDelta, chunk, chunkEncoder, type ToolCallDelta, usageChunk } from './chunks.ts';
export { bounded, flag, sharedFields } from './fields.ts';
export { forwardedBodyLimit, REQUEST_ID_HEADER } from './transport.ts';
export {
  type ChatMessage,
  type ChatRequest,
  FEATURES,
  type Feature,
  type FinishReason,
  type JsonSchema,
  MODEL_ID_RE,
  type ResponseFormat,
  type Role,
  type TokenLogprob,
  type ToolCall,
  type ToolChoice,
  type ToolDef,
  type Usage,
} from './types.ts';
