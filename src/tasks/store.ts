import { randomUUID } from 'node:crypto';
import type { Db, Queryable } from '../db/index.ts';
import { InvalidStateError, type MediaplaneError, NotFoundError, TooManyRequestsError } from '../lib/errors.ts';
import { type Bind, sqlParams } from '../lib/sql-params.ts';
import { isUuid } from '../lib/ids.ts';
import { NEWEST_FIRST, olderThanCursor } from '../lib/paging.ts';
import {
  CHANNEL_CANCEL,
  CHANNEL_PROGRESS,
  CHANNEL_WORK,
  notifyTasks,
  returningEvent,
  storedEvents,
  TASK_EVENTS_CHANNEL,
  type TaskEventRow,
  withAdmission,
  withEvent,
} from './events.ts';
import { TaskFollower, type FollowerOptions, type FollowOptions } from './follow.ts';
import { CANCELLABLE, RETRYABLE, TASK_COLUMNS, type TaskRow } from './model.ts';
import { PieceSql } from './pieces.ts';
import type { PieceState } from './types.ts';

export { CHANNEL_CANCEL, CHANNEL_WORK } from './events.ts';

/** Retry-After of the queued-tasks 429: a place frees when a task ends, seconds to minutes away. */
const QUEUED_RETRY_AFTER_MS = 10_000;
export interface CreateTask {
  owner: string;
  projectId: string;
  type: string;
  params: Record<string, unknown>;
  requesterId: string | null;
  maxQueuedPerOwner: number;
  /** The API key that asks for it: written on the task (usage per key), and admitted by its limits. */
  key?: TaskKey | undefined;
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

/** The API key a task is asked with (accounts/ Principal); what its admission reads of it is the admission's. */
export interface TaskKey {
  keyId: string;
  owner: string;
}

/**
 * The one admission of a key's tasks (accounts/ KeyTaskAdmission, built in main.ts): every task
 * a key creates or requeues is written under it, in the statement that writes it, so no route
 * or action has a way around the key's limits.
 */
export interface TaskAdmission {
  /**
   * SQL answering NULL (admitted) or the refusal's reason; `type`: the task's, as SQL. Undefined:
   * nothing to check. It only builds: what the SQL does happens when its statement runs (`ran`).
   */
  sql(bind: Bind, o: { key: TaskKey; type: string }): string | undefined;
  /** The statement `sql` built for `key` has run: what it counted of the key's request is counted. */
  ran(key: TaskKey): void;
  /** The error a refusal's reason is answered with; `nowMs`: the database's clock when it was decided. */
  refusal(o: { key: TaskKey; reason: string; nowMs: number }): MediaplaneError;
}

/** A row of a statement withAdmission built: the task (its columns NULL where none was written), the refusal and when. */
type AdmittedRow = Omit<TaskRow, 'id'> & { id: string | null; refusal: string | null; admitted_ms: number };

/** The owner-facing side of tasks: create, read, list, cancel, retry. Workers use Queue. */
export class TaskStore {
  readonly #db: Db;
  readonly #follower: TaskFollower;
  readonly #pieces: PieceSql;

  readonly #admission: TaskAdmission | undefined;

  /**
   * `follow`: the bounds of task event streams (issue #25: a per-owner cap of open streams).
   * `admission`: a key's limits on its tasks; without it, only the owner's queued tasks are.
   */
  constructor(db: Db, opts: { follow?: FollowerOptions; admission?: TaskAdmission | undefined } = {}) {
    this.#db = db;
    this.#admission = opts.admission;
    this.#follower = new TaskFollower(db, [TASK_EVENTS_CHANNEL, CHANNEL_PROGRESS], opts.follow);
    // Only cancel, retry and reads use it: no progress is written through the store.
    this.#pieces = new PieceSql(db, { progressEventMs: 0 });
  }

