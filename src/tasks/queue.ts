import { settings } from '../config/index.ts';
import {
  CHANNEL_PROGRESS,
  CHANNEL_WORK,
  FAILED_OR_UPDATED,
  notifyTasks,
  returningEvent,
  TASK_EVENTS_CHANNEL,
  withEvent,
} from './events.ts';
import type { Db, Queryable } from '../db/index.ts';
import { PARAMS_WITHOUT_SECRETS, type TaskRow } from './model.ts';
import { PieceSql } from './pieces.ts';
import type { PieceSpec, PieceState } from './types.ts';

// All SQL a worker needs, in one place (after pg-boss's plans.ts). A claim is a lease: the
// row stays with its worker until `lease_until`, which heartbeats push forward. A worker that
// dies stops heartbeating; once the lease runs out the task is taken back (reap) and counts
// as one crash, apart from job failures (issue #20). Every write checks `lease_owner`, so a
// worker that lost its lease cannot overwrite what the next one does. Every change a client
// can see writes its event in the same statement (events.ts withEvent): the outbox of issue #18.
//
// Queue order is `run_at, created_at`. A task taken back from a dead worker or handed back at
// shutdown keeps its `run_at`, so it runs before the tasks queued after it (issue #20); only a
// failure moves it, to when its retry is due.

export interface QueueOptions {
  leaseMs: number;
  /** Retries after job failures (MEDIAPLANE_MAX_RETRIES). */
  maxRetries: number;
  /** How often a task is taken back after a lease expiry (MEDIAPLANE_MAX_CRASH_RETRIES; default: its default). */
  maxCrashRetries?: number;
  /** Progress becomes a `task.updated` event at most this often per task (default 3000 ms). */
  progressEventMs?: number;
}

const DEFAULT_PROGRESS_EVENT_MS = 3000;

/** Which task a write is for: a piece's (issue #30) also settles its parent (pieces.ts). */
export interface PieceOf {
  parentId?: string | null | undefined;
}

/** A run of a task: the task's id and its attempt number, as scratch directories are named. */
export type RunKey = `${string}-${number}`;
export const runKey = (id: string, attempt: number): RunKey => `${id}-${attempt}`;

export class Queue {
  readonly #db: Db;
  readonly #opts: QueueOptions;
  readonly #pieces: PieceSql;

  constructor(db: Db, opts: QueueOptions) {
    this.#db = db;
    this.#opts = opts;
    this.#pieces = new PieceSql(db, { progressEventMs: opts.progressEventMs ?? DEFAULT_PROGRESS_EVENT_MS });
  }

  /** How long a claim or a heartbeat holds a task. */
  get leaseMs(): number {
    return this.#opts.leaseMs;
  }

  /**
   * Gives tasks whose lease ran out back to `waiting` in their old place in the queue (or
   * `failed` past the crash limit). Returns how many were taken back. Then settles the parents
   * that a piece's end left unsettled (pieces.ts settleStuck: a piece failed here for good).
   */
  async reapExpired(): Promise<number> {
    const rows = await this.#db.query<{ id: string }>(
      withEvent(
        `UPDATE tasks SET
         phase = CASE WHEN crashes >= $1 THEN 'failed' ELSE 'waiting' END,
         error_message = CASE WHEN crashes >= $1
           THEN 'the worker running this task stopped responding ' || (crashes + 1) || ' times; it is not retried again'
           ELSE error_message END,
         retries = CASE WHEN crashes >= $1 THEN retries ELSE retries + 1 END,
         crashes = CASE WHEN crashes >= $1 THEN crashes ELSE crashes + 1 END,
         lease_owner = NULL, lease_until = NULL, updated_at = now()
       WHERE id IN (SELECT id FROM tasks WHERE phase = 'running' AND lease_until < now() FOR UPDATE SKIP LOCKED)
       ${returningEvent(FAILED_OR_UPDATED)}`,
        'id',
      ),
      [this.#opts.maxCrashRetries ?? settings.maxCrashRetries.default],
    );
    await this.#notify(rows, [CHANNEL_WORK]);
    await this.#pieces.settleStuck();
    return rows.length;
  }

