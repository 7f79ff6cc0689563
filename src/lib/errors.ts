// One error family for the whole service (STYLE.md, practice 4): every error the service
// raises on purpose is one of these, the CLI's and the configuration's included. Each API maps
// them to its own wire shape in one function (lib/wire-errors.ts); job retries are decided by
// `retryable`, never by matching message strings.

export interface ErrorOptions {
  cause?: unknown;
  /** The request field the error is about (OpenAI's `param`: `model`, `max_tokens`, `messages`). */
  param?: string | undefined;
}

export abstract class MediaplaneError extends Error {
  abstract readonly code: string;
  abstract readonly statusCode: number;
  /** Whether a job that failed with this error may be tried again automatically. */
  readonly retryable: boolean = false;
  /** The request field it is about, when one is (the LLM API answers it as `param`). */
  readonly param: string | undefined;

  constructor(message: string, options: ErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.param = options.param;
  }

  /** The messages shown to a client; subclasses with several messages override this. */
  get messages(): string[] {
    return [this.message];
  }
}

/** A request body or parameter broke a rule; each message names the field path and the rule. */
export class ValidationError extends MediaplaneError {
  readonly code = 'validation_failed';
  readonly statusCode = 422;
  readonly details: string[];
  constructor(details: string[] | string, options: ErrorOptions = {}) {
    const list = Array.isArray(details) ? details : [details];
    super(list.join('; '), options);
    this.details = list;
  }
  override get messages(): string[] {
    return this.details;
  }
}

/** A request the server cannot read: malformed JSON, an empty body, bytes that are not HTTP. */
export class BadRequestError extends MediaplaneError {
  readonly code = 'bad_request';
  readonly statusCode = 400;
}

/** A body in another format than the route reads (JSON everywhere). */
export class UnsupportedContentTypeError extends MediaplaneError {
  readonly code = 'unsupported_media_type';
  readonly statusCode = 415;
  constructor(message = 'Content-Type must be application/json', options: ErrorOptions = {}) {
    super(message, options);
  }
}

/** The request (headers and body) did not arrive in full within the server's request timeout. */
export class RequestTimeoutError extends MediaplaneError {
  readonly code = 'request_timeout';
  readonly statusCode = 408;
}

export class HeadersTooLargeError extends MediaplaneError {
  readonly code = 'headers_too_large';
  readonly statusCode = 431;
}

export class AuthError extends MediaplaneError {
  readonly code = 'unauthorized';
  readonly statusCode = 401;
}

export class PaymentRequiredError extends MediaplaneError {
  readonly code = 'insufficient_balance';
  readonly statusCode = 402;
}

export class NotFoundError extends MediaplaneError {
  readonly code = 'not_found';
  readonly statusCode = 404;
  constructor(message = 'not found', options: ErrorOptions = {}) {
    super(message, options);
  }
}

/** No orchestrator (or engine) serves the model asked for; a model id without an org too. */
export class ModelNotFoundError extends MediaplaneError {
  readonly code = 'model_not_found';
  readonly statusCode = 404;
  constructor(message: string, options: ErrorOptions = {}) {
    super(message, { param: 'model', ...options });
  }
}

/**
 * The request cannot fit the model's context: max_tokens above it (`param` max_tokens), or a
 * prompt longer than it (`param` messages). The caller's mistake, never an orchestrator's.
 */
export class ContextLengthExceededError extends MediaplaneError {
  readonly code = 'context_length_exceeded';
  readonly statusCode = 400;
  constructor(message: string, options: ErrorOptions = {}) {
    super(message, { param: 'max_tokens', ...options });
  }
}

/**
 * A request an upstream (an orchestrator) refused as the caller's mistake, passed on as it
 * came: its own `code` (`unsupported_parameter`, `invalid_request`...) and `param`, never
 * rewritten to another (API.md section B).
 */
export class RequestRefusedError extends MediaplaneError {
  readonly code: string;
  readonly statusCode = 400;
  constructor(message: string, options: ErrorOptions & { code: string }) {
    super(message, options);
    this.code = options.code;
  }
}

/** The action does not fit the resource's current state (retry a running task, say). */
export class InvalidStateError extends MediaplaneError {
  readonly code = 'invalid_state';
  readonly statusCode = 400;
}

/** The resource's state refuses the action (terminate a stream that is not live): 409. */
export class ConflictError extends MediaplaneError {
  readonly code = 'conflict';
  readonly statusCode = 409;
}

export class PayloadTooLargeError extends MediaplaneError {
  readonly code = 'payload_too_large';
  readonly statusCode = 413;
}

/** A limit that frees up with time; the answer says when to try again (API.md: 429 with Retry-After). */
export class TooManyRequestsError extends MediaplaneError {
  readonly code: string = 'too_many_requests';
  readonly statusCode = 429;
  /** Whole seconds until a retry may succeed, at least 1 (the Retry-After header). */
  readonly retryAfterSeconds: number;
  constructor(message: string, options: ErrorOptions & { retryAfterMs?: number } = {}) {
    super(message, options);
    this.retryAfterSeconds = Math.max(1, Math.ceil((options.retryAfterMs ?? 1000) / 1000));
  }
}

