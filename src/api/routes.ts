import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import type { TaskRow, TaskStore } from '../tasks/index.ts';
import {
  PLAYABLE_AT,
  TaskPieces,
  toWireTask,
  TranscodeRequest,
  transcodeTask,
  wirePieces,
  type TranscodeParams,
  type WireTask,
} from './contract/index.ts';
import { createRoute } from './create-route.ts';
import type { PublicBase } from './public-base.ts';
import type { IdempotencyKeys } from './idempotency.ts';
import { ListQuery, type PageOptions, pageOf } from './paging.ts';
import { requesterId } from './requester-id.ts';
import { checkTranscodeRequest, type TranscodeRules } from './validate-transcode.ts';
import { type TaskEventsDeps, taskEventsRoute } from './task-events-route.ts';

export interface TaskRoutesDeps {
  /** The API key check every route names (lib/request-auth.ts, issue #26). */
  auth: RequestAuth<Principal>;
  tasks: Pick<TaskStore, 'create' | 'list' | 'get' | 'cancel' | 'retry' | 'pieces'> & TaskEventsDeps['tasks'];
  rules: TranscodeRules;
  maxQueuedPerOwner: number;
  requesterSalt: string;
  /** Idempotency-Key on POST /transcode (api/idempotency.ts). */
  idempotency: IdempotencyKeys;
  /** MEDIAPLANE_PUBLIC_URL: absolute links start with it; without it links are relative. */
  publicUrl?: string | undefined;
  /** Absolute URLs of what the built-in store holds (api/public-base.ts). */
  publicBase: PublicBase;
}

const TaskId = Type.Object({ id: Type.String({ maxLength: 64 }) });
// The Task is described loosely here (its full shape is in spec/API.md); responses are
// built by contract/task.ts, not filtered by this schema.
export const TaskSchema = Type.Object(
  {
    id: Type.String(),
    type: Type.String(),
    status: Type.Object({ phase: Type.String(), updatedAt: Type.Number() }, { additionalProperties: true }),
    playableAt: Type.Optional(Type.Number({ description: PLAYABLE_AT })),
  },
  { additionalProperties: true },
);
const Errors = TasksErrorBody;
/** GET /api/task/{id}: a split task shows its pieces too (issue #30). */
const OneTaskSchema = Type.Composite([TaskSchema, Type.Object({ pieces: Type.Optional(TaskPieces) })], {
  additionalProperties: true,
});

/** The Task routes of spec/API.md section A, under the prefix the caller registers them at. */
export async function taskRoutes(app: FastifyInstance, deps: TaskRoutesDeps): Promise<void> {
  const { auth } = deps;
  const onRequest = auth.hook;

  createRoute<TranscodeParams>(app, {
    url: '/transcode',
    summary: 'Transcode a video file',
    body: TranscodeRequest,
    answer: TaskSchema,
    auth,
    idempotency: deps.idempotency,
    // Its task's insert is its first write: the request is counted there, in one statement.
    countsKeyRequest: true,
    create: async (req, p) => {
      const params = await checkTranscodeRequest(req.body, deps.rules);
      const task = {
        owner: p.owner,
        projectId: p.projectId,
        ...transcodeTask(params),
        requesterId: requesterId(deps.requesterSalt, req.ip),
        maxQueuedPerOwner: deps.maxQueuedPerOwner,
        // Admitted by the key's limits (its request, budget and concurrent transcodes) in the
        // insert's own statement (tasks/ TaskStore's admission).
        key: p,
      };
      const row = await deps.tasks.create(task);
      req.log.info({ taskId: row.id, owner: p.owner }, 'transcode task queued');
      return toWireTask(row, deps.publicBase);
    },
  });

  app.get<{ Querystring: ListQuery }>(
    '/task',
    {
      onRequest,
      schema: {
        summary: 'List tasks, newest first',
        querystring: ListQuery,
        response: { 200: Type.Array(TaskSchema) },
      },
    },
    async (req, reply) => {
      const read = (page: PageOptions) => deps.tasks.list(auth.of(req).owner, page);
      const page = await pageOf(req, reply, { publicUrl: deps.publicUrl, read });
      return page.tasks.map((t) => toWireTask(t, deps.publicBase));
    },
  );

  oneTaskRoutes(app, deps);
  await taskEventsRoute(app, { tasks: deps.tasks, auth, publicBase: deps.publicBase });
}

/** The routes on one task by its id: read it, cancel it, retry it; another owner's is a 404. */
function oneTaskRoutes(app: FastifyInstance, deps: TaskRoutesDeps): void {
  const wire = async (row: Promise<TaskRow>) => toWireTask(await row, deps.publicBase);
  const routes = [
    {
      method: 'GET',
      url: '/task/:id',
      summary: 'Get a task (with its pieces, if it was split to run on several workers)',
      act: (who: Principal, id: string) => withPieces(deps.tasks, wire(deps.tasks.get(who.owner, id))),
    },
    {
      method: 'POST',
      url: '/task/:id/cancel',
      summary: 'Cancel a waiting or running task',
      act: (who: Principal, id: string) => wire(deps.tasks.cancel(who.owner, id)),
    },
    {
      method: 'POST',
      url: '/task/:id/retry',
      summary: 'Send a failed or cancelled task back to the queue',
      // Admitted by the key's limits as a new task would be (tasks/ TaskStore's admission).
      act: (who: Principal, id: string) => wire(deps.tasks.retry(who.owner, id, who)),
    },
  ] as const;
  for (const r of routes)
    app.route<{ Params: Static<typeof TaskId> }>({
      method: r.method,
      url: r.url,
      onRequest: deps.auth.hook,
      schema: {
        summary: r.summary,
        params: TaskId,
        response: r.method === 'GET' ? { 200: OneTaskSchema, 404: Errors } : { 200: TaskSchema },
      },
      handler: (req) => r.act(deps.auth.of(req), req.params.id),
    });
}

/** The Task with the pieces it was split into, if any (issue #30). */
async function withPieces(tasks: Pick<TaskStore, 'pieces'>, task: Promise<WireTask>): Promise<WireTask> {
  const t = await task;
  const pieces = wirePieces(await tasks.pieces(t.id));
  return pieces ? { ...t, pieces } : t;
}
