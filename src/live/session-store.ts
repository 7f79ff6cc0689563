import type { Db, Queryable } from '../db/index.ts';
import { NotFoundError } from '../lib/errors.ts';
import { isUuid } from '../lib/ids.ts';
import { NEWEST_FIRST, olderThanCursor, paged } from '../lib/paging.ts';
import type { IngestProtocol } from './ingest-types.ts';
import { leaseHeld } from './node-registry.ts';
import { SESSION_COLUMNS, type SessionRow, sessionFromRow } from './session-rows.ts';
import { StreamStore } from './store.ts';
import type { LiveCounters, SessionKey, SessionRecord, SessionStore, StreamRecord } from './types.ts';

// All SQL of live sessions (stream_sessions, migration 503). A session is claimed by the gate
// in one transaction with its stream (already live, continued within the reconnect window, or
// new); its node reports its counters, marks it waiting when the publisher goes and ends it
// when the window closes; the sweep ends the sessions of nodes that died. State changes that
// make webhook events write them in the same transaction (stream_event, live_event).

export type SessionClaim =
  | { claimed: true; session: SessionRecord; continued: boolean }
  | { claimed: false; why: 'live' | 'gone' };

/** The stream's row as a publish starts: marked live, its session, and `stream.started`. */
const STREAM_STARTED = `WITH s AS (UPDATE streams SET is_active = true, session_id = $2, protocol = $3,
    last_seen = now(), is_healthy = true, issues = '[]', ingest_rate = 0, outgoing_rate = 0
  WHERE id = $1 RETURNING *) SELECT stream_event(to_jsonb(s), 'stream.started') FROM s`;

/** Streams whose publisher went: idle, and `stream.idle` for each still marked live. */
const STREAMS_IDLE = `WITH s AS (UPDATE streams SET is_active = false, last_seen = now(), ingest_rate = 0,
    outgoing_rate = 0
  WHERE session_id = ANY($1::uuid[]) AND is_active RETURNING *) SELECT stream_event(to_jsonb(s), 'stream.idle') FROM s`;

export class LiveSessionStore implements SessionStore {
  readonly #db: Db;
  readonly #streams: StreamStore;

  constructor(db: Db) {
    this.#db = db;
    this.#streams = new StreamStore(db);
  }

  /** The stream a publisher's key names (the gate's first question). */
  findByKey(streamKey: string): Promise<StreamRecord | undefined> {
    return this.#streams.findByKey(streamKey);
  }

