// All the SQL of usage (issue #32): what an owner's keys did, read from where it is already
// recorded, so usage needs no write of its own on any request path: api_key_days (requests
// and tokens per key and UTC day, written by the limiter, accounts/limiter.ts), llm_ledger (charges
// per model, with the key that made them) and tasks (created per key; minutes of media
// transcoded by the finished ones). Every day is a UTC day.

import type { Queryable } from '../db/index.ts';

/**
 * Which task types usage counts, as the task registry names them (tasks/task-types.ts; given
 * by the composition root, as usage/ stays below the domains). A chunked task's pieces (issue
 * #30) are rows with a parent_id and are not tasks of their own; the owner's index
 * (tasks_by_owner, migration 013) holds no pieces, so every query here says
 * `parent_id IS NULL` to use it.
 */
export interface UsageTaskTypes {
  /** The task types a client creates: counted as tasks. */
  created: readonly string[];
  /** Those that transcode media: their output holds the input's duration. */
  transcoding: readonly string[];
}

// The duration of a finished task's input in seconds: `input_video.duration` of a transcode-file
// task's output (transcode/types.ts), `videoSpec.duration` of an asset's (assets/types.ts).
const DURATION_SQL = `COALESCE((t.output #>> '{input_video,duration}')::float8, (t.output #>> '{videoSpec,duration}')::float8, 0)`;
// A creatorId as stored: the request's string, or Livepeer's {type: 'unverified', value}.
const creatorOf = (col: string) =>
  `CASE jsonb_typeof(${col}) WHEN 'string' THEN ${col} #>> '{}' WHEN 'object' THEN ${col} ->> 'value' END`;
// A task's creator: its own params' (transcode-file), else its asset's (upload, clip).
const TASK_CREATOR_SQL = `COALESCE(${creatorOf("t.params -> 'creatorId'")}, ${creatorOf('a.creator_id')})`;
/** The first instant of a UTC day given as YYYY-MM-DD text. */
const dayStart = (param: string) => `(${param}::date)::timestamp AT TIME ZONE 'UTC'`;

/** What one owner (or one of its keys) read for a range of UTC days, from..to inclusive. */
export interface UsageRange {
  owner: string;
  /** YYYY-MM-DD */
  from: string;
  /** YYYY-MM-DD, inclusive */
  to: string;
  /** One key's usage only. */
  keyId?: string | undefined;
}

/** A row of one source: its UTC day, the key (null for what no key is known for) and its figures. */
export interface KeyDayRow {
  day: string;
  keyId: string | null;
  requests: number;
  tokens: number;
}
export interface ModelDayRow {
  day: string;
  keyId: string | null;
  model: string;
  requests: number;
  tokens: number;
  usd: number;
}
export interface TaskDayRow {
  day: string;
  keyId: string | null;
  tasks: number;
  transcodedSeconds: number;
}
export interface KeyRow {
  id: string;
  prefix: string;
  createdAt: Date;
  revokedAt: Date | null;
}

export class UsageStore {
  readonly #db: Queryable;
  readonly #types: UsageTaskTypes;
  constructor(db: Queryable, types: UsageTaskTypes) {
    this.#db = db;
    this.#types = types;
  }

  /** The owner's key `id` (revoked or not), or null when it is not the owner's. */
  async key(owner: string, id: string): Promise<KeyRow | null> {
    if (!/^[0-9a-f-]{36}$/i.test(id)) return null;
    return (await this.keys(owner, id))[0] ?? null;
  }

