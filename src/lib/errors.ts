// One error family for the whole service (STYLE.md, practice 4). Each API maps these to its
// own wire shape in one place (api/errors.ts, llm/gateway); job retries are decided by
// `retryable`, never by matching message strings.

export interface ErrorOptions {
  cause?: unknown;
}

export abstract class MediaplaneError extends Error {
  abstract readonly code: string;
  abstract readonly statusCode: number;
  /** Whether a job that failed with this error may be tried again automatically. */
  readonly retryable: boolean = false;

  constructor(message: string, options: ErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
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

export class BadRequestError extends MediaplaneError {
  readonly code = 'bad_request';
  readonly statusCode = 400;
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

/** The action does not fit the resource's current state (retry a running task, say). */
export class InvalidStateError extends MediaplaneError {
  readonly code = 'invalid_state';
  readonly statusCode = 400;
}

export class PayloadTooLargeError extends MediaplaneError {
  readonly code = 'payload_too_large';
  readonly statusCode = 413;
}

export class TooManyRequestsError extends MediaplaneError {
  readonly code = 'too_many_requests';
  readonly statusCode = 429;
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

/** Whether a job that threw `err` may be retried: our errors say so; unknown errors do not. */
export function isRetryable(err: unknown): boolean {
  return isMediaplaneError(err) && err.retryable;
}
