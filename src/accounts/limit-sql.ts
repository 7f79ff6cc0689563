// The SQL of key limits (issue #32), in one place as pg-boss keeps its plans: each statement is
// one atomic UPSERT ... RETURNING on a row per key (or per address), so concurrent processes
// count in the same rows and a refusal changes nothing.

import { type Bind, sqlParams } from '../lib/sql-params.ts';

/** The current window by the database's clock: `now` and `start` in ms since the epoch. */
export const WINDOW_CTE = `c AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms),
  win AS (SELECT ms, ms - ms % $2::bigint AS start FROM c)`;

/** The first day of the budget period `p` (a text parameter) that holds now, UTC (migration 402). */
export const PERIOD_START = (p: string) => `budget_period_start(${p}::text)`;

/** What one limited request is held to, in the order its steps run (KeyLimiter.hold). */
export interface HoldSteps {
  keyId: string;
  owner: string;
  windowMs: number;
  /** Count the request in the key's requests window (and its day); `limit` null: count, refuse nothing. */
  requests?: { limit: number | null } | undefined;
  /** Take `take` tokens from the key's tokens window unless that passes `limit` (null: only read the window). */
  tokens?: { take: number | null; limit: number } | undefined;
  /** Add `tokens` x `pricePerToken` USD to the key's spend in its period unless that passes `usd`. */
  budget?: { usd: string; period: string; tokens: number; pricePerToken: string } | undefined;
  /**
   * The ledger's reservation (llm/ ledger.ts reserveStep), written in the same statement only
   * where every step passed; `budgetStart`: the budget period's first day (SQL), for its refunds.
   */
  reserve?: { sql(bind: Bind, budgetStart: string): string } | undefined;
}

/** What the hold statement answers: each step's result, null where it refused or did not run. */
export interface HoldRow {
  /** Every step passed (the reservation aside). */
  ok: boolean;
  now_ms: number;
  start: number;
  /** The key's requests in this window, this one counted. */
  used: number | null;
  /** The key's tokens in this window, this request's taken. */
  t_took: number | null;
  /** The tokens window as it stood before the statement. */
  t_start: number | null;
  t_used: number | null;
  spent: string | null;
  usd: string | null;
  budget_start: string | null;
  /** The amount the reservation took; null where it was not written (a step refused, or the balance). */
  res_usd: string | null;
}

/**
 * One limited request's steps in ONE statement (issue #32): key_hold() (migration 401) counts
 * the request, takes the tokens and adds to the budget, each only if the ones before passed,
 * and the ledger's reservation (`reserve`, ledger_reserve() of migration 403) is written in the
 * same statement only if all did. One round trip, no transaction held open across the event
 * loop (the embedded database runs every other request's statements on the same thread), and
 * every step planned once per process inside the functions.
 */
export function holdSql(s: HoldSteps): { sql: string; params: unknown[] } {
  const { bind, params } = sqlParams();
  const sql = `SELECT h.ok, h.now_ms, h.start, h.used, h.t_took, h.t_start, h.t_used, h.spent,
    ${s.budget ? `(${chargeSql(bind, s.budget)})::text` : 'NULL::text'} AS usd, to_char(h.budget_start, 'YYYY-MM-DD') AS budget_start,
    ${s.reserve ? `CASE WHEN h.ok THEN (${s.reserve.sql(bind, 'h.budget_start')})::text END` : 'NULL::text'} AS res_usd
  FROM ${holdCall(bind, s)} AS h`;
  return { sql, params };
}

/** key_hold() for `s`, bound by `bind`. */
function holdCall(bind: Bind, s: Omit<HoldSteps, 'reserve'>): string {
  const b = s.budget;
  const args = [
    ...requestArgs(bind, s),
    bind(s.tokens?.take ?? null, 'bigint'),
    bind(s.tokens?.limit ?? null, 'bigint'),
    bind(b?.usd ?? null, 'numeric'),
    b ? PERIOD_START(bind(b.period, 'text')) : 'NULL::date',
    b ? chargeSql(bind, b) : 'NULL::numeric',
  ];
  return `key_hold(${args.join(', ')})`;
}