  /**
   * `q`: a transaction of the caller's, when the task is written with other rows that name it
   * (an asset, assets/store.ts); its NOTIFYs are then delivered when that transaction commits.
   */
  async create(t: CreateTask, q: Queryable = this.#db): Promise<TaskRow> {
    // The per-owner limit and the insert are one statement, so concurrent API processes
    // can overshoot it only by the requests in flight at the same instant. The count stops
    // at the limit, so its cost does not grow with an owner's history. A pending task is
    // scheduled when it is enqueued. The key's limits admit it first, in the same statement.
    const phase = t.phase ?? 'waiting';
    const { bind, params } = sqlParams(9);
    const rows = await q.query<AdmittedRow>(
      withAdmission({
        admit: this.#admit(bind, t.key, '$4::text'),
        change: `INSERT INTO tasks (id, owner, project_id, type, phase, params, requester_id, scheduled_at, key_id)
         SELECT $1, $2, $3, $4, $8::text, $5, $6, CASE WHEN $8::text = 'waiting' THEN now() END, $9::uuid FROM admitted
         WHERE admitted.refusal IS NULL
           AND (SELECT count(*) FROM (SELECT 1 FROM tasks WHERE owner = $2 AND phase IN ('pending', 'waiting', 'running') AND parent_id IS NULL LIMIT $7) AS queued) < $7
         ${returningEvent(`'task.spawned'`)}`,
      }),
      [
        t.id ?? randomUUID(),
        t.owner,
        t.projectId,
        t.type,
        JSON.stringify(t.params),
        t.requesterId,
        t.maxQueuedPerOwner,
        phase,
        t.key?.keyId ?? null,
        ...params,
      ],
    );
    const row = this.#admitted(rows[0], t.key);
    if (!row)
      throw new TooManyRequestsError(
        `too many queued tasks: an owner may have at most ${t.maxQueuedPerOwner} tasks waiting or running`,
        { retryAfterMs: QUEUED_RETRY_AFTER_MS },
      );
    await notifyTasks(q, phase === 'waiting' ? [CHANNEL_WORK, TASK_EVENTS_CHANNEL] : [TASK_EVENTS_CHANNEL], [row.id]);
    return row;
  }

  /** The key's admission of a task of `type` (SQL), or NULL where there is nothing to check. */
  #admit(bind: Bind, key: TaskKey | undefined, type: string): string {
    return (key && this.#admission?.sql(bind, { key, type })) ?? 'NULL::text';
  }

  /**
   * The task a withAdmission statement wrote; the key's refusal thrown, its reason answered by the
   * same statement; undefined when it wrote none for another reason (the owner's queued tasks).
   */
  #admitted(row: AdmittedRow | undefined, key: TaskKey | undefined): TaskRow | undefined {
    if (key) this.#admission?.ran(key);
    if (!row) return undefined;
    const { refusal, admitted_ms: nowMs, id, ...task } = row;
    if (refusal !== null && key && this.#admission) throw this.#admission.refusal({ key, reason: refusal, nowMs });
    return id === null ? undefined : { ...task, id };
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

  /**
   * The owner's task; another owner's id is "not found", as if it did not exist, and so is a
   * piece of a split task (issue #30): pieces are the queue's, not the owner's.
   */
  async get(owner: string, id: string): Promise<TaskRow> {
    if (!isUuid(id)) throw new NotFoundError();
    const rows = await this.#db.query<TaskRow>(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1 AND owner = $2 AND parent_id IS NULL`,
      [id, owner],
    );
    const row = rows[0];
    if (!row) throw new NotFoundError();
    return row;
  }

  /** Newest first; `next` is the cursor of the following page, when there is one. */
  async list(owner: string, opts: ListOptions): Promise<{ tasks: TaskRow[]; next: string | null }> {
    if (opts.cursor !== undefined && !isUuid(opts.cursor)) return { tasks: [], next: null };
    // The cursor is the last id of the previous page; (created_at, id) orders ties exactly.
    const rows = await this.#db.query<TaskRow>(
      `SELECT ${TASK_COLUMNS} FROM tasks t WHERE owner = $1 AND parent_id IS NULL
         AND ${olderThanCursor({ table: 'tasks', cursor: '$2', scope: 'owner = $1' })} ${NEWEST_FIRST} LIMIT $3`,
      [owner, opts.cursor ?? null, opts.limit + 1],
    );
    const more = rows.length > opts.limit;
    const tasks = more ? rows.slice(0, opts.limit) : rows;
    return { tasks, next: more ? (tasks.at(-1)?.id ?? null) : null };
  }