  /**
   * Which of these runs a live lease still holds (the task is running that attempt and its
   * lease has not run out): the scratch directories of all others may go (worker.ts).
   */
  async liveRuns(runs: readonly { id: string; attempt: number }[]): Promise<Set<RunKey>> {
    if (runs.length === 0) return new Set();
    const rows = await this.#db.query<{ id: string; attempts: number }>(
      `SELECT id::text AS id, attempts FROM tasks
       WHERE id = ANY($1::uuid[]) AND phase = 'running' AND lease_until >= now()`,
      [[...new Set(runs.map((r) => r.id))]],
    );
    return new Set(rows.map((r) => runKey(r.id, r.attempts)));
  }

  /** Claims up to `limit` waiting tasks for `workerId`; two workers never get the same one. */
  async claim(workerId: string, limit: number): Promise<TaskRow[]> {
    // A new run: its first progress write is an event whatever the last run's was.
    const rows = await this.#db.query<TaskRow>(
      withEvent(`UPDATE tasks SET phase = 'running', lease_owner = $1, last_worker = $1, lease_until = now() + $2 * interval '1 millisecond',
         attempts = attempts + 1, progress = 0, updated_at = now(), last_progress_event_at = NULL
       WHERE id IN (SELECT id FROM tasks WHERE phase = 'waiting' AND run_at <= now()
                    ORDER BY run_at, created_at LIMIT $3 FOR UPDATE SKIP LOCKED)
       ${returningEvent(`'task.updated'`)}`),
      [workerId, this.#opts.leaseMs, limit],
    );
    await this.#notify(rows);
    return rows;
  }

  /** Renews the lease; false when the task is no longer this worker's (cancelled, reaped). */
  async heartbeat(id: string, workerId: string): Promise<boolean> {
    const rows = await this.#db.query(
      `UPDATE tasks SET lease_until = now() + $3 * interval '1 millisecond'
       WHERE id = $1 AND lease_owner = $2 AND phase = 'running' RETURNING id`,
      [id, workerId, this.#opts.leaseMs],
    );
    return rows.length > 0;
  }

  /**
   * Records progress. It is a `task.updated` event when none was written for this run yet or
   * the last is `progressEventMs` old; the throttle lives in the row (last_progress_event_at,
   * set only with an event), so it holds across processes. `last_progress_event_at = now()`
   * after the SET means "set by this statement": now() is the transaction's start, and the
   * previous event was written by an earlier transaction. A piece's write (never an event:
   * events.ts returningEvent) moves its parent's progress.
   */
  async progress(id: string, workerId: string, fraction: number): Promise<void> {
    const rows = await this.#db.query<{ id: string; event: string | null; parent_id: string | null }>(
      withEvent(
        `UPDATE tasks SET progress = $3, updated_at = now(),
           last_progress_event_at = CASE
             WHEN last_progress_event_at IS NULL OR last_progress_event_at <= now() - $4 * interval '1 millisecond'
             THEN now() ELSE last_progress_event_at END
         WHERE id = $1 AND lease_owner = $2 AND phase = 'running'
         ${returningEvent(`CASE WHEN last_progress_event_at = now() THEN 'task.updated' END`)}`,
        'id, event, parent_id',
      ),
      [id, workerId, Math.min(1, Math.max(0, fraction)), this.#opts.progressEventMs ?? DEFAULT_PROGRESS_EVENT_MS],
    );
    const row = rows[0];
    if (row?.parent_id) return this.#pieces.refreshProgress(row.parent_id);
    // A throttled write is no event, but progress streams show it at once.
    if (row) await notifyTasks(this.#db, [row.event === null ? CHANNEL_PROGRESS : TASK_EVENTS_CHANNEL], [row.id]);
  }

  /**
   * Records the output. A completed task can no longer run again, so its secrets (the
   * credentials, a signed input URL's query: model.ts PARAMS_WITHOUT_SECRETS) are deleted
   * from the row: they live in the database only while a task may still need them.
   */
  async complete(id: string, workerId: string, output: unknown, of: PieceOf = {}): Promise<boolean> {
    const { parentId } = of;
    if (parentId) return this.#pieces.inParent(parentId, (q) => this.#complete(q, { id, workerId, output }));
    return this.#complete(this.#db, { id, workerId, output });
  }

  async #complete(q: Queryable, o: { id: string; workerId: string; output: unknown }): Promise<boolean> {
    const rows = await q.query<{ id: string }>(
      withEvent(
        `UPDATE tasks SET phase = 'completed', output = $3, progress = 1, error_message = NULL,
           params = ${PARAMS_WITHOUT_SECRETS},
           lease_owner = NULL, lease_until = NULL, updated_at = now()
         WHERE id = $1 AND lease_owner = $2 AND phase = 'running' ${returningEvent(`'task.completed'`)}`,
        'id',
      ),
      [o.id, o.workerId, JSON.stringify(o.output ?? {})],
    );
    await this.#notify(rows, [], q);
    return rows.length > 0;
  }

  /**
   * Records a failure. A retryable one with failure retries left (`retries - crashes` under
   * MEDIAPLANE_MAX_RETRIES) goes back to `waiting`, due in `backoffMs` (retry-policy.ts);
   * anything else is final. Returns the phase the task ended in.
   */
  async fail(
    id: string,
    workerId: string,
    f: { message: string; retryable: boolean; backoffMs: number } & PieceOf,
  ): Promise<'waiting' | 'failed' | null> {
    const { parentId } = f;
    if (parentId) return this.#pieces.inParent(parentId, (q) => this.#fail(q, { id, workerId, ...f }));
    return this.#fail(this.#db, { id, workerId, ...f });
  }

  async #fail(
    q: Queryable,
    f: { id: string; workerId: string; message: string; retryable: boolean; backoffMs: number },
  ): Promise<'waiting' | 'failed' | null> {
    const again = '$4 AND retries - crashes < $5';
    const rows = await q.query<{ id: string; phase: 'waiting' | 'failed' }>(
      withEvent(
        `UPDATE tasks SET
           phase = CASE WHEN ${again} THEN 'waiting' ELSE 'failed' END,
           run_at = CASE WHEN ${again} THEN now() + $6 * interval '1 millisecond' ELSE run_at END,
           retries = CASE WHEN ${again} THEN retries + 1 ELSE retries END,
           error_message = $3, lease_owner = NULL, lease_until = NULL, updated_at = now()
         WHERE id = $1 AND lease_owner = $2 AND phase = 'running' ${returningEvent(FAILED_OR_UPDATED)}`,
        'id, phase',
      ),
      [f.id, f.workerId, f.message, f.retryable, this.#opts.maxRetries, f.backoffMs],
    );
    await this.#notify(rows, [], q);
    return rows[0]?.phase ?? null;
  }

  /**
   * Issue #30: splits a task this worker holds into pieces and releases its lease (pieces.ts):
   * false when the lease is no longer this worker's (cancelled, taken back). `progress`: the
   * task's progress so far, the base of its progress from its pieces.
   */
  async split(id: string, workerId: string, o: { pieces: readonly PieceSpec[]; progress: number }): Promise<boolean> {
    const ok = await this.#pieces.split(id, workerId, o);
    if (ok) await notifyTasks(this.#db, [CHANNEL_WORK], [id]);
    return ok;
  }

  /** Issue #30: every piece of a split task, in queue order (JobContext.siblings). */
  pieces(parentId: string): Promise<PieceState[]> {
    return this.#pieces.states(parentId);
  }

  /** A split task's early outputs play (JobContext.playable): its mark, set once (pieces.ts). */
  markPlayable(parentId: string): Promise<void> {
    return this.#pieces.markPlayable(parentId);
  }

  /** Hands a task back untouched (shutdown): another worker takes it at once, in its old place. */
  async release(id: string, workerId: string): Promise<void> {
    const rows = await this.#db.query<{ id: string }>(
      withEvent(
        `UPDATE tasks SET phase = 'waiting', progress = NULL, lease_owner = NULL, lease_until = NULL, updated_at = now()
         WHERE id = $1 AND lease_owner = $2 AND phase = 'running' ${returningEvent(`'task.updated'`)}`,
        'id',
      ),
      [id, workerId],
    );
    await this.#notify(rows, [CHANNEL_WORK]);
  }

  /**
   * Wakes the listeners of task events (SSE streams, webhook dispatchers) for these tasks;
   * `more` channels too (CHANNEL_WORK where a task became claimable at once).
   */
  async #notify(rows: readonly { id: string }[], more: readonly string[] = [], q: Queryable = this.#db): Promise<void> {
    await notifyTasks(
      q,
      [TASK_EVENTS_CHANNEL, ...more],
      rows.map((r) => r.id),
    );
  }

  /**
   * Deletes up to `limit` task events older than `olderThanMs` that are done (retention,
   * issue #25); how many it deleted. The outbox's consumer decides when an event is done:
   * the webhook dispatcher has fanned it out (dispatched_at) and none of its deliveries is
   * left (webhook_deliveries references it; the webhooks' purge removes them once made or
   * given up and their logs are gone). SKIP LOCKED: an event being fanned out is left alone,
   * and two sweeping processes take different rows.
   */
  async purgeEvents(o: { olderThanMs: number; limit: number }): Promise<number> {
    const rows = await this.#db.query<{ n: number }>(
      `WITH gone AS (
         DELETE FROM task_events WHERE id IN (
           SELECT e.id FROM task_events e
           WHERE e.dispatched_at IS NOT NULL AND e.created_at < now() - $1 * interval '1 millisecond'
             AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
           LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING 1)
       SELECT count(*)::int AS n FROM gone`,
      [o.olderThanMs, o.limit],
    );
    return rows[0]?.n ?? 0;
  }

  /** Tasks waiting to run, for metrics. */
  async depth(): Promise<number> {
    const rows = await this.#db.query<{ n: number }>(`SELECT count(*)::int AS n FROM tasks WHERE phase = 'waiting'`);
    return rows[0]?.n ?? 0;
  }
}
