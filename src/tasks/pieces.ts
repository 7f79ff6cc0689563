import type { Db, Queryable } from '../db/index.ts';
import { ValidationError } from '../lib/errors.ts';
import {
  CHANNEL_CANCEL,
  CHANNEL_PROGRESS,
  CHANNEL_WORK,
  notifyTasks,
  returningEvent,
  TASK_EVENTS_CHANNEL,
  withEvent,
} from './events.ts';
import { PARAMS_WITHOUT_SECRETS } from './model.ts';
import type { PieceSpec, PieceState } from './types.ts';

// The SQL of pieces (issue #30), beside queue.ts's: a task split by its handler (ctx.split)
// into child rows of `tasks` (migration 013), each a normal leased job. The parent keeps phase
// `running` without a lease (it holds no slot and is never reaped) and follows its pieces:
//
// - the `last` piece waits as `pending` until every other piece has completed, then becomes
//   `waiting` in the parent's place in the queue;
// - the last piece completed: the parent completes with its output (`task.completed`);
// - a piece failed for good: the parent fails with "piece <label> failed: <message>"
//   (`task.failed`) and every other piece is cancelled;
// - the parent's progress is its progress at the split plus the rest times the weighted sum
//   of its pieces' (a throttled `task.updated`, as queue.ts writes a task's own).
//
// Settling a parent reads all its pieces, so it runs in a transaction that first locks the
// parent row (inParent): two pieces that end at once take turns, and the second sees the
// first's change (READ COMMITTED: each statement reads what committed before it). Every path
// that holds a parent and its pieces locks the parent first (cancel, retry, settle), so they
// never wait on each other in a circle. A process that dies between a piece's change and its
// parent's settling leaves a parent that settleStuck() finds on the next reaper pass.

/** A parent split and not finished: running, no lease, not a piece itself (`p.`: of the row named p). */
const openParent = (p = '') => `${p}phase = 'running' AND ${p}lease_owner IS NULL AND ${p}parent_id IS NULL`;
const OPEN_PARENT = openParent();

/** Columns of PieceState, in the order of the pieces' queue places. */
const PIECE_STATE = `SELECT id::text AS id, type, piece_label AS label, phase, progress, output,
  last_worker AS worker, attempts AS runs, error_message AS error
  FROM tasks WHERE parent_id = $1 ORDER BY created_at`;

/** The weighted share of a parent's pieces done, 0..1; a completed piece counts whole. */
const PIECES_DONE = `(SELECT COALESCE(sum(c.piece_weight * CASE WHEN c.phase = 'completed' THEN 1
    ELSE COALESCE(c.progress, 0) END) / NULLIF(sum(c.piece_weight), 0), 0)
  FROM tasks c WHERE c.parent_id = tasks.id)`;

/** Throws ValidationError unless `pieces` is a split the queue can run. */
export function checkPieces(pieces: readonly PieceSpec[]): void {
  if (pieces.length === 0) throw new ValidationError('a task splits into one piece at least');
  const last = pieces.filter((p) => p.last === true).length;
  // The last piece's output becomes the parent's: without one the parent would have none.
  if (last !== 1)
    throw new ValidationError(`a split needs exactly one last piece (its output is the task's); got ${last}`);
  for (const p of pieces) {
    if (p.label.trim() === '') throw new ValidationError('every piece needs a label');
    if (!Number.isFinite(p.weight) || p.weight < 0)
      throw new ValidationError(`piece ${p.label}: weight must be a finite number >= 0`);
    const hidden = secretTooDeep(p.params);
    if (hidden)
      throw new ValidationError(
        `piece ${p.label}: a secret at params.${hidden} would outlive the piece; keep credentials and signed URLs one level down (params.<member>.credentials, params.<member>.url)`,
      );
  }
}

/**
 * Where `params` holds a secret that PARAMS_WITHOUT_SECRETS (model.ts) would not remove when
 * the piece ends: `credentials`, or a `url` with a query or fragment, anywhere but one level
 * down. A piece's params are stored like a task's, so they follow the same rule.
 */
