import type { ServerResponse } from 'node:http';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { RequestAuth } from '../lib/request-auth.ts';
import { SseWriter } from '../lib/sse.ts';
import { TasksErrorBody, tasksWireError } from '../lib/wire-errors.ts';
import { type TaskRow, type TaskStore, taskOfEvent } from '../tasks/index.ts';
import { toWireTask } from './contract/index.ts';
import type { PublicBase } from './public-base.ts';

// GET /api/task/{id}/events (spec/API.md section A, issue #18): the task now, then each
// change of phase or progress, as Server-Sent Events; the stream ends when the task does.
// The changes come from the task store's follower (tasks/follow.ts): one LISTEN per process
// fanned out to every stream, and a re-read every few seconds where a NOTIFY was lost.

export interface TaskEventsDeps {
  tasks: Pick<TaskStore, 'events' | 'follow'>;
  /** The API key check the route names (the task routes' own): another owner's task is a 404. */
  auth: RequestAuth<{ owner: string }>;
  /** A comment line this often keeps proxies from closing a quiet stream (default 15 s). */
  keepAliveMs?: number;
  /** Absolute URLs of what the built-in store holds, as GET /api/task/{id} shows them. */
  publicBase: PublicBase;
}

const KEEP_ALIVE_MS = 15_000;

const TaskId = Type.Object({ id: Type.String({ maxLength: 64 }) });

const SCHEMA = {
  summary: 'Follow a task as Server-Sent Events',
  description:
    'The task now as `event: task` with the Task of GET /api/task/{id} as its data, then the same for each change of phase or progress; the stream ends after the task is completed, failed or cancelled. A `: keep-alive` comment comes every 15 s. Errors before the stream starts are JSON.',
  params: TaskId,
  response: {
    200: {
      description: 'text/event-stream of `event: task` events, each `data:` one Task as JSON',
      content: { 'text/event-stream': { schema: { type: 'string' } } },
    },
    404: TasksErrorBody,
  },
};

const HistoryQuery = Type.Object(
  { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })) },
  { additionalProperties: false },
);

const StoredEvent = Type.Object({
  id: Type.String({ description: 'The event id, as its webhook deliveries carry it' }),
  event: Type.String({ description: 'task.spawned, task.updated, task.completed or task.failed' }),
  createdAt: Type.Number({ description: 'When the change was made (ms since the epoch)' }),
  task: Type.Object(
    {},
    { additionalProperties: true, description: 'The task right after the change, as GET /api/task/{id} showed it' },
  ),
});

const HISTORY_SCHEMA = {
  summary: "A task's stored events",
  description:
    "The events the task's changes wrote, oldest first: the newest `limit` (100 unless given, at most 500). They are what its webhooks were sent, with the same ids, and are kept after the task ended for MEDIAPLANE_TASK_EVENTS_RETENTION_MS (7 days by default). Progress is an event at most every MEDIAPLANE_TASK_PROGRESS_EVENT_MS; GET /api/task/{id}/events shows every change live.",
  params: TaskId,
  querystring: HistoryQuery,
  response: { 200: Type.Array(StoredEvent), 404: TasksErrorBody },
};

const HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/** Registers the route under the task API's prefix (api/routes.ts), with its auth. */
export async function taskEventsRoute(app: FastifyInstance, deps: TaskEventsDeps): Promise<void> {
  // Open streams end when the server closes, or its close would wait for them forever.
  const open = new Set<AbortController>();
  app.addHook('preClose', async () => {
    for (const c of open) c.abort();
  });

  app.get<{ Params: Static<typeof TaskId>; Querystring: Static<typeof HistoryQuery> }>(
    '/task/:id/history',
    { schema: HISTORY_SCHEMA, onRequest: deps.auth.hook },
    async (req) => {
      const rows = await deps.tasks.events(deps.auth.of(req).owner, req.params.id, req.query.limit ?? 100);
      return rows.map((e) => ({
        id: e.id,
        event: e.event,
        createdAt: e.created_at.getTime(),
        task: toWireTask(taskOfEvent(e), deps.publicBase),
      }));
    },
  );

  const options = { schema: SCHEMA, onRequest: deps.auth.hook };
  app.get<{ Params: Static<typeof TaskId> }>('/task/:id/events', options, async (req, reply) => {
    const stop = new AbortController();
    const rows = deps.tasks.follow(deps.auth.of(req).owner, req.params.id, { signal: stop.signal });
    // The first read answers a 404 (or any error) as JSON, before the stream starts.
    const first = await rows.next();
    if (first.done) throw new Error('the task follower yielded nothing');
    reply.hijack();
    open.add(stop);
    const onClose = (): void => stop.abort();
    reply.raw.on('close', onClose);
    try {
      const keepAliveMs = deps.keepAliveMs ?? KEEP_ALIVE_MS;
      await stream(reply.raw, first.value, rows, { log: req.log, keepAliveMs, base: deps.publicBase });
    } finally {
      reply.raw.off('close', onClose);
      open.delete(stop);
      stop.abort();
      await rows.return(undefined);
    }
  });
}

async function stream(
  res: ServerResponse,
  first: TaskRow,
  rows: AsyncGenerator<TaskRow>,
  o: { log: FastifyBaseLogger; keepAliveMs: number; base: PublicBase },
): Promise<void> {
  res.writeHead(200, HEADERS);
  const out = new SseWriter(res);
  const keepAlive = setInterval(() => void out.raw(': keep-alive\n\n'), o.keepAliveMs);
  const send = (row: TaskRow) => out.send({ event: 'task', data: JSON.stringify(toWireTask(row, o.base)) });
  try {
    await send(first);
    for await (const row of rows) await send(row);
  } catch (err) {
    // The status is sent: the client learns of the failure as an event in the API's error shape.
    o.log.warn({ err }, 'task event stream failed');
    await out.send({ event: 'error', data: JSON.stringify(tasksWireError(err).body) });
  } finally {
    clearInterval(keepAlive);
    out.end();
  }
}