  /**
   * A waiting or running task becomes `cancelled`; a running one is stopped by its worker. So
   * is every piece of a split task (issue #30), in the same transaction, the parent first
   * (pieces.ts: the lock order).
   */
  async cancel(owner: string, id: string): Promise<TaskRow> {
    const row = await this.#db.tx(async (q) => {
      // Livepeer has no cancel event: a cancel is an update whose phase is `cancelled`.
      const [row] = await q.query<TaskRow>(
        withEvent(`UPDATE tasks SET phase = 'cancelled', updated_at = now(), lease_owner = NULL, lease_until = NULL
         WHERE id = $1 AND owner = $2 AND phase = ANY($3) AND parent_id IS NULL ${returningEvent(`'task.updated'`)}`),
        [id, owner, CANCELLABLE],
      );
      if (!row) return undefined;
      const pieces = await this.#pieces.cancelPieces(q, row.id);
      await notifyTasks(q, [CHANNEL_CANCEL, TASK_EVENTS_CHANNEL], [row.id]);
      await notifyTasks(q, [CHANNEL_CANCEL], pieces);
      return row;
    });
    return row ?? this.#refuse(owner, id, 'cancelled', CANCELLABLE);
  }

  /**
   * A failed or cancelled task goes back to `waiting`, with its automatic retries (failures and
   * crashes) renewed. A split task's pieces are deleted with it: its run splits it again. `key`:
   * the key that asks, whose limits admit the task as they would a new one (it then counts among
   * that key's tasks: another key of the owner cannot requeue work past its own limits).
   */
  async retry(owner: string, id: string, key?: TaskKey): Promise<TaskRow> {
    const row = await this.#db.tx(async (q) => {
      const { bind, params } = sqlParams(4);
      const rows = await q.query<AdmittedRow>(
        withAdmission({
          source: 'SELECT type FROM tasks WHERE id = $1 AND owner = $2 AND phase = ANY($3) AND parent_id IS NULL',
          admit: this.#admit(bind, key, 'source.type'),
          change: `UPDATE tasks SET phase = 'waiting', updated_at = now(), scheduled_at = now(), run_at = now(),
             error_message = NULL, progress = NULL, output = NULL, retries = 0, crashes = 0, split_progress = NULL, playable_at = NULL,
             key_id = COALESCE($4::uuid, key_id)
           FROM admitted
           WHERE id = $1 AND owner = $2 AND phase = ANY($3) AND parent_id IS NULL AND admitted.refusal IS NULL
           ${returningEvent(`'task.updated'`)}`,
        }),
        [id, owner, RETRYABLE, key?.keyId ?? null, ...params],
      );
      const row = this.#admitted(rows[0], key);
      if (!row) return undefined;
      await this.#pieces.deletePieces(q, row.id);
      await notifyTasks(q, [CHANNEL_WORK, TASK_EVENTS_CHANNEL], [row.id]);
      return row;
    });
    return row ?? this.#refuse(owner, id, 'retried', RETRYABLE);
  }

  /**
   * The pieces of a split task (issue #30), in queue order; empty for a task that did not
   * split. `id` is a task the caller has read as its owner's (get).
   */
  async pieces(id: string): Promise<PieceState[]> {
    return this.#pieces.states(id);
  }

  /**
   * The owner's task's stored events, oldest first (the newest `limit`): what its webhooks
   * got, kept after the task ended. Another owner's id, or a piece's, is "not found".
   */
  async events(owner: string, id: string, limit: number): Promise<TaskEventRow[]> {
    await this.get(owner, id);
    return storedEvents(this.#db, { owner, taskId: id, limit });
  }

  /** Split tasks that ended failed or cancelled, whose pieces' files may be left (PieceSql.endedSplits). */
  endedSplits(o: { olderThanMs: number; limit: number }): Promise<string[]> {
    return this.#pieces.endedSplits(o);
  }

  /** Their pieces' files are gone. */
  forgetSplits(ids: readonly string[]): Promise<void> {
    return this.#pieces.forgetSplits(ids);
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

  /** Tasks by phase, for metrics: the owners' tasks, not the pieces of split ones. */
  async countByPhase(): Promise<Record<string, number>> {
    const rows = await this.#db.query<{ phase: string; n: number }>(
      'SELECT phase, count(*)::int AS n FROM tasks WHERE parent_id IS NULL GROUP BY phase',
    );
    return Object.fromEntries(rows.map((r) => [r.phase, r.n]));
  }
}
