import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { BadRequestError, InternalError, isMediaplaneError, MediaplaneError, NotFoundError, PayloadTooLargeError, ValidationError } from '../lib/errors.ts';
import { formatSchemaErrors } from './schema-errors.ts';

/** Maps anything thrown in a route to one of our errors; unknown ones become a bare 500. */
export function toMediaplaneError(err: unknown): MediaplaneError {
  if (isMediaplaneError(err)) return err;
  const fe = err as Partial<FastifyError>;
  if (fe.validation) return new ValidationError(formatSchemaErrors(fe.validation, fe.validationContext === 'body' ? '' : (fe.validationContext ?? '')));
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new PayloadTooLargeError('request body is too large');
  if (fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || (fe.statusCode === 400 && err instanceof SyntaxError)) return new BadRequestError('request body is not valid JSON');
  if (fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return new BadRequestError('request body is empty; send a JSON object');
  if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return new BadRequestError('Content-Type must be application/json');
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) return new BadRequestError(fe.message ?? 'bad request');
  return new InternalError('internal server error', { cause: err });
}

/** The transcoding API's error shape: `{"errors": ["message", ...]}` (spec/API.md). */
export function transcodeApiErrorHandler(log: Logger) {
  return (err: unknown, req: FastifyRequest, reply: FastifyReply) => {
    const e = toMediaplaneError(err);
    if (e.statusCode >= 500) log.error({ err, reqId: req.id, url: req.routeOptions.url }, 'request failed');
    const status = e.statusCode === 409 ? 400 : e.statusCode;
    return reply.status(status).send({ errors: e.messages });
  };
}

export function transcodeApiNotFound(_req: FastifyRequest, reply: FastifyReply) {
  return reply.status(404).send({ errors: [new NotFoundError().message] });
}

/** The wire dialect of a path on the shared server: OpenAI's for the LLM routes, else the task API's. */
export function dialectOf(path: string | undefined): 'tasks' | 'openai' {
  return path !== undefined && /^\/(v1|llm|orchestrator)(\/|$|\?)/.test(path) ? 'openai' : 'tasks';
}

/** An error body in `dialect`'s shape, for errors raised before Fastify routes a request. */
export function errorBodyIn(dialect: 'tasks' | 'openai', status: number, message: string, code: string): object {
  if (dialect === 'tasks') return { errors: [message] };
  return { error: { message, type: status === 408 ? 'timeout_error' : 'invalid_request_error', code } };
}

/**
 * Answers what Node's HTTP parser refuses before any route sees it: a body that outlives
 * MEDIAPLANE_REQUEST_TIMEOUT_MS (408), headers too large (431), bytes that are not HTTP, such
 * as the rest of a body longer than its Content-Length (400). Fastify's default handler
 * answers these in a shape of its own (issue #15); the request in flight on the socket, when
 * there is one, says which API's shape to use.
 */
export function clientErrorHandler(opts: { pathOf: (socket: Socket) => string | undefined; requestTimeoutMs: number }) {
  return (err: Error & { code?: string }, socket: Socket): void => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const [status, text, message, code] =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'Request Timeout', `the request did not arrive in full within ${opts.requestTimeoutMs} ms`, 'request_timeout']
      : err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'Request Header Fields Too Large', 'the request headers are too large', 'headers_too_large']
      : [400, 'Bad Request', 'the request is not valid HTTP (does Content-Length match the body?)', 'bad_request'];
    const body = JSON.stringify(errorBodyIn(dialectOf(opts.pathOf(socket)), status, message, code));
    if (socket.writable) socket.write(`HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    socket.destroy();
  };
}
