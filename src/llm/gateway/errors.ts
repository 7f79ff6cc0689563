// The one place where errors become the LLM wire shape (API.md section B):
// {"error": {"message", "type", "code"}}, with the status the spec gives each case.

import type { Logger } from 'pino';
import { isMediaplaneError } from '../../lib/errors.ts';

const TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'insufficient_quota',
  404: 'not_found_error',
  413: 'invalid_request_error',
  502: 'upstream_error',
  503: 'service_unavailable',
  504: 'timeout_error',
};

export function llmErrorBody(err: unknown, log: Logger): { status: number; body: { error: { message: string; type: string; code: string } } } {
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
      message = typeof e.message === 'string' ? e.message : 'bad request';
      code = status === 413 ? 'payload_too_large' : 'invalid_request';
    }
  }
  if (status >= 500 && status !== 502 && status !== 503 && status !== 504) log.error({ err }, 'LLM request failed');
  return { status, body: { error: { message, type: TYPES[status] ?? 'server_error', code } } };
}
