// The gateway's reading of an orchestrator's refusal. Its errors reach the wire as every LLM
// error does, through lib/wire-errors.ts openAiWireError.

import { ContextLengthExceededError, type MediaplaneError, RequestRefusedError } from '../../lib/errors.ts';

/**
 * An orchestrator's 400: the caller's request as the orchestrator refused it. The gateway
 * answers it as it came, its code (context_length_exceeded, unsupported_parameter...) and
 * `param` kept, never rewritten to invalid_request (API.md section B), and tries no other
 * orchestrator.
 */
export function refusedByOrchestrator(opened: {
  message: string;
  code?: string | undefined;
  param?: string | undefined;
}): MediaplaneError {
  const options = opened.param === undefined ? {} : { param: opened.param };
  return opened.code === 'context_length_exceeded'
    ? new ContextLengthExceededError(opened.message, options)
    : new RequestRefusedError(opened.message, { ...options, code: opened.code ?? 'invalid_request' });
}
