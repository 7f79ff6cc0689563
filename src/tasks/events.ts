import type { Queryable } from '../db/index.ts';
import { PARAMS_WITHOUT_SECRETS, TASK_COLUMNS, type TaskRow } from './model.ts';
import type { TaskEventName } from './event-names.ts';

// The outbox of task changes (issue #18; table task_events, migration 003). Webhook
// dispatchers read it; SSE streams are woken by its channel.

/** What a task change is called on the wire (Livepeer's task webhook events): event-names.ts. */
export { TASK_EVENT_NAMES, type TaskEventName } from './event-names.ts';

// Channels on which the API tells workers about new work and cancels (LISTEN/NOTIFY works
// on both the embedded database and a server, so workers wake at once instead of polling).
export const CHANNEL_WORK = 'mediaplane_work';
export const CHANNEL_CANCEL = 'mediaplane_cancel';

/** NOTIFY channel of new task_events rows; the payload is the task's id. */
export const TASK_EVENTS_CHANNEL = 'mediaplane_task_events';

/**
 * NOTIFY channel of a progress write that was no event (throttled): only progress streams
 * (follow.ts) listen here, so webhook dispatchers wake for events alone.
 */
export const CHANNEL_PROGRESS = 'mediaplane_task_progress';

/** A TaskRow as JSON stores it: its times are ISO strings. */
export type TaskRowJson = Omit<TaskRow, 'created_at' | 'scheduled_at' | 'updated_at' | 'playable_at'> & {
  created_at: string;
  scheduled_at: string | null;
  updated_at: string;
  /** Absent from the events written before migration 506. */
  playable_at?: string | null;
};

/** One row of task_events. */
export interface TaskEventRow {
  id: string;
  task_id: string;
  owner: string;
  event: TaskEventName;
  /** The task right after the change; its params hold no secret (model.ts PARAMS_WITHOUT_SECRETS). */
  task: TaskRowJson;
  created_at: Date;
}

/** The task of an event as a TaskRow again (what the API's toWireTask takes). */
export function taskOfEvent(e: Pick<TaskEventRow, 'task'>): TaskRow {
  const t = e.task;
  return {
    ...t,
    created_at: new Date(t.created_at),
    scheduled_at: t.scheduled_at === null ? null : new Date(t.scheduled_at),
    updated_at: new Date(t.updated_at),
    playable_at: t.playable_at ? new Date(t.playable_at) : null,
  };
}

/** The events of `changed`, written in the same statement. */
const LOGGED = `logged AS (
      INSERT INTO task_events (id, task_id, owner, event, task)
      SELECT gen_random_uuid(), id, owner, event,
        (to_jsonb(changed) - 'event') || jsonb_build_object('params', ${PARAMS_WITHOUT_SECRETS})
      FROM changed WHERE event IS NOT NULL
    )`;

/**
 * One statement that changes tasks and writes the event of each changed row (the outbox).
 * A data-modifying CTE rather than a transaction of two statements: one round trip, and
 * PostgreSQL runs every such CTE to completion in the statement's snapshot, so the change
 * and its event commit or vanish together on both databases (PGlite has no second
 * connection to hold a transaction open on).
 *
 * `change` is an UPDATE or INSERT on `tasks` that returns `RETURNING ${TASK_COLUMNS}` and a
 * text column `event`: the event's name, or NULL where the change is no event (a throttled
 * progress write). The statement answers `SELECT ${select} FROM changed`, so callers keep
 * the RETURNING shape they had.
 */
export function withEvent(change: string, select = TASK_COLUMNS): string {
  return `WITH changed AS (${change}), ${LOGGED}
    SELECT ${select} FROM changed`;
}

/**
 * withEvent for a change a key's admission decides (store.ts): `admit` is SQL answering NULL
 * (admitted) or the refusal's reason, run once, before the change, as the CTE `admitted`
 * (`refusal`), which `change` reads (`FROM admitted WHERE admitted.refusal IS NULL`). `source`:
 * a SELECT `admit` reads from (the task a retry requeues; no row: nothing is admitted or changed).
 * The statement answers one row per admission: the changed task's columns (NULL where nothing
 * changed), `refusal`, and `admitted_ms`, the database's clock as the admission was decided (a
 * refusal's Retry-After is counted from it: no second read).
 */
export function withAdmission(o: { admit: string; source?: string | undefined; change: string }): string {
  // MATERIALIZED: the admission runs once, whatever the planner makes of the change's join.
  return `WITH ${o.source ? `source AS (${o.source}),` : ''}
    admitted AS MATERIALIZED (SELECT ${o.admit} AS refusal,
      (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS admitted_ms ${o.source ? 'FROM source' : ''}),
    changed AS (${o.change}), ${LOGGED}
    SELECT ${TASK_COLUMNS}, admitted.refusal, admitted.admitted_ms FROM admitted LEFT JOIN changed ON true`;
}

/**
 * RETURNING of a change for withEvent: the task's columns and the event it is. A piece
 * (issue #30, pieces.ts) is no task to clients: its changes are no events; its parent's are.
 */
export const returningEvent = (event: string) =>
  `RETURNING ${TASK_COLUMNS}, CASE WHEN parent_id IS NULL THEN ${event} END AS event`;

/** The event of a phase change that may be final: a failed task is `task.failed`, anything else an update. */
export const FAILED_OR_UPDATED = `CASE WHEN phase = 'failed' THEN 'task.failed' ELSE 'task.updated' END`;

/**
 * NOTIFY on every channel for every task id, in one round trip (Db.notify's pg_notify, for
 * several at once: a claim or a reap changes many tasks). Sent after the change committed;
 * a lost one only delays its listeners, which also poll.
 */
export async function notifyTasks(db: Queryable, channels: readonly string[], ids: readonly string[]): Promise<void> {
  if (ids.length === 0 || channels.length === 0) return;
  await db.query('SELECT pg_notify(c, id) FROM unnest($1::text[]) AS c CROSS JOIN unnest($2::text[]) AS id', [
    channels,
    ids,
  ]);
}

/**
 * The stored events of one task (its outbox rows, as its webhooks got them), oldest first:
 * the newest `limit` of them. The owner is matched too, so another owner's id finds none.
 * Kept as long as MEDIAPLANE_TASK_EVENTS_RETENTION_MS allows (queue.ts purgeEvents).
 */
export async function storedEvents(
  db: Queryable,
  o: { owner: string; taskId: string; limit: number },
): Promise<TaskEventRow[]> {
  return db.query<TaskEventRow>(
    `SELECT * FROM (
       SELECT id, task_id, owner, event, task, created_at FROM task_events
       WHERE task_id = $1 AND owner = $2 AND event LIKE 'task.%'
       ORDER BY created_at DESC, id DESC LIMIT $3) newest
     ORDER BY created_at, id`,
    [o.taskId, o.owner, o.limit],
  );
}