function secretTooDeep(value: unknown, path = '', depth = 0): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  for (const [key, v] of Object.entries(value)) {
    const at = path === '' ? key : `${path}.${key}`;
    const secret = key === 'credentials' || (key === 'url' && typeof v === 'string' && /[?#]/.test(v));
    // Only a member's own `credentials` and `url` are removed (depth 1), as a task's are.
    if (secret && depth !== 1) return at;
    const deeper = secretTooDeep(v, at, depth + 1);
    if (deeper) return deeper;
  }
  return undefined;
}

interface Summary {
  total: number;
  open: number;
  done_last: string | null;
  pending_last: string | null;
  failed: { label: string; error: string | null } | null;
}

export class PieceSql {
  readonly #db: Db;
  readonly #progressEventMs: number;

  constructor(db: Db, o: { progressEventMs: number }) {
    this.#db = db;
    this.#progressEventMs = o.progressEventMs;
  }

  /**
   * Inserts the pieces and releases the parent's lease, in one statement fenced by that lease
   * (so a parent cancelled or taken back splits into nothing). Pieces take the parent's
   * `run_at` and its `created_at` plus their index in microseconds: they run in split order,
   * before the tasks queued after the parent. `progress` is the parent's at the split.
   */
  async split(id: string, workerId: string, o: { pieces: readonly PieceSpec[]; progress: number }): Promise<boolean> {
    checkPieces(o.pieces);
    const specs = o.pieces.map((p, i) => ({
      type: p.type,
      params: p.params,
      label: p.label,
      weight: p.weight,
      is_last: p.last === true,
      i,
    }));
    const alone = specs.length === 1;
    const rows = await this.#db.query<{ id: string; phase: string }>(
      `WITH parent AS (
         UPDATE tasks SET lease_owner = NULL, lease_until = NULL, split_progress = $3, progress = $3, updated_at = now()
         WHERE id = $1 AND lease_owner = $2 AND phase = 'running' AND parent_id IS NULL
           AND NOT EXISTS (SELECT 1 FROM tasks c WHERE c.parent_id = $1)
         RETURNING id, owner, project_id, requester_id, run_at, created_at)
       INSERT INTO tasks (id, owner, project_id, type, phase, params, requester_id, created_at, scheduled_at, run_at,
         parent_id, piece_label, piece_weight, piece_last)
       SELECT gen_random_uuid(), p.owner, p.project_id, s.type, CASE WHEN s.is_last AND NOT $5 THEN 'pending' ELSE 'waiting' END,
         s.params, p.requester_id, p.created_at + s.i * interval '1 microsecond',
         CASE WHEN s.is_last AND NOT $5 THEN NULL ELSE now() END, p.run_at, p.id, s.label, s.weight, s.is_last
       FROM parent p CROSS JOIN jsonb_to_recordset($4::jsonb)
         AS s(type text, params jsonb, label text, weight double precision, is_last boolean, i integer)
       RETURNING id::text AS id, phase`,
      [id, workerId, Math.min(1, Math.max(0, o.progress)), JSON.stringify(specs), alone],
    );
    return rows.length > 0;
  }

  /**
   * Split tasks that ended failed or cancelled at least `olderThanMs` ago and whose pieces'
   * files may still be kept (the stitch removes them only on success); `forgetSplits` says
   * they are gone. Oldest first.
   */
  async endedSplits(o: { olderThanMs: number; limit: number }): Promise<string[]> {
    const rows = await this.#db.query<{ id: string }>(
      `SELECT id::text AS id FROM tasks
       WHERE parent_id IS NULL AND split_progress IS NOT NULL AND phase IN ('failed', 'cancelled')
         AND updated_at < now() - $1 * interval '1 millisecond'
       ORDER BY updated_at LIMIT $2`,
      [o.olderThanMs, o.limit],
    );
    return rows.map((r) => r.id);
  }

  /** The pieces' files of these ended splits are gone (endedSplits no longer lists them). */
  async forgetSplits(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.#db.query(
      `UPDATE tasks SET split_progress = NULL WHERE id = ANY($1::uuid[]) AND phase IN ('failed', 'cancelled')`,
      [ids],
    );
  }

  /** Every piece of `parentId`, in queue order (a piece's view of its siblings). */
  async states(parentId: string, q: Queryable = this.#db): Promise<PieceState[]> {
    return q.query<PieceState>(PIECE_STATE, [parentId]);
  }

  /**
   * Runs `change` (a piece's own write) and settles its parent, in one transaction that locks
   * the parent first; resolves to what `change` did.
   */
  async inParent<T>(parentId: string, change: (q: Queryable) => Promise<T>): Promise<T> {
    return this.#db.tx(async (q) => {
      await q.query('SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE', [parentId]);
      const done = await change(q);
      await this.#settle(q, parentId);
      return done;
    });
  }

  /**
   * Settles the parents a piece's change left behind without settling (its process died in
   * between, a lease expiry failed a piece in the reaper's bulk statement). Idempotent; the
   * worker's reaper pass calls it. Returns how many it settled.
   */
  async settleStuck(): Promise<number> {
    const rows = await this.#db.query<{ id: string }>(
      `SELECT p.id::text AS id FROM tasks p WHERE ${openParent('p.')} AND p.lease_until IS NULL
         AND EXISTS (SELECT 1 FROM tasks c WHERE c.parent_id = p.id AND (c.phase = 'failed'
           OR (c.piece_last AND c.phase = 'completed')
           OR (c.piece_last AND c.phase = 'pending' AND NOT EXISTS (
             SELECT 1 FROM tasks o WHERE o.parent_id = p.id AND NOT o.piece_last AND o.phase <> 'completed'))))`,
    );
    for (const r of rows) await this.inParent(r.id, async () => {});
    return rows.length;
  }

  /** Recomputes a parent's progress from its pieces (after a piece's progress write). */
  async refreshProgress(parentId: string, q: Queryable = this.#db): Promise<void> {
    const rows = await q.query<{ id: string; event: string | null }>(
      withEvent(
        `UPDATE tasks SET progress = GREATEST(COALESCE(progress, 0),
             COALESCE(split_progress, 0) + (1 - COALESCE(split_progress, 0)) * ${PIECES_DONE}),
           updated_at = now(),
           last_progress_event_at = CASE
             WHEN last_progress_event_at IS NULL OR last_progress_event_at <= now() - $2 * interval '1 millisecond'
             THEN now() ELSE last_progress_event_at END
         WHERE id = $1 AND ${OPEN_PARENT}
         ${returningEvent(`CASE WHEN last_progress_event_at = now() THEN 'task.updated' END`)}`,
        'id, event',
      ),
      [parentId, this.#progressEventMs],
    );
    const row = rows[0];
    if (row) await notifyTasks(q, [row.event === null ? CHANNEL_PROGRESS : TASK_EVENTS_CHANNEL], [row.id]);
  }

  /**
   * Marks an open parent playable: its early outputs hold every rendition and the audio. Once:
   * a later call, or one for a parent that ended meanwhile, changes nothing. The mark is a
   * `task.updated` (and, for an asset's task, an `asset.updated`: migration 506's trigger).
   */
  async markPlayable(parentId: string): Promise<void> {
    const rows = await this.#db.query<{ id: string }>(
      withEvent(
        `UPDATE tasks SET playable_at = now(), updated_at = now()
         WHERE id = $1 AND playable_at IS NULL AND ${OPEN_PARENT} ${returningEvent(`'task.updated'`)}`,
        'id',
      ),
      [parentId],
    );
    await notifyTasks(
      this.#db,
      [TASK_EVENTS_CHANNEL],
      rows.map((r) => r.id),
    );
  }

  /** Cancels the pieces of a parent that may still run; their ids (for the cancel NOTIFY). */
  async cancelPieces(q: Queryable, parentId: string): Promise<string[]> {
    const rows = await q.query<{ id: string }>(
      `UPDATE tasks SET phase = 'cancelled', lease_owner = NULL, lease_until = NULL, updated_at = now()
       WHERE parent_id = $1 AND phase IN ('pending', 'waiting', 'running') RETURNING id::text AS id`,
      [parentId],
    );
    return rows.map((r) => r.id);
  }

  /** Deletes a parent's pieces (it is retried: the split runs again). */
  async deletePieces(q: Queryable, parentId: string): Promise<void> {
    await q.query('DELETE FROM tasks WHERE parent_id = $1', [parentId]);
  }

  /** With the parent locked: fails, completes or moves it on as its pieces stand. */
  async #settle(q: Queryable, parentId: string): Promise<void> {
    const [s] = await q.query<Summary>(
      `SELECT count(*)::int AS total,
         (count(*) FILTER (WHERE NOT c.piece_last AND c.phase <> 'completed'))::int AS open,
         (array_agg(c.id::text) FILTER (WHERE c.piece_last AND c.phase = 'completed'))[1] AS done_last,
         (array_agg(c.id::text) FILTER (WHERE c.piece_last AND c.phase = 'pending'))[1] AS pending_last,
         (array_agg(jsonb_build_object('label', c.piece_label, 'error', c.error_message) ORDER BY c.updated_at)
           FILTER (WHERE c.phase = 'failed'))[1] AS failed
       FROM tasks c JOIN tasks p ON p.id = c.parent_id
       WHERE c.parent_id = $1 AND ${openParent('p.')}`,
      [parentId],
    );
    if (!s || s.total === 0) return;
    if (s.failed)
      return this.#failParent(q, parentId, `piece ${s.failed.label} failed: ${s.failed.error ?? 'no reason given'}`);
    if (s.done_last) return this.#completeParent(q, parentId, s.done_last);
    if (s.open === 0 && s.pending_last) {
      // The stitch keeps the run_at the split gave it: it runs before the tasks queued since.
      await q.query(
        `UPDATE tasks SET phase = 'waiting', scheduled_at = now(), updated_at = now() WHERE id = $1 AND phase = 'pending'`,
        [s.pending_last],
      );
      await notifyTasks(q, [CHANNEL_WORK], [s.pending_last]);
    }
    await this.refreshProgress(parentId, q);
  }

  async #completeParent(q: Queryable, parentId: string, lastId: string): Promise<void> {
    const rows = await q.query<{ id: string }>(
      withEvent(
        `UPDATE tasks SET phase = 'completed', output = (SELECT c.output FROM tasks c WHERE c.id = $2), progress = 1,
           error_message = NULL, params = ${PARAMS_WITHOUT_SECRETS}, updated_at = now()
         WHERE id = $1 AND ${OPEN_PARENT} ${returningEvent(`'task.completed'`)}`,
        'id',
      ),
      [parentId, lastId],
    );
    await notifyTasks(
      q,
      [TASK_EVENTS_CHANNEL],
      rows.map((r) => r.id),
    );
  }

  async #failParent(q: Queryable, parentId: string, message: string): Promise<void> {
    const rows = await q.query<{ id: string }>(
      withEvent(
        `UPDATE tasks SET phase = 'failed', error_message = $2, updated_at = now()
         WHERE id = $1 AND ${OPEN_PARENT} ${returningEvent(`'task.failed'`)}`,
        'id',
      ),
      [parentId, message],
    );
    if (rows.length === 0) return;
    const cancelled = await this.cancelPieces(q, parentId);
    await notifyTasks(q, [TASK_EVENTS_CHANNEL], [parentId]);
    await notifyTasks(q, [CHANNEL_CANCEL], cancelled);
  }
}
