import { Type, type Static } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import {
  BadRequestError,
  BudgetSpentError,
  ConflictError,
  InternalError,
  MediaplaneError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  type RateWindow,
  TooManyRequestsError,
  UnsupportedContentTypeError,
  ValidationError,
} from './errors.ts';
import { formatSchemaErrors, type SchemaError } from './schema-errors.ts';

// The one place where errors become bytes on a wire (issue #16). Anything thrown, Fastify's
// own errors included, becomes one of the error family (fromFastifyError), and each API has
// one function for its shape: the task API's {"errors": [...]} (spec/API.md section A) and
// OpenAI's {"error": {message, type, param, code}} (section B) for the LLM routes and the
// orchestrators. Each API's special cases are rules of its function, not of its routes.

/** The task API's error body. */
export const TasksErrorBody = Type.Object(
  { errors: Type.Array(Type.String(), { minItems: 1 }) },
  { additionalProperties: false, description: 'Every problem, each naming the field path and the rule' },
);
export type TasksErrorBody = Static<typeof TasksErrorBody>;

/** The LLM API's error body, as OpenAI's clients parse it. */
export const OpenAiErrorBody = Type.Object(
  {
    error: Type.Object(
      {
        message: Type.String(),
        type: Type.String({ description: 'invalid_request_error, authentication_error, not_found_error, ...' }),
        param: Type.Union([Type.String(), Type.Null()], { description: 'The request field it is about' }),
        code: Type.String({ description: 'model_not_found, context_length_exceeded, insufficient_balance, ...' }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type OpenAiErrorBody = Static<typeof OpenAiErrorBody>;

/**
 * OpenAI's error body with `detail: {msg}` beside it, for POST /llm: the @livepeer/ai SDK's
 * generate.llm parses its 400, 401 and 500 as `{detail: {msg}}` (models/errors/httperror.ts)
 * and fails with "Response validation failed" on anything else; OpenAI's clients read `error`
 * and ignore the rest. /v1/* keeps OpenAI's exact shape.
 */
export const LlmErrorBody = Type.Object(
  {
    error: OpenAiErrorBody.properties.error,
    detail: Type.Optional(
      Type.Object(
        { msg: Type.String({ description: 'error.message again, for @livepeer/ai' }) },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type LlmErrorBody = Static<typeof LlmErrorBody>;

export interface WireError<Body> {
  status: number;
  body: Body;
  /** Headers the answer carries: `Retry-After` on every 503 and 429 (API.md sections A and B). */
  headers?: Record<string, string>;
}

/** A 503 says when to try again (RFC 9110 section 10.2.3): busy orchestrators free up in about a second. */
const RETRY_AFTER_SECONDS = '1';

function withHeaders<Body>(answer: WireError<Body>, e: MediaplaneError): WireError<Body> {
  if (e instanceof TooManyRequestsError) return { ...answer, headers: { 'retry-after': String(e.retryAfterSeconds) } };
  if (e instanceof BudgetSpentError && e.retryAfterSeconds !== undefined)
    return { ...answer, headers: { 'retry-after': String(e.retryAfterSeconds) } };
  return answer.status === 503 ? { ...answer, headers: { 'retry-after': RETRY_AFTER_SECONDS } } : answer;
}

/** OpenAI's duration format of x-ratelimit-reset-*: `450ms`, `12s`, `1m30s`. */
function resetText(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const s = Math.ceil(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}

/**
 * OpenAI's rate-limit headers for a key's windows (issue #32): x-ratelimit-limit-requests,
 * -remaining-requests, -reset-requests and the same for tokens, on every answer of the LLM
 * routes of a key with limits (the gateway sets them on success, openAiWireError on a 429).
 */
export function rateLimitHeaders(windows: { requests?: RateWindow | undefined; tokens?: RateWindow | undefined }) {
  const headers: Record<string, string> = {};
  for (const kind of ['requests', 'tokens'] as const) {
    const w = windows[kind];
    if (!w) continue;
    headers[`x-ratelimit-limit-${kind}`] = String(w.limit);
    headers[`x-ratelimit-remaining-${kind}`] = String(Math.max(0, w.remaining));
    headers[`x-ratelimit-reset-${kind}`] = resetText(w.resetMs);
  }
  return headers;
}

/** What a 500 says on any wire: its message may hold paths or settings, never meant for a client. */
const INTERNAL = 'internal server error';

/** Fastify's error codes that stand for one of ours. */
const FASTIFY_ERRORS: Record<string, () => MediaplaneError> = {
  FST_ERR_CTP_BODY_TOO_LARGE: () => new PayloadTooLargeError('request body is too large'),
  FST_ERR_CTP_INVALID_JSON_BODY: () => new BadRequestError('request body is not valid JSON'),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => new BadRequestError('request body is empty; send a JSON object'),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () => new UnsupportedContentTypeError(),
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: () => new BadRequestError('request body does not match its Content-Length'),
  FST_ERR_NOT_FOUND: () => new NotFoundError(),
};

interface FastifyLike {
  code?: unknown;
  statusCode?: unknown;
  message?: unknown;
  validation?: SchemaError[];
  validationContext?: string;
}

/**
 * Anything thrown while answering, as one of the error family: ours as they are, Fastify's own
 * (bad JSON, wrong content type, body too large, a schema's complaints) by their code, other
 * client errors as a 400, and the rest as a bare 500 that keeps the original as its cause.
 */
export function fromFastifyError(err: unknown): MediaplaneError {
  if (err instanceof MediaplaneError) return err;
  const fe = (typeof err === 'object' && err !== null ? err : {}) as FastifyLike;
  if (Array.isArray(fe.validation))
    return new ValidationError(
      formatSchemaErrors(fe.validation, fe.validationContext === 'body' ? '' : (fe.validationContext ?? '')),
    );
  const known = typeof fe.code === 'string' ? FASTIFY_ERRORS[fe.code] : undefined;
  if (known) return known();
  const status = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  // Fastify's default JSON parser (a bare Fastify app, as tests build) throws a SyntaxError.
  if (status === 400 && err instanceof SyntaxError) return new BadRequestError('request body is not valid JSON');
  if (status >= 400 && status < 500)
    return new BadRequestError(typeof fe.message === 'string' ? fe.message : 'bad request', { cause: err });
  return new InternalError(INTERNAL, { cause: err });
}

/**
 * The task API's statuses are those spec/API.md section A lists: an action that does not fit
 * the task's state (409) and a wrong content type (415) are its 400s, and a key's spent budget
 * (402 on the LLM routes) is its 429 (issue #32).
 */
const TASKS_STATUS: Record<number, number> = { 409: 400, 415: 400, 402: 429 };

/** The task API's shape: `{"errors": ["message", ...]}`. */
export function tasksWireError(err: unknown): WireError<TasksErrorBody> {
  const e = fromFastifyError(err);
  // Section D's stream routes answer a refused state with Livepeer's own 409 (a ConflictError).
  const status = e instanceof ConflictError ? e.statusCode : (TASKS_STATUS[e.statusCode] ?? e.statusCode);
  return withHeaders({ status, body: { errors: e.statusCode === 500 ? [INTERNAL] : e.messages } }, e);
}

const OPENAI_TYPES: Record<number, string> = {
  401: 'authentication_error',
  402: 'insufficient_quota',
  403: 'permission_error',
  429: 'rate_limit_error',
  404: 'not_found_error',
  408: 'timeout_error',
  502: 'upstream_error',
  503: 'service_unavailable',
  504: 'timeout_error',
};

/** Every other 4xx is the caller's request (a wrong content type, 415, was a server_error: issue #15). */
function openAiType(status: number): string {
  return OPENAI_TYPES[status] ?? (status >= 400 && status < 500 ? 'invalid_request_error' : 'server_error');
}

/** The LLM API has one code for a request it cannot take as written (OpenAI's invalid_request). */
const OPENAI_CODES: Record<string, string> = { validation_failed: 'invalid_request', bad_request: 'invalid_request' };

export interface OpenAiWireOptions {
  /**
   * An orchestrator's rule: every mistake of its caller is a 400, which a gateway passes on to
   * its client as it came; the 401 and 404 it keeps (and its 5xx) make a gateway try another.
   */
  callerMistakesAs400?: boolean;
  /** POST /llm: `detail: {msg}` beside `error`, for @livepeer/ai (LlmErrorBody). */
  detail?: boolean;
}

/**
 * The LLM API's shape: `{"error": {"message", "type", "param", "code"}}`, `param` null when the
 * error names no field. Validation is a 400 here (the task API answers 422).
 */
export function openAiWireError(err: unknown, opts: OpenAiWireOptions = {}): WireError<LlmErrorBody> {
  const e = fromFastifyError(err);
  let status = e.statusCode === 422 ? 400 : e.statusCode;
  if (opts.callerMistakesAs400 && status >= 400 && status < 500 && status !== 401 && status !== 404) status = 400;
  const internal = e.statusCode === 500;
  const message = internal ? INTERNAL : e.message;
  const error = {
    message,
    // OpenAI names the window that refused a rate-limited request as its type.
    type: e instanceof RateLimitedError ? e.kind : openAiType(status),
    param: internal ? null : (e.param ?? null),
    code: internal ? 'internal' : (OPENAI_CODES[e.code] ?? e.code),
  };
  const answer = withHeaders({ status, body: opts.detail ? { error, detail: { msg: message } } : { error } }, e);
  if (!(e instanceof RateLimitedError)) return answer;
  // The openai SDK waits retry-after-ms (exact) before retry-after (whole seconds).
  const resetMs = e.windows[e.kind]?.resetMs ?? 1000;
  const limits = { ...rateLimitHeaders(e.windows), 'retry-after-ms': String(Math.max(1, Math.ceil(resetMs))) };
  return { ...answer, headers: { ...answer.headers, ...limits } };
}

/** The LLM paths whose clients include @livepeer/ai: POST /llm and the rest under /llm. */
export function isLivepeerLlmPath(path: string | undefined): boolean {
  return path !== undefined && /^\/llm(\/|$|\?)/.test(path);
}

/** openAiWireError for a request to `path`: with `detail` under /llm (LlmErrorBody). */
export function llmWireErrorFor(path: string | undefined): (err: unknown) => WireError<LlmErrorBody> {
  const detail = isLivepeerLlmPath(path);
  return (err) => openAiWireError(err, { detail });
}

/**
 * The reason an error answer gives, as one line: the task API's `errors` joined, or OpenAI's
 * `error.message`; undefined for a body of neither shape. For the request log (lib/request-log.ts).
 */
export function answeredReason(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { errors, error } = body as { errors?: unknown; error?: unknown };
  if (Array.isArray(errors) && errors.every((e) => typeof e === 'string')) return errors.join('; ');
  const message = typeof error === 'object' && error !== null ? (error as { message?: unknown }).message : error;
  return typeof message === 'string' ? message : undefined;
}

type ErrorLog = Pick<Logger, 'error' | 'warn'>;

/**
 * Logs an error answered with `status`: a 500 is the server's own failure (an error); another
 * 5xx, an upstream down or timing out, is a warning; the caller's mistakes are not logged.
 */
export function logAnswered(log: ErrorLog, status: number, err: unknown, req: FastifyRequest): void {
  if (status >= 500)
    log[status === 500 ? 'error' : 'warn']({ err, reqId: req.id, url: req.routeOptions.url }, 'request failed');
}

/**
 * A Fastify error handler answering in one API's shape (`answer`: tasksWireError or
 * openAiWireError, which may look at the request's path).
 */
export function wireErrorHandler(answer: (err: unknown, req: FastifyRequest) => WireError<object>, log: ErrorLog) {
  return (err: unknown, req: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const { status, body, headers } = answer(err, req);
    logAnswered(log, status, err, req);
    if (headers) reply.headers(headers);
    return reply.status(status).send(body);
  };
}
