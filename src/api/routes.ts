import { createHash } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Accounts, Principal } from '../accounts/index.ts';
import { AuthError } from '../lib/errors.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import type { TaskStore } from '../tasks/index.ts';
import { toWireTask, TranscodeRequest, transcodeTask, type TranscodeParams } from './contract/index.ts';
import { IdempotencyConflictBody, IdempotencyHeaders, type IdempotencyKeys } from './idempotency.ts';
import { checkTranscodeRequest, type TranscodeRules } from './validate-transcode.ts';
import { taskEventsRoute } from './task-events-route.ts';

export interface TaskRoutesDeps {
  accounts: Accounts;
  tasks: TaskStore;
  rules: TranscodeRules;
  maxQueuedPerOwner: number;
  requesterSalt: string;
  /** Idempotency-Key on POST /transcode (api/idempotency.ts). */
  idempotency: IdempotencyKeys;
  /** MEDIAPLANE_PUBLIC_URL: absolute links start with it; without it links are relative. */
  publicUrl?: string | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
}

const TaskId = Type.Object({ id: Type.String({ maxLength: 64 }) });
const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    cursor: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
);
// The Task is described loosely here (its full shape is in spec/API.md); responses are
// built by contract/task.ts, not filtered by this schema.
const TaskSchema = Type.Object(
  {
    id: Type.String(),
    type: Type.String(),
    status: Type.Object({ phase: Type.String(), updatedAt: Type.Number() }, { additionalProperties: true }),
  },
  { additionalProperties: true },
);
const Errors = TasksErrorBody;

export function principal(req: FastifyRequest): Principal {
  if (!req.principal) throw new AuthError('missing or invalid API key');
  return req.principal;
}

/**
 * `Link: <...>; rel="next"` of a list page, when there is a next one: the one link builder of
 * every paged route. Never built from what the client chooses, neither the Host header (issue
 * #15) nor the request target, which may be absolute-form `http://evil.example/...` (issue
 * #25): the path is the route's template with its validated params filled in, relative (RFC
 * 8288 resolves it against the request URL) or under MEDIAPLANE_PUBLIC_URL.
 */
export function linkNext(
  req: FastifyRequest,
  reply: FastifyReply,
  o: { publicUrl?: string | undefined; limit: number; next: string | null },
): void {
  if (!o.next) return;
  const params: object = typeof req.params === 'object' && req.params !== null ? req.params : {};
  const path = (req.routeOptions.url ?? '').replace(/:(\w+)/g, (_, name: string) =>
    encodeURIComponent(String(Reflect.get(params, name) ?? '')),
  );
  const base = o.publicUrl?.replace(/\/+$/, '') ?? '';
  reply.header('link', `<${base}${path}?limit=${o.limit}&cursor=${encodeURIComponent(o.next)}>; rel="next"`);
}

/** The Task routes of spec/API.md section A, under the prefix the caller registers them at. */
export async function taskRoutes(app: FastifyInstance, deps: TaskRoutesDeps): Promise<void> {
  app.addHook('onRequest', async (req) => {
    req.principal = await deps.accounts.requirePrincipal(req.headers.authorization);
  });

  const requesterId = (ip: string) =>
    createHash('sha256').update(`${deps.requesterSalt}:${ip}`).digest('hex').slice(0, 32);

  app.post<{ Body: TranscodeParams }>(
    '/transcode',
    {
      schema: {
        summary: 'Transcode a video file',
        headers: IdempotencyHeaders,
        body: TranscodeRequest,
        response: { 200: TaskSchema, 409: IdempotencyConflictBody, 422: Errors },
      },
    },
    async (req, reply) => {
      const p = principal(req);
      return deps.idempotency.once(req, reply, p.owner, async () => {
        const params = await checkTranscodeRequest(req.body, deps.rules);
        const row = await deps.tasks.create({
          owner: p.owner,
          projectId: p.projectId,
          ...transcodeTask(params),
          requesterId: requesterId(req.ip),
          maxQueuedPerOwner: deps.maxQueuedPerOwner,
        });
        req.log.info({ taskId: row.id, owner: p.owner }, 'transcode task queued');
        return toWireTask(row);
      });
    },
  );

  app.get<{ Params: Static<typeof TaskId> }>(
    '/task/:id',
    { schema: { summary: 'Get a task', params: TaskId, response: { 200: TaskSchema, 404: Errors } } },
    async (req) => toWireTask(await deps.tasks.get(principal(req).owner, req.params.id)),
  );

  app.get<{ Querystring: Static<typeof ListQuery> }>(
    '/task',
    {
      schema: {
        summary: 'List tasks, newest first',
        querystring: ListQuery,
        response: { 200: Type.Array(TaskSchema) },
      },
    },
    async (req, reply) => {
      const limit = req.query.limit ?? 20;
      const page = await deps.tasks.list(principal(req).owner, { limit, cursor: req.query.cursor });
      linkNext(req, reply, { publicUrl: deps.publicUrl, limit, next: page.next });
      return page.tasks.map(toWireTask);
    },
  );

  app.post<{ Params: Static<typeof TaskId> }>(
    '/task/:id/cancel',
    { schema: { summary: 'Cancel a waiting or running task', params: TaskId, response: { 200: TaskSchema } } },
    async (req) => toWireTask(await deps.tasks.cancel(principal(req).owner, req.params.id)),
  );

  app.post<{ Params: Static<typeof TaskId> }>(
    '/task/:id/retry',
    {
      schema: {
        summary: 'Send a failed or cancelled task back to the queue',
        params: TaskId,
        response: { 200: TaskSchema },
      },
    },
    async (req) => toWireTask(await deps.tasks.retry(principal(req).owner, req.params.id)),
  );

  await taskEventsRoute(app, { tasks: deps.tasks, owner: (req) => principal(req).owner });
}
