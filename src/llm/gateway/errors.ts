// The one place where errors become the LLM wire shape (API.md section B):
// {"error": {"message", "type", "code"}}, with the status the spec gives each case.

import type { Logger } from 'pino';
import { isMediaplaneError, MediaplaneError } from '../../lib/errors.ts';

const TYPES: Record<number, string> = {
  401: 'authentication_error',
  402: 'insufficient_quota',
  404: 'not_found_error',
  502: 'upstream_error',
  503: 'service_unavailable',
  504: 'timeout_error',
};

/** Every other 4xx is the caller's request (a wrong content type, 415, was a server_error: issue #15). */
function typeOf(status: number): string {
  return TYPES[status] ?? (status >= 400 && status < 500 ? 'invalid_request_error' : 'server_error');
}

/** Fastify's own 4xx codes that are worth a code of their own on this API. */
const FASTIFY_CODES: Record<number, string> = { 413: 'payload_too_large', 415: 'unsupported_media_type' };

/**
 * The caller's request as an orchestrator refused it (its 400), with the orchestrator's code
 * when it is one this API documents: the gateway answers it as it came, and tries no other.
 */
export class RequestRefusedError extends MediaplaneError {
  readonly statusCode = 400;
  readonly code: string;
  constructor(message: string, code: 'invalid_request' | 'context_length_exceeded' = 'invalid_request') {
    super(message);
    this.code = code;
  }
}

export function llmErrorBody(
  err: unknown,
  log: Logger,
): { status: number; body: { error: { message: string; type: string; code: string } } } {
  let status = 500;
  let message = 'internal error';
  let code = 'internal';
  if (isMediaplaneError(err)) {
    // Validation is a 400 on this API (the transcoding API answers 422).
    status = err.statusCode === 422 ? 400 : err.statusCode;
    message = err.message;
    code = err.code === 'validation_failed' ? 'invalid_request' : err.code;
    if (err.code === 'not_found' && /model/.test(message)) code = 'model_not_found';
  } else {
    const e = err as { statusCode?: unknown; code?: unknown; message?: unknown };
    // Fastify's own errors (malformed JSON, body too large) carry a 4xx status.
    if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
      status = e.statusCode;
      message =
        status === 415
          ? 'Content-Type must be application/json'
          : typeof e.message === 'string'
            ? e.message
            : 'bad request';
      code = FASTIFY_CODES[status] ?? 'invalid_request';
    }
  }
  if (status >= 500 && status !== 502 && status !== 503 && status !== 504) log.error({ err }, 'LLM request failed');
  return { status, body: { error: { message, type: typeOf(status), code } } };
}
