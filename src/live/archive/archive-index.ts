import type { Db } from '../../db/index.ts';

// All SQL of the live archive (migration 504): the index of the parts stored. A row is
// written once its object is whole in the store, so whatever the index names can be read.

/** One archived part, as the index keeps it. */
export interface ArchivedPart {
  run: number;
  msn: number;
  part: number;
  key: string;
  wallStartMs: number;
  durationMs: number;
  bytes: number;
  independent: boolean;
}

interface PartRow {
  run: string;
  msn: string;
  part: number;
  key: string;
  wall_start_ms: string;
  duration_ms: number;
  bytes: number;
  independent: boolean;
}

const PART_COLUMNS = 'run, msn, part, key, wall_start_ms, duration_ms, bytes, independent';

const partOf = (r: PartRow): ArchivedPart => ({
  run: Number(r.run),
  msn: Number(r.msn),
  part: r.part,
  key: r.key,
  wallStartMs: Number(r.wall_start_ms),
  durationMs: r.duration_ms,
  bytes: r.bytes,
  independent: r.independent,
});

/** A session whose archive the retention sweep may trim: parts up to `beforeMs` go (all when undefined). */
export interface TrimmableSession {
  sessionId: string;
  /** Parts that start before it may go; undefined: the whole archive. */
  beforeMs?: number | undefined;
}

export class ArchiveIndex {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  /** The part is in the store. Written twice (a retried write) is no error. */
  async add(sessionId: string, p: ArchivedPart): Promise<void> {
    await this.#db.query(
      `INSERT INTO live_archive_parts (session_id, ${PART_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT DO NOTHING`,
      [sessionId, p.run, p.msn, p.part, p.key, p.wallStartMs, p.durationMs, p.bytes, p.independent],
    );
  }

  /** The session's parts in playing order (runs, then segments, then parts), those starting at or before `toMs`. */
  async parts(sessionId: string, toMs?: number): Promise<ArchivedPart[]> {
    const rows = await this.#db.query<PartRow>(
      `SELECT ${PART_COLUMNS} FROM live_archive_parts WHERE session_id = $1 AND ($2::bigint IS NULL OR wall_start_ms <= $2)
       ORDER BY run, msn, part`,
      [sessionId, toMs === undefined ? null : Math.ceil(toMs)],
    );
    return rows.map(partOf);
  }

  /** The wall clock (ms) of the newest part's end; undefined when nothing is archived. */
  async until(sessionId: string): Promise<number | undefined> {
    const rows = await this.#db.query<{ until: number | null }>(
      `SELECT max(wall_start_ms + duration_ms)::double precision AS until FROM live_archive_parts WHERE session_id = $1`,
      [sessionId],
    );
    const until = rows[0]?.until;
    return until === null || until === undefined ? undefined : Math.round(until);
  }

  /**
   * Sessions whose archive may be trimmed now (migration 504's retention): a session that is
   * not recorded keeps its last `keepMs` (live clips); a recorded one keeps everything until
   * its recording (the asset with the session's id) is ready, failed or deleted, and then
   * `keepMs` more before it all goes. A session no longer known (deleted with its stream)
   * keeps `keepMs` from now.
   */
  async trimmable(o: { keepMs: number; limit: number }): Promise<TrimmableSession[]> {
    const rows = await this.#db.query<{ session_id: string; before_ms: string | null }>(
      `SELECT p.session_id::text AS session_id,
         CASE WHEN s.record AND a.phase IN ('ready', 'failed', 'deleted') AND a.updated_at < now() - $1 * interval '1 millisecond'
           THEN NULL ELSE (extract(epoch FROM now()) * 1000 - $1)::bigint END AS before_ms
       FROM (SELECT session_id, min(wall_start_ms) AS oldest FROM live_archive_parts GROUP BY session_id) p
       LEFT JOIN stream_sessions s ON s.id = p.session_id
       LEFT JOIN assets a ON a.id = p.session_id
       WHERE NOT (COALESCE(s.record, false) AND (a.phase IS NULL OR a.phase NOT IN ('ready', 'failed', 'deleted')))
         AND ((floor(p.oldest / 60000) + 1) * 60000 <= extract(epoch FROM now()) * 1000 - $1
           OR (s.record AND a.updated_at < now() - $1 * interval '1 millisecond'))
       ORDER BY p.oldest LIMIT $2`,
      [o.keepMs, o.limit],
    );
    return rows.map((r) => ({
      sessionId: r.session_id,
      beforeMs: r.before_ms === null ? undefined : Number(r.before_ms),
    }));
  }

  /** The wall-clock minutes of the session's parts that end before `beforeMs` (all when undefined): whole minutes only. */
  async minutesBefore(sessionId: string, beforeMs: number | undefined): Promise<number[]> {
    const rows = await this.#db.query<{ minute: string }>(
      `SELECT DISTINCT floor(wall_start_ms / 60000)::bigint AS minute FROM live_archive_parts
       WHERE session_id = $1 AND ($2::bigint IS NULL OR (floor(wall_start_ms / 60000) + 1) * 60000 <= $2) ORDER BY minute`,
      [sessionId, beforeMs ?? null],
    );
    return rows.map((r) => Number(r.minute));
  }

  /** Forgets the parts of one wall-clock minute (their objects are gone). */
  async removeMinute(sessionId: string, minute: number): Promise<number> {
    const rows = await this.#db.query(
      `DELETE FROM live_archive_parts WHERE session_id = $1 AND wall_start_ms >= $2 AND wall_start_ms < $3 RETURNING 1`,
      [sessionId, minute * 60_000, (minute + 1) * 60_000],
    );
    return rows.length;
  }

  /** Whether any part of the session is left. */
  async any(sessionId: string): Promise<boolean> {
    const rows = await this.#db.query('SELECT 1 FROM live_archive_parts WHERE session_id = $1 LIMIT 1', [sessionId]);
    return rows.length > 0;
  }
}
