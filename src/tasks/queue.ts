import type { Db } from '../db/index.ts';
import { PARAMS_WITHOUT_SECRETS, TASK_COLUMNS, type TaskRow } from './model.ts';

// All SQL a worker needs, in one place (after pg-boss's plans.ts). A claim is a lease: the
// row stays with its worker until `lease_until`, which heartbeats push forward. A worker that
// dies stops heartbeating; once the lease runs out the task is taken back (reap) and counts
// as one retry. Every write checks `lease_owner`, so a worker that lost its lease cannot
// overwrite what the next one does.

export interface QueueOptions {
  leaseMs: number;
  maxRetries: number;
}

export class Queue {
  readonly #db: Db;
  readonly #opts: QueueOptions;

  constructor(db: Db, opts: QueueOptions) {
    this.#db = db;
    this.#opts = opts;
  }

  /**
   * Gives tasks whose lease ran out back to `waiting` (or `failed` past the retry limit).
   * Returns how many were taken back.
   */
  async reapExpired(): Promise<number> {
    const rows = await this.#db.query(
      `UPDATE tasks SET
         phase = CASE WHEN retries >= $1 THEN 'failed' ELSE 'waiting' END,
         error_message = CASE WHEN retries >= $1
           THEN 'the worker running this task stopped responding, and the retry limit was reached'
           ELSE error_message END,
         retries = CASE WHEN retries >= $1 THEN retries ELSE retries + 1 END,
         run_at = now(), lease_owner = NULL, lease_until = NULL, updated_at = now()
       WHERE id IN (SELECT id FROM tasks WHERE phase = 'running' AND lease_until < now() FOR UPDATE SKIP LOCKED)
       RETURNING id`,
      [this.#opts.maxRetries],
    );
    return rows.length;
  }

  /** Claims up to `limit` waiting tasks for `workerId`; two workers never get the same one. */
  async claim(workerId: string, limit: number): Promise<TaskRow[]> {
    return this.#db.query<TaskRow>(
      `UPDATE tasks SET phase = 'running', lease_owner = $1, lease_until = now() + $2 * interval '1 millisecond',
         attempts = attempts + 1, progress = 0, updated_at = now()
       WHERE id IN (SELECT id FROM tasks WHERE phase = 'waiting' AND run_at <= now()
                    ORDER BY run_at, created_at LIMIT $3 FOR UPDATE SKIP LOCKED)
       RETURNING ${TASK_COLUMNS}`,
      [workerId, this.#opts.leaseMs, limit],
    );
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

  async progress(id: string, workerId: string, fraction: number): Promise<void> {
    await this.#db.query(
      `UPDATE tasks SET progress = $3, updated_at = now() WHERE id = $1 AND lease_owner = $2 AND phase = 'running'`,
      [id, workerId, Math.min(1, Math.max(0, fraction))],
    );
  }

  /**
   * Records the output. A completed task can no longer run again, so its secrets (the
   * credentials, a signed input URL's query: model.ts PARAMS_WITHOUT_SECRETS) are deleted
   * from the row: they live in the database only while a task may still need them.
   */
  async complete(id: string, workerId: string, output: unknown): Promise<boolean> {
    const rows = await this.#db.query(
      `UPDATE tasks SET phase = 'completed', output = $3, progress = 1, error_message = NULL,
         params = ${PARAMS_WITHOUT_SECRETS},
         lease_owner = NULL, lease_until = NULL, updated_at = now()
       WHERE id = $1 AND lease_owner = $2 AND phase = 'running' RETURNING id`,
      [id, workerId, JSON.stringify(output ?? {})],
    );
    return rows.length > 0;
  }

  /**
   * Records a failure. A retryable one under the retry limit goes back to `waiting` after
   * `backoffMs * 2^retries`; anything else is final. Returns the phase the task ended in.
   */
  async fail(
    id: string,
    workerId: string,
    f: { message: string; retryable: boolean; backoffMs: number },
  ): Promise<'waiting' | 'failed' | null> {
    const rows = await this.#db.query<{ phase: 'waiting' | 'failed' }>(
      `UPDATE tasks SET
         phase = CASE WHEN $4 AND retries < $5 THEN 'waiting' ELSE 'failed' END,
         run_at = CASE WHEN $4 AND retries < $5 THEN now() + ($6 * power(2, retries)) * interval '1 millisecond' ELSE run_at END,
         retries = CASE WHEN $4 AND retries < $5 THEN retries + 1 ELSE retries END,
         error_message = $3, lease_owner = NULL, lease_until = NULL, updated_at = now()
       WHERE id = $1 AND lease_owner = $2 AND phase = 'running' RETURNING phase`,
      [id, workerId, f.message, f.retryable, this.#opts.maxRetries, f.backoffMs],
    );
    return rows[0]?.phase ?? null;
  }

  /** Hands a task back untouched (graceful shutdown): another worker takes it at once. */
  async release(id: string, workerId: string): Promise<void> {
    await this.#db.query(
      `UPDATE tasks SET phase = 'waiting', run_at = now(), progress = NULL, lease_owner = NULL, lease_until = NULL, updated_at = now()
       WHERE id = $1 AND lease_owner = $2 AND phase = 'running'`,
      [id, workerId],
    );
  }

  /** Tasks waiting to run, for metrics. */
  async depth(): Promise<number> {
    const rows = await this.#db.query<{ n: number }>(`SELECT count(*)::int AS n FROM tasks WHERE phase = 'waiting'`);
    return rows[0]?.n ?? 0;
  }
}