  /** Every key of the owner, oldest first. */
  async keys(owner: string, id?: string): Promise<KeyRow[]> {
    const rows = await this.#db.query<{ id: string; prefix: string; created_at: Date; revoked_at: Date | null }>(
      `SELECT id, prefix, created_at, revoked_at FROM api_keys
       WHERE owner = $1 AND ($2::uuid IS NULL OR id = $2::uuid) ORDER BY created_at, id`,
      [owner, id ?? null],
    );
    return rows.map((r) => ({
      id: r.id,
      prefix: r.prefix,
      createdAt: new Date(r.created_at),
      revokedAt: r.revoked_at ? new Date(r.revoked_at) : null,
    }));
  }

  /** Requests the limiter let through and tokens billed, per UTC day and key. */
  async keyDays(r: UsageRange): Promise<KeyDayRow[]> {
    const rows = await this.#db.query<{ day: string; key_id: string; requests: number; tokens: number }>(
      `SELECT to_char(day, 'YYYY-MM-DD') AS day, key_id::text, sum(requests)::float8 AS requests, sum(tokens)::float8 AS tokens
       FROM api_key_days
       WHERE owner = $1 AND day >= $2::date AND day <= $3::date AND ($4::uuid IS NULL OR key_id = $4::uuid)
       GROUP BY day, key_id ORDER BY day, key_id`,
      [r.owner, r.from, r.to, r.keyId ?? null],
    );
    return rows.map((x) => ({ day: x.day, keyId: x.key_id, requests: x.requests, tokens: x.tokens }));
  }

  /**
   * LLM charges per UTC day, key and model: requests (charges: a request is one charge), tokens
   * (those settled; a charge still reserved counts none yet) and USD (released reservations are
   * refunds, not charges).
   */
  async modelDays(r: UsageRange): Promise<ModelDayRow[]> {
    const rows = await this.#db.query<{
      day: string;
      key_id: string | null;
      model: string | null;
      requests: number;
      tokens: number;
      usd: number;
    }>(
      `SELECT to_char((created_at AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') AS day, key_id::text, model,
         count(*)::float8 AS requests, COALESCE(sum(completion_tokens), 0)::float8 AS tokens, sum(amount_usd)::float8 AS usd
       FROM llm_ledger
       WHERE owner = $1 AND kind = 'charge' AND status <> 'released'
         AND created_at >= ${dayStart('$2')} AND created_at < ${dayStart('$3')} + interval '1 day'
         AND ($4::uuid IS NULL OR key_id = $4::uuid)
       GROUP BY 1, 2, 3 ORDER BY 1, 3`,
      [r.owner, r.from, r.to, r.keyId ?? null],
    );
    return rows.map((x) => ({
      day: x.day,
      keyId: x.key_id,
      model: x.model ?? '(unknown)',
      requests: x.requests,
      tokens: x.tokens,
      usd: x.usd,
    }));
  }

  /**
   * Tasks per UTC day and key: created that day, and seconds of media transcoded by those that
   * completed that day (a task's input duration, counted once, when it completed).
   */
  async taskDays(r: UsageRange): Promise<TaskDayRow[]> {
    const rows = await this.#db.query<{ day: string; key_id: string | null; tasks: number; seconds: number }>(
      `WITH created AS (
         SELECT (t.created_at AT TIME ZONE 'UTC')::date AS day, t.key_id, count(*)::float8 AS tasks, 0::float8 AS seconds
         FROM tasks t
         WHERE t.owner = $1 AND t.parent_id IS NULL AND t.type = ANY($5::text[])
           AND t.created_at >= ${dayStart('$2')} AND t.created_at < ${dayStart('$3')} + interval '1 day'
           AND ($4::uuid IS NULL OR t.key_id = $4::uuid)
         GROUP BY 1, 2),
       done AS (
         SELECT (t.updated_at AT TIME ZONE 'UTC')::date AS day, t.key_id, 0::float8 AS tasks, sum(${DURATION_SQL}) AS seconds
         FROM tasks t
         WHERE t.owner = $1 AND t.parent_id IS NULL AND t.type = ANY($6::text[]) AND t.phase = 'completed'
           AND t.updated_at >= ${dayStart('$2')} AND t.updated_at < ${dayStart('$3')} + interval '1 day'
           AND ($4::uuid IS NULL OR t.key_id = $4::uuid)
         GROUP BY 1, 2)
       SELECT to_char(day, 'YYYY-MM-DD') AS day, key_id::text, sum(tasks)::float8 AS tasks, sum(seconds)::float8 AS seconds
       FROM (SELECT * FROM created UNION ALL SELECT * FROM done) u
       GROUP BY day, key_id ORDER BY day`,
      [r.owner, r.from, r.to, r.keyId ?? null, this.#types.created, this.#types.transcoding],
    );
    return rows.map((x) => ({ day: x.day, keyId: x.key_id, tasks: x.tasks, transcodedSeconds: x.seconds }));
  }

  /**
   * Livepeer's usage metric for [fromMs, toMs): seconds of media transcoded by the tasks that
   * completed in it, and seconds of the videos the owner keeps (assets ready, not deleted)
   * that were made before `toMs`; `creatorId` keeps those of one creator.
   */
  async livepeerUsage(o: {
    owner: string;
    fromMs: number;
    toMs: number;
    creatorId?: string | undefined;
  }): Promise<{ transcodedSeconds: number; storedSeconds: number }> {
    const rows = await this.#db.query<{ transcoded: number; stored: number }>(
      `SELECT
         (SELECT COALESCE(sum(${DURATION_SQL}), 0)::float8 FROM tasks t LEFT JOIN assets a ON a.task_id = t.id
          WHERE t.owner = $1 AND t.parent_id IS NULL AND t.type = ANY($5::text[]) AND t.phase = 'completed'
            AND t.updated_at >= to_timestamp($2::float8 / 1000) AND t.updated_at < to_timestamp($3::float8 / 1000)
            AND ($4::text IS NULL OR ${TASK_CREATOR_SQL} = $4)) AS transcoded,
         (SELECT COALESCE(sum((a.output #>> '{videoSpec,duration}')::float8), 0)::float8 FROM assets a
          WHERE a.owner = $1 AND a.phase = 'ready' AND a.deleted_at IS NULL
            AND a.created_at < to_timestamp($3::float8 / 1000)
            AND ($4::text IS NULL OR ${creatorOf('a.creator_id')} = $4)) AS stored`,
      [o.owner, o.fromMs, o.toMs, o.creatorId ?? null, this.#types.transcoding],
    );
    const row = rows[0];
    return { transcodedSeconds: row?.transcoded ?? 0, storedSeconds: row?.stored ?? 0 };
  }
}