/**
 * The key and its request count, bound as the first five arguments of key_hold() and
 * key_task_admission() (key, key_owner, window_ms, count_request, rpm).
 */
function requestArgs(
  bind: Bind,
  s: { keyId: string; owner: string; windowMs: number; requests?: { limit: number | null } | undefined },
): string[] {
  return [
    bind(s.keyId, 'uuid'),
    bind(s.owner, 'text'),
    bind(s.windowMs, 'bigint'),
    bind(s.requests !== undefined, 'boolean'),
    bind(s.requests?.limit ?? null, 'bigint'),
  ];
}

/** What a key's task is admitted under (KeyTaskAdmission), in the order key_task_admission() checks it. */
export interface TaskAdmissionSteps {
  keyId: string;
  owner: string;
  windowMs: number;
  /** Count the request in the key's requests window; `limit` null: count, refuse nothing. */
  requests?: { limit: number | null } | undefined;
  /** The key's budget, not spent in its period (a task that encodes). */
  budget?: { usd: string; period: string } | undefined;
  /** The task's type, as SQL (a bound value, or the column of the task a retry requeues). */
  type: string;
  /** The task types that encode: they need the budget and take a slot. */
  encoding: readonly string[];
  /** The most tasks that encode the key may have pending, waiting or running (key_encoding_slot). */
  maxLive?: number | undefined;
}

/**
 * The admission of a key's task, in the statement that writes it: key_task_admission()
 * (migration 404) runs `s`'s steps in order and answers NULL, or the reason of the refusal.
 */
export function taskAdmissionSql(bind: Bind, s: TaskAdmissionSteps): string {
  const args = [
    ...requestArgs(bind, s),
    bind(s.budget?.usd ?? null, 'numeric'),
    bind(s.budget?.period ?? null, 'text'),
    `(${s.type})::text`,
    bind(s.encoding, 'text[]'),
    bind(s.maxLive ?? null, 'integer'),
  ];
  return `key_task_admission(${args.join(', ')})`;
}

/** What a charge adds to a budget, as the ledger computes it. */
function chargeSql(bind: Bind, b: NonNullable<HoldSteps['budget']>): string {
  return `(${bind(b.tokens, 'integer')} * ${bind(b.pricePerToken, 'numeric')})::numeric(30, 12)`;
}

// What a refused request took before the step that refused it (tokens, USD), given back.
export const GIVE_BACK_SQL = `WITH t AS (
    UPDATE key_windows SET used = GREATEST(0, used - $3::bigint)
    WHERE key_id = $1::uuid AND kind = 'tokens' AND window_start = $2::bigint AND $3::bigint > 0)
  UPDATE key_spend SET spent_usd = GREATEST(0, spent_usd - $5::numeric)
  WHERE key_id = $1::uuid AND period_start = $4::date AND $5::numeric > 0`;

// One more bad key from an address; stale rows of other addresses go a few at a time.
export const AUTH_FAILED_SQL = `WITH ${WINDOW_CTE},
  gone AS (
    DELETE FROM auth_failures WHERE address IN (
      SELECT address FROM auth_failures WHERE window_start < (SELECT start FROM win) AND address <> $1 LIMIT 100)),
  f AS (
    INSERT INTO auth_failures AS a (address, window_start, failures)
    SELECT $1, start, 1 FROM win
    ON CONFLICT (address) DO UPDATE
      SET failures = CASE WHEN a.window_start = EXCLUDED.window_start THEN LEAST(a.failures + 1, 1000000000) ELSE 1 END,
        window_start = EXCLUDED.window_start
    RETURNING failures)
  SELECT (SELECT failures FROM f)::float8 AS failures, win.ms::float8 AS now_ms, win.start::float8 AS start FROM win`;

// The batched requests of keys without a window, one row per key.
export const FLUSH_SQL = `INSERT INTO api_key_days AS a (key_id, owner, day, requests)
  SELECT u.key_id, u.owner, (now() AT TIME ZONE 'UTC')::date, u.n FROM unnest($1::uuid[], $2::text[], $3::bigint[]) AS u (key_id, owner, n)
  ON CONFLICT (key_id, day) DO UPDATE SET requests = a.requests + EXCLUDED.requests`;
