// The gateway's reading of an orchestrator's refusal, for chat and embeddings alike. Its
// errors reach the wire as every LLM error does, through lib/wire-errors.ts openAiWireError.

import {
  ContextLengthExceededError,
  type MediaplaneError,
  RequestRefusedError,
  UpstreamFailedError,
  UpstreamUnavailableError,
} from '../../lib/errors.ts';
import type { ErrorBody } from '../openai-wire/index.ts';

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

/**
 * What an orchestrator's error status means: its 400 is the caller's request ('rejected', the
 * answer), a 503, 404 or 401 an orchestrator busy, without the model or not ours to use, and
 * anything else a failure ('failed': the next orchestrator is tried).
 */
export function refusal(body: ErrorBody): { kind: 'rejected' | 'failed'; error: MediaplaneError } {
  if (body.status === 400) return { kind: 'rejected', error: refusedByOrchestrator(body) };
  const text = `${body.status}: ${body.message}`;
  if (body.status === 503 || body.status === 404 || body.status === 401)
    return { kind: 'failed', error: new UpstreamUnavailableError(text) };
  return { kind: 'failed', error: new UpstreamFailedError(text) };
}