  /**
   * The gate's claim of a stream for a publish on node `nodeId`, in one transaction: refused
   * while its session is live and leased (by any node); continued when the session is live
   * with its lease gone, or waiting, and its publisher was seen within the window; else a new
   * session with id `sessionId` (`recording.started` when the stream records). Each claim
   * marks the stream live with `stream.started`. `publisherGone`: this node holds the session
   * and knows its publisher went (its end may not be written yet): it may be continued.
   */
  async claim(
    c: SessionKey & { protocol: IngestProtocol; windowSecs: number; publisherGone?: boolean },
  ): Promise<SessionClaim> {
    return this.#db.tx(async (q) => {
      const streams = await q.query<{ session_id: string | null; suspended: boolean }>(
        'SELECT session_id, suspended FROM streams WHERE id = $1 AND deleted_at IS NULL FOR UPDATE',
        [c.streamId],
      );
      const stream = streams[0];
      if (!stream || stream.suspended) return { claimed: false, why: 'gone' };
      const current = stream.session_id ? await this.#current(q, stream.session_id, c.windowSecs) : undefined;
      const ours = c.publisherGone === true && current?.node_id === c.nodeId;
      if (current?.state === 'live' && current.leased && !ours) return { claimed: false, why: 'live' };
      let claim: SessionClaim;
      if (current && current.state !== 'ended' && current.within) {
        const rows = await q.query<SessionRow>(
          `UPDATE stream_sessions SET state = 'live', node_id = $2, last_seen = now() WHERE id = $1
           RETURNING ${SESSION_COLUMNS}`,
          [current.id, c.nodeId],
        );
        claim = { claimed: true, session: sessionFromRow(one(rows)), continued: true };
      } else {
        if (current && current.state !== 'ended') await this.#endIn(q, current.id);
        claim = { claimed: true, session: await this.#open(q, c), continued: false };
      }
      await q.query(STREAM_STARTED, [c.streamId, claim.session.id, c.protocol]);
      if (!claim.continued && claim.session.record) await this.#event(q, claim.session, 'recording.started');
      return claim;
    });
  }

  async #current(q: Queryable, id: string, windowSecs: number) {
    const rows = await q.query<{
      id: string;
      state: SessionRecord['state'];
      node_id: string | null;
      leased: boolean;
      within: boolean;
    }>(
      `SELECT id, state, node_id, ${leaseHeld('node_id')} AS leased,
         last_seen > now() - $2 * interval '1 second' AS within
       FROM stream_sessions WHERE id = $1 FOR UPDATE`,
      [id, windowSecs],
    );
    return rows[0];
  }

  async #open(q: Queryable, c: SessionKey): Promise<SessionRecord> {
    const rows = await q.query<SessionRow>(
      `INSERT INTO stream_sessions (id, stream_id, owner, project_id, name, playback_id, profiles, record,
         recording_spec, state, node_id)
       SELECT $1, id, owner, project_id, name, playback_id, profiles, record, recording_spec, 'live', $2
       FROM streams WHERE id = $3 RETURNING ${SESSION_COLUMNS}`,
      [c.sessionId, c.nodeId, c.streamId],
    );
    return sessionFromRow(one(rows));
  }

  async #endIn(q: Queryable, id: string): Promise<void> {
    await q.query(
      `UPDATE stream_sessions SET state = 'ended', ended_at = now(), ingest_rate = 0, outgoing_rate = 0
       WHERE id = $1 AND state <> 'ended'`,
      [id],
    );
  }

  async #event(q: Queryable, s: SessionRecord, event: 'recording.started'): Promise<void> {
    await q.query(
      `SELECT live_event($1, $2, jsonb_build_object('session', to_jsonb(ss))) FROM stream_sessions ss WHERE ss.id = $3`,
      [s.streamId, event, s.id],
    );
  }

  /** The counters of a live session and of its stream (every ~2 s); the publisher was seen now. */
  async report(k: SessionKey, c: LiveCounters): Promise<void> {
    const values = [
      c.isHealthy,
      JSON.stringify(c.issues),
      c.ingestRate,
      c.outgoingRate,
      Math.round(c.sourceSegments),
      Math.round(c.transcodedSegments),
      c.sourceSegmentsDuration,
      c.transcodedSegmentsDuration,
      c.sourceBytes,
      c.transcodedBytes,
    ];
    const sets = `is_healthy = $3, issues = $4::jsonb, ingest_rate = $5, outgoing_rate = $6, source_segments = $7,
      transcoded_segments = $8, source_segments_duration = $9, transcoded_segments_duration = $10,
      source_bytes = $11, transcoded_bytes = $12, last_seen = now()`;
    await this.#db.query(`UPDATE streams SET ${sets} WHERE id = $1 AND session_id = $2 AND is_active`, [
      k.streamId,
      k.sessionId,
      ...values,
    ]);
    await this.#db.query(`UPDATE stream_sessions SET ${sets} WHERE id = $2 AND node_id = $1 AND state = 'live'`, [
      k.nodeId,
      k.sessionId,
      ...values,
    ]);
  }

  /** The publisher went: the stream idle (`stream.idle`), the session waiting for it within the window. */
  async idle(k: SessionKey): Promise<void> {
    await this.#db.tx(async (q) => {
      await q.query(
        `UPDATE stream_sessions SET state = 'waiting', last_seen = now(), ingest_rate = 0, outgoing_rate = 0
         WHERE id = $1 AND node_id = $2 AND state = 'live'`,
        [k.sessionId, k.nodeId],
      );
      await q.query(STREAMS_IDLE, [[k.sessionId]]);
    });
  }

  /**
   * Ends a session this node holds (a compare-and-set: `from` lists the states it may end from,
   * waiting alone when its window closed); the session as it ended, or undefined when another
   * node continued it or it had ended already.
   */
  async end(k: SessionKey, from: readonly SessionRecord['state'][] = ['waiting']): Promise<SessionRecord | undefined> {
    return this.#db.tx(async (q) => {
      const rows = await q.query<SessionRow>(
        `UPDATE stream_sessions SET state = 'ended', ended_at = now(), ingest_rate = 0, outgoing_rate = 0
         WHERE id = $1 AND node_id = $2 AND state = ANY($3::text[]) RETURNING ${SESSION_COLUMNS}`,
        [k.sessionId, k.nodeId, from],
      );
      if (rows.length > 0) await q.query(STREAMS_IDLE, [[k.sessionId]]);
      return rows[0] && sessionFromRow(rows[0]);
    });
  }

  /**
   * The sweep of dead holders: sessions live or waiting whose holder's lease is gone and whose
   * publisher was last seen before the window are ended, their streams idle. The sessions ended.
   */
  async endOrphans(windowSecs: number): Promise<SessionRecord[]> {
    return this.#db.tx(async (q) => {
      const rows = await q.query<SessionRow>(
        `UPDATE stream_sessions SET state = 'ended', ended_at = now(), ingest_rate = 0, outgoing_rate = 0
         WHERE state <> 'ended' AND NOT ${leaseHeld('node_id')} AND last_seen <= now() - $1 * interval '1 second'
         RETURNING ${SESSION_COLUMNS}`,
        [windowSecs],
      );
      if (rows.length > 0) await q.query(STREAMS_IDLE, [rows.map((r) => r.id)]);
      return rows.map(sessionFromRow);
    });
  }

  /** Ended sessions with `record` whose recording was not handed to the asset pipeline yet, oldest first. */
  async unqueuedRecordings(limit = 20): Promise<SessionRecord[]> {
    const rows = await this.#db.query<SessionRow>(
      `SELECT ${SESSION_COLUMNS} FROM stream_sessions
       WHERE record AND state = 'ended' AND recording_queued_at IS NULL ORDER BY ended_at LIMIT $1`,
      [limit],
    );
    return rows.map(sessionFromRow);
  }

  /** Of `sessionIds` waiting on node `nodeId`, those a publisher continued on another node (or that ended). */
  async continuedElsewhere(sessionIds: readonly string[], nodeId: string): Promise<string[]> {
    const rows = await this.#db.query<{ id: string }>(
      `SELECT id FROM stream_sessions WHERE id = ANY($1::uuid[]) AND (node_id IS DISTINCT FROM $2 OR state = 'ended')`,
      [sessionIds, nodeId],
    );
    return rows.map((r) => r.id);
  }

  async recordingQueued(sessionId: string): Promise<void> {
    await this.#db.query('UPDATE stream_sessions SET recording_queued_at = now() WHERE id = $1', [sessionId]);
  }

  // --- reads (the API's)

  /** The owner's session; another owner's, or an id that is no UUID: NotFoundError. */
  async get(owner: string, id: string): Promise<SessionRecord> {
    if (!isUuid(id)) throw new NotFoundError();
    const rows = await this.#db.query<SessionRow>(
      `SELECT ${SESSION_COLUMNS} FROM stream_sessions WHERE id = $1 AND owner = $2`,
      [id, owner],
    );
    return sessionFromRow(one(rows));
  }

  /** The owner's sessions (of one stream, or with `record` as asked), newest first; the cursor is the last id. */
  async list(
    owner: string,
    o: { streamId?: string | undefined; record?: boolean | undefined; limit: number; cursor?: string | undefined },
  ): Promise<{ sessions: SessionRecord[]; next: string | null }> {
    if (o.cursor !== undefined && !isUuid(o.cursor)) return { sessions: [], next: null };
    if (o.streamId !== undefined && !isUuid(o.streamId)) return { sessions: [], next: null };
    const rows = await this.#db.query<SessionRow>(
      `SELECT ${SESSION_COLUMNS} FROM stream_sessions WHERE owner = $1
         AND ($2::uuid IS NULL OR stream_id = $2) AND ($3::boolean IS NULL OR record = $3)
         AND ${olderThanCursor({ table: 'stream_sessions', cursor: '$4', scope: 'owner = $1' })} ${NEWEST_FIRST} LIMIT $5`,
      [owner, o.streamId ?? null, o.record ?? null, o.cursor ?? null, o.limit + 1],
    );
    const { items, next } = paged(rows, o.limit);
    return { sessions: items.map(sessionFromRow), next };
  }
}

function one(rows: SessionRow[]): SessionRow {
  const row = rows[0];
  if (!row) throw new NotFoundError();
  return row;
}
