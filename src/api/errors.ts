import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { NotFoundError } from '../lib/errors.ts';
import { llmWireErrorFor, tasksWireError, type WireError, wireErrorHandler } from '../lib/wire-errors.ts';

// The shared server's error answers: the task API's shape under /api, OpenAI's under the LLM
// prefixes, both from the one mapper of each dialect (lib/wire-errors.ts).

/** The transcoding API's error shape: `{"errors": ["message", ...]}` (spec/API.md). */
export function transcodeApiErrorHandler(log: Logger) {
  return wireErrorHandler(tasksWireError, log);
}

export function transcodeApiNotFound(_req: FastifyRequest, reply: FastifyReply) {
  const { status, body } = tasksWireError(new NotFoundError());
  return reply.status(status).send(body);
}

/** The wire dialect of a path on the shared server: OpenAI's for the LLM routes, else the task API's. */
export function dialectOf(path: string | undefined): 'tasks' | 'openai' {
  return path !== undefined && /^\/(v1|llm|orchestrator)(\/|$|\?)/.test(path) ? 'openai' : 'tasks';
}

/** The mapper of the API `path` belongs to (OpenAI's shape under /llm also has @livepeer/ai's `detail`). */
export function wireErrorFor(path: string | undefined): (err: unknown) => WireError<object> {
  return dialectOf(path) === 'tasks' ? tasksWireError : llmWireErrorFor(path);
}

/** Errors outside every API's own scope (a root route, one raised before routing), by path. */
export function sharedErrorHandler(log: Logger) {
  return wireErrorHandler((err, req) => wireErrorFor(req.url)(err), log);
}

/** A path no route serves, outside /api and the LLM prefixes (which answer their own). */
export function sharedNotFound(req: FastifyRequest, reply: FastifyReply) {
  const path = req.url.split('?')[0] ?? '';
  const err =
    dialectOf(path) === 'tasks' ? new NotFoundError() : new NotFoundError(`no such route: ${req.method} ${path}`);
  const { status, body } = wireErrorFor(path)(err);
  return reply.status(status).send(body);
}
