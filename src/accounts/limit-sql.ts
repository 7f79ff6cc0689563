// The SQL of key limits (issue #32), in one place as pg-boss keeps its plans: each statement is
// one atomic UPSERT ... RETURNING on a row per key (or per address), so concurrent processes
// count in the same rows and a refusal changes nothing.

/** The current window by the database's clock: `now` and `start` in ms since the epoch. */
export const WINDOW_CTE = `c AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms),
  win AS (SELECT ms, ms - ms % $2::bigint AS start FROM c)`;

/** The first day of the budget period `p` (a text parameter) that holds now, UTC. */
export const PERIOD_START = (p: string) => `CASE ${p}::text WHEN 'day' THEN (now() AT TIME ZONE 'UTC')::date
  WHEN 'month' THEN date_trunc('month', now() AT TIME ZONE 'UTC')::date ELSE DATE '1970-01-01' END`;

// One key's requests in this window: counted and refused at the limit in one UPSERT, and the
// day's count in the same statement (a refused request is not counted); the tokens window is
// read for the headers. $3 null: count, refuse nothing.
export const ADMIT_SQL = `WITH ${WINDOW_CTE},
  w AS (
    INSERT INTO key_windows AS k (key_id, kind, window_start, used)
    SELECT $1::uuid, 'requests', start, 1 FROM win
    ON CONFLICT (key_id, kind) DO UPDATE
      SET used = CASE WHEN k.window_start = EXCLUDED.window_start THEN k.used + 1 ELSE 1 END,
        window_start = EXCLUDED.window_start
      WHERE $3::bigint IS NULL OR k.window_start <> EXCLUDED.window_start OR k.used < $3::bigint
    RETURNING used),
  d AS (
    INSERT INTO api_key_days AS a (key_id, owner, day, requests)
    SELECT $1::uuid, $4, (now() AT TIME ZONE 'UTC')::date, 1 WHERE EXISTS (SELECT 1 FROM w)
    ON CONFLICT (key_id, day) DO UPDATE SET requests = a.requests + 1)
  SELECT win.ms::float8 AS now_ms, win.start::float8 AS start, (SELECT used FROM w)::float8 AS used,
    t.window_start::float8 AS t_start, t.used::float8 AS t_used
  FROM win LEFT JOIN key_windows t ON t.key_id = $1::uuid AND t.kind = 'tokens'`;

// Tokens taken from the window ($3 of them) unless that would pass the limit ($4).
export const TOKENS_SQL = `WITH ${WINDOW_CTE},
  w AS (
    INSERT INTO key_windows AS k (key_id, kind, window_start, used)
    SELECT $1::uuid, 'tokens', start, $3::bigint FROM win WHERE $3::bigint <= $4::bigint
    ON CONFLICT (key_id, kind) DO UPDATE
      SET used = CASE WHEN k.window_start = EXCLUDED.window_start THEN k.used + EXCLUDED.used ELSE EXCLUDED.used END,
        window_start = EXCLUDED.window_start
      WHERE k.window_start <> EXCLUDED.window_start OR k.used + EXCLUDED.used <= $4::bigint
    RETURNING used)
  SELECT win.ms::float8 AS now_ms, win.start::float8 AS start, (SELECT used FROM w)::float8 AS used,
    t.window_start::float8 AS t_start, t.used::float8 AS t_used
  FROM win LEFT JOIN key_windows t ON t.key_id = $1::uuid AND t.kind = 'tokens'`;

// The charge's USD ($3 tokens x $4 price, as the ledger computes it) added to the key's spend
// in its budget period unless that would pass the budget ($2).
export const BUDGET_SQL = `WITH p AS (SELECT ${PERIOD_START('$5')} AS start, ($3::integer * $4::numeric)::numeric(30, 12) AS usd),
  s AS (
    INSERT INTO key_spend AS k (key_id, period_start, spent_usd)
    SELECT $1::uuid, p.start, p.usd FROM p WHERE p.usd <= $2::numeric
    ON CONFLICT (key_id) DO UPDATE
      SET spent_usd = CASE WHEN k.period_start = EXCLUDED.period_start THEN k.spent_usd + EXCLUDED.spent_usd ELSE EXCLUDED.spent_usd END,
        period_start = EXCLUDED.period_start
      WHERE k.period_start <> EXCLUDED.period_start OR k.spent_usd + EXCLUDED.spent_usd <= $2::numeric
    RETURNING spent_usd)
  SELECT to_char(p.start, 'YYYY-MM-DD') AS start, (SELECT spent_usd::text FROM s) AS spent, p.usd::text AS usd FROM p`;

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
