import { randomUUID } from 'node:crypto';
import type { Db, Queryable } from '../db/index.ts';
import { InvalidStateError, NotFoundError, TooManyRequestsError } from '../lib/errors.ts';
import { isUuid } from '../lib/ids.ts';
import { CHANNEL_PROGRESS, notifyTasks, returningEvent, TASK_EVENTS_CHANNEL, withEvent } from './events.ts';
import { TaskFollower, type FollowerOptions, type FollowOptions } from './follow.ts';
import { CANCELLABLE, RETRYABLE, TASK_COLUMNS, type TaskRow } from './model.ts';

// Channels on which the API tells workers about new work and cancels (LISTEN/NOTIFY works
// on both the embedded database and a server, so workers wake at once instead of polling).
export const CHANNEL_WORK = 'mediaplane_work';
export const CHANNEL_CANCEL = 'mediaplane_cancel';

/** Retry-After of the queued-tasks 429: a place frees when a task ends, seconds to minutes away. */
const QUEUED_RETRY_AFTER_MS = 10_000;
export interface CreateTask {
  owner: string;
  projectId: string;
  type: string;
  params: Record<string, unknown>;
  requesterId: string | null;
  maxQueuedPerOwner: number;
  /** The task's id when the caller made it already (a record that names its task is written with it). */
  id?: string;
  /**
   * `pending`: not claimable until `enqueue` (a direct upload waits for its bytes); it counts
   * against the owner's queued tasks all the same. Default `waiting`.
   */
  phase?: 'waiting' | 'pending';
}

export interface ListOptions {
  limit: number;
  cursor?: string | undefined;
}

/** The owner-facing side of tasks: create, read, list, cancel, retry. Workers use Queue. */
export class TaskStore {
  readonly #db: Db;
  readonly #follower: TaskFollower;

  /** `follow`: the bounds of task event streams (issue #25: a per-owner cap of open streams). */
  constructor(db: Db, opts: { follow?: FollowerOptions } = {}) {
    this.#db = db;
    this.#follower = new TaskFollower(db, [TASK_EVENTS_CHANNEL, CHANNEL_PROGRESS], opts.follow);
  }

  /**
   * `q`: a transaction of the caller's, when the task is written with other rows that name it
   * (an asset, assets/store.ts); its NOTIFYs are then delivered when that transaction commits.
   */
  async create(t: CreateTask, q: Queryable = this.#db): Promise<TaskRow> {
    // The per-owner limit and the insert are one statement, so concurrent API processes
    // can overshoot it only by the requests in flight at the same instant. The count stops
    // at the limit, so its cost does not grow with an owner's history. A pending task is
    // scheduled when it is enqueued.
    const phase = t.phase ?? 'waiting';
    const rows = await q.query<TaskRow>(
      withEvent(`INSERT INTO tasks (id, owner, project_id, type, phase, params, requester_id, scheduled_at)
       SELECT $1, $2, $3, $4, $8::text, $5, $6, CASE WHEN $8::text = 'waiting' THEN now() END
       WHERE (SELECT count(*) FROM (SELECT 1 FROM tasks WHERE owner = $2 AND phase IN ('pending', 'waiting', 'running') LIMIT $7) AS queued) < $7
       ${returningEvent(`'task.spawned'`)}`),
      [
        t.id ?? randomUUID(),
        t.owner,
        t.projectId,
        t.type,
        JSON.stringify(t.params),
        t.requesterId,
        t.maxQueuedPerOwner,
        phase,
      ],
    );
    const row = rows[0];
    if (!row)
      throw new TooManyRequestsError(
        `too many queued tasks: an owner may have at most ${t.maxQueuedPerOwner} tasks waiting or running`,
        { retryAfterMs: QUEUED_RETRY_AFTER_MS },
      );
    await notifyTasks(q, phase === 'waiting' ? [CHANNEL_WORK, TASK_EVENTS_CHANNEL] : [TASK_EVENTS_CHANNEL], [row.id]);
    return row;
  }

  /**
   * A pending task becomes `waiting` (claimable): what it waited for is there (a direct
   * upload's bytes). Undefined when the task is not pending (cancelled, failed, queued already).
   */
  async enqueue(id: string, q: Queryable = this.#db): Promise<TaskRow | undefined> {
    const rows = await q.query<TaskRow>(
      withEvent(`UPDATE tasks SET phase = 'waiting', updated_at = now(), scheduled_at = now(), run_at = now()
       WHERE id = $1 AND phase = 'pending' ${returningEvent(`'task.updated'`)}`),
      [id],
    );
    const row = rows[0];
    if (row) await notifyTasks(q, [CHANNEL_WORK, TASK_EVENTS_CHANNEL], [row.id]);
    return row;
  }