/** One rate window of a key (issue #32): what OpenAI's x-ratelimit-* headers say of it. */
export interface RateWindow {
  limit: number;
  remaining: number;
  /** Milliseconds until the window starts again. */
  resetMs: number;
}

/**
 * A key's requests or tokens per window are used up (issue #32). Its windows go on the wire
 * as OpenAI's x-ratelimit-* headers on the LLM routes (lib/wire-errors.ts), Retry-After on both.
 */
export class RateLimitedError extends TooManyRequestsError {
  override readonly code = 'rate_limit_exceeded';
  /** Which limit refused it. */
  readonly kind: 'requests' | 'tokens';
  /** The key's windows as they stood (requests, and tokens when the key has a tokens limit). */
  readonly windows: { requests?: RateWindow | undefined; tokens?: RateWindow | undefined };
  constructor(
    message: string,
    options: ErrorOptions & {
      kind: 'requests' | 'tokens';
      windows: { requests?: RateWindow | undefined; tokens?: RateWindow | undefined };
    },
  ) {
    const refused = options.windows[options.kind];
    super(message, { ...options, retryAfterMs: refused?.resetMs ?? 1000 });
    this.kind = options.kind;
    this.windows = options.windows;
  }
}

/**
 * A key's budget for its period is spent (issue #32): a 402 on the LLM routes, a 429 on the
 * task API (lib/wire-errors.ts), with Retry-After when the period ends.
 */
export class BudgetSpentError extends MediaplaneError {
  readonly code = 'budget_exceeded';
  readonly statusCode = 402;
  /** Whole seconds until the budget's period starts again; undefined for a budget with no period. */
  readonly retryAfterSeconds: number | undefined;
  constructor(message: string, options: ErrorOptions & { retryAfterMs?: number | undefined } = {}) {
    super(message, options);
    this.retryAfterSeconds =
      options.retryAfterMs === undefined ? undefined : Math.max(1, Math.ceil(options.retryAfterMs / 1000));
  }
}

/** The key may not do this: a model outside its allowlist (issue #32). */
export class ForbiddenError extends MediaplaneError {
  readonly code: string;
  readonly statusCode = 403;
  constructor(message: string, options: ErrorOptions & { code?: string } = {}) {
    super(message, options);
    this.code = options.code ?? 'forbidden';
  }
}

/** The input could not be fetched for good: 404, 403, a refused address. Not retried. */
export class InputUnreadableError extends MediaplaneError {
  readonly code = 'input_unreadable';
  readonly statusCode = 422;
}

export class InputTooLargeError extends MediaplaneError {
  readonly code = 'input_too_large';
  readonly statusCode = 413;
}

/** Not a video, no video stream, undecodable or an unsupported codec. Not retried. */
export class UnsupportedMediaError extends MediaplaneError {
  readonly code = 'unsupported_media';
  readonly statusCode = 422;
}

/** Bad credentials, a missing bucket, a refused delegation. Not retried. */
export class StorageDeniedError extends MediaplaneError {
  readonly code = 'storage_denied';
  readonly statusCode = 422;
}

/** A network error, a 5xx, a service that is down: worth another try. */
export class UpstreamUnavailableError extends MediaplaneError {
  readonly code = 'upstream_unavailable';
  readonly statusCode = 503;
  override readonly retryable: boolean = true;
}

/** The upstream answered with something broken (a 5xx after it started, say). */
export class UpstreamFailedError extends MediaplaneError {
  readonly code = 'upstream_failed';
  readonly statusCode = 502;
  override readonly retryable: boolean = true;
}

export class TimeoutError extends MediaplaneError {
  readonly code = 'timeout';
  readonly statusCode = 504;
  override readonly retryable: boolean = true;
}

/** The job was cancelled by its owner; never retried, never reported as a failure. */
export class CancelledError extends MediaplaneError {
  readonly code = 'cancelled';
  readonly statusCode = 409;
  constructor(message = 'cancelled', options: ErrorOptions = {}) {
    super(message, options);
  }
}

export class InternalError extends MediaplaneError {
  readonly code = 'internal';
  readonly statusCode = 500;
}

export function isMediaplaneError(err: unknown): err is MediaplaneError {
  return err instanceof MediaplaneError;
}

/**
 * Whether `err` is the fault of what the caller sent (a file that is no video, an input URL
 * that answers 404, a refused field), not the service's: one of ours, not retryable, with a
 * 4xx status. Such a failure is an ordinary event for the logs (info, no stack trace): the
 * client reads its reason, and nothing on the server needs mending.
 */
export function isCallersFault(err: unknown): err is MediaplaneError {
  return isMediaplaneError(err) && !err.retryable && err.statusCode < 500;
}

/** Whether a job that threw `err` may be retried: our errors say so; unknown errors do not. */
export function isRetryable(err: unknown): boolean {
  return isMediaplaneError(err) && err.retryable;
}
