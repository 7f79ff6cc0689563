import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import {
  BadRequestError,
  InternalError,
  isMediaplaneError,
  MediaplaneError,
  NotFoundError,
  PayloadTooLargeError,
  ValidationError,
} from '../lib/errors.ts';
import { formatSchemaErrors } from './schema-errors.ts';
import { openAiParserErrorBody, type ParserError } from '../lib/http-server.ts';

/** Maps anything thrown in a route to one of our errors; unknown ones become a bare 500. */
export function toMediaplaneError(err: unknown): MediaplaneError {
  if (isMediaplaneError(err)) return err;
  const fe = err as Partial<FastifyError>;
  if (fe.validation)
    return new ValidationError(
      formatSchemaErrors(fe.validation, fe.validationContext === 'body' ? '' : (fe.validationContext ?? '')),
    );
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new PayloadTooLargeError('request body is too large');
  if (fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || (fe.statusCode === 400 && err instanceof SyntaxError))
    return new BadRequestError('request body is not valid JSON');
  if (fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY')
    return new BadRequestError('request body is empty; send a JSON object');
  if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return new BadRequestError('Content-Type must be application/json');
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500)
    return new BadRequestError(fe.message ?? 'bad request');
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

/** An error raised before Fastify routes a request, in the shape of the API `path` belongs to. */
export function parserErrorBody(e: ParserError, path: string | undefined): object {
  return dialectOf(path) === 'tasks' ? { errors: [e.message] } : openAiParserErrorBody(e);
}