  /**
   * Fails those of these tasks that are still pending, with `message` (what they waited for
   * never came: an upload URL expired). Returns the tasks it failed.
   */
  async failPending(ids: readonly string[], message: string, q: Queryable = this.#db): Promise<TaskRow[]> {
    if (ids.length === 0) return [];
    const rows = await q.query<TaskRow>(
      withEvent(`UPDATE tasks SET phase = 'failed', error_message = $2, updated_at = now()
       WHERE id = ANY($1::uuid[]) AND phase = 'pending' ${returningEvent(`'task.failed'`)}`),
      [ids, message],
    );
    await notifyTasks(
      q,
      [TASK_EVENTS_CHANNEL],
      rows.map((r) => r.id),
    );
    return rows;
  }

  /** The owner's task; another owner's id is "not found", as if it did not exist. */
  async get(owner: string, id: string): Promise<TaskRow> {
    if (!isUuid(id)) throw new NotFoundError();
    const rows = await this.#db.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1 AND owner = $2`, [
      id,
      owner,
    ]);
    const row = rows[0];
    if (!row) throw new NotFoundError();
    return row;
  }

  /** Newest first; `next` is the cursor of the following page, when there is one. */
  async list(owner: string, opts: ListOptions): Promise<{ tasks: TaskRow[]; next: string | null }> {
    if (opts.cursor !== undefined && !isUuid(opts.cursor)) return { tasks: [], next: null };
    // The cursor is the last id of the previous page; (created_at, id) orders ties exactly.
    const rows = await this.#db.query<TaskRow>(
      `SELECT ${TASK_COLUMNS} FROM tasks t WHERE owner = $1
         AND ($2::uuid IS NULL OR (created_at, id) < (SELECT created_at, id FROM tasks WHERE id = $2 AND owner = $1))
       ORDER BY created_at DESC, id DESC LIMIT $3`,
      [owner, opts.cursor ?? null, opts.limit + 1],
    );
    const more = rows.length > opts.limit;
    const tasks = more ? rows.slice(0, opts.limit) : rows;
    return { tasks, next: more ? (tasks.at(-1)?.id ?? null) : null };
  }

  /** A waiting or running task becomes `cancelled`; a running one is stopped by its worker. */
  async cancel(owner: string, id: string): Promise<TaskRow> {
    // Livepeer has no cancel event: a cancel is an update whose phase is `cancelled`.
    const rows = await this.#db.query<TaskRow>(
      withEvent(`UPDATE tasks SET phase = 'cancelled', updated_at = now(), lease_owner = NULL, lease_until = NULL
       WHERE id = $1 AND owner = $2 AND phase = ANY($3) ${returningEvent(`'task.updated'`)}`),
      [id, owner, CANCELLABLE],
    );
    const row = rows[0];
    if (!row) return this.#refuse(owner, id, 'cancelled', CANCELLABLE);
    await notifyTasks(this.#db, [CHANNEL_CANCEL, TASK_EVENTS_CHANNEL], [row.id]);
    return row;
  }

  /** A failed or cancelled task goes back to `waiting`, with its automatic retries (failures and crashes) renewed. */
  async retry(owner: string, id: string): Promise<TaskRow> {
    const rows = await this.#db.query<TaskRow>(
      withEvent(`UPDATE tasks SET phase = 'waiting', updated_at = now(), scheduled_at = now(), run_at = now(),
         error_message = NULL, progress = NULL, output = NULL, retries = 0, crashes = 0
       WHERE id = $1 AND owner = $2 AND phase = ANY($3) ${returningEvent(`'task.updated'`)}`),
      [id, owner, RETRYABLE],
    );
    const row = rows[0];
    if (!row) return this.#refuse(owner, id, 'retried', RETRYABLE);
    await notifyTasks(this.#db, [CHANNEL_WORK, TASK_EVENTS_CHANNEL], [row.id]);
    return row;
  }

  /**
   * The owner's task now, then each version of it whose phase, progress or update time
   * changed, until it is completed, failed or cancelled (after yielding that state). Another
   * owner's id throws NotFoundError at the first step, before anything is yielded; so does
   * TooManyRequestsError when the owner has as many streams open as it may.
   */
  follow(owner: string, id: string, opts: FollowOptions): AsyncGenerator<TaskRow> {
    return this.#follower.follow({ read: () => this.get(owner, id), id, owner, ...opts });
  }

  /** Streams following a task in this process now (they stop counting once they end). */
  get following(): number {
    return this.#follower.size;
  }

  async #refuse(owner: string, id: string, action: string, allowed: readonly string[]): Promise<never> {
    const task = await this.get(owner, id);
    throw new InvalidStateError(
      `task ${id} is ${task.phase}; only a task that is ${allowed.filter((p) => p !== 'pending').join(' or ')} can be ${action}`,
    );
  }

  /** Tasks by phase, for metrics. */
  async countByPhase(): Promise<Record<string, number>> {
    const rows = await this.#db.query<{ phase: string; n: number }>(
      'SELECT phase, count(*)::int AS n FROM tasks GROUP BY phase',
    );
    return Object.fromEntries(rows.map((r) => [r.phase, r.n]));
  }
}
