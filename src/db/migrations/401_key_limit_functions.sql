-- A key's concurrent transcodes (issue #32), exact across processes in ONE statement: the task's
-- INSERT ... SELECT ... WHERE key_task_slot(...) takes the key's advisory lock (held until the
-- statement's transaction ends) and only then counts the key's live tasks. The count runs in
-- this VOLATILE function so that it reads a snapshot taken after the lock, which sees every
-- task a process that held the lock before committed; a count in the statement itself would
-- read the statement's snapshot, taken before it waited. No transaction around the insert.
CREATE FUNCTION key_task_slot(key uuid, task_type text, max_live integer) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(400, hashtext(key::text));
  RETURN (SELECT count(*) FROM (SELECT 1 FROM tasks WHERE key_id = key AND type = task_type
    AND phase IN ('pending', 'waiting', 'running') LIMIT max_live) AS live) < max_live;
END $$
;
-- One limited request's steps (accounts/ KeyLimiter.hold and admit, issue #32), each only if the
-- ones before it succeeded: the request counted in the key's window and day (count_request;
-- rpm NULL: never refused), `take` tokens from its tokens window (tpm NULL: none), `charge` USD
-- added to its spend in the budget period that starts `period_start` (budget NULL: none). Each
-- step is one UPSERT whose condition is checked on the row it locks, so concurrent processes
-- count exactly (take NULL: the tokens window is only read). `ok`: every step passed; the first refused one leaves its OUT column NULL.
-- In a function, not the caller's statement, so that each process plans these statements once
-- (PL/pgSQL keeps its plans): on the embedded database planning them cost more than running them.
CREATE FUNCTION key_hold(
  key uuid, key_owner text, window_ms bigint, count_request boolean, rpm bigint,
  take bigint, tpm bigint, budget numeric, budget_period_start date, charge numeric,
  OUT ok boolean, OUT now_ms float8, OUT start float8, OUT used float8, OUT t_took float8,
  OUT t_start float8, OUT t_used float8, OUT spent text, OUT budget_start date)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
  ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  win bigint := ms - ms % window_ms;
  n bigint;
BEGIN
  now_ms := ms; start := win; ok := false; budget_start := budget_period_start;
  IF tpm IS NOT NULL THEN
    SELECT w.window_start, w.used INTO t_start, t_used FROM key_windows w WHERE w.key_id = key AND w.kind = 'tokens';
  END IF;
  IF count_request THEN
    INSERT INTO key_windows AS k (key_id, kind, window_start, used) VALUES (key, 'requests', win, 1)
    ON CONFLICT (key_id, kind) DO UPDATE
      SET used = CASE WHEN k.window_start = EXCLUDED.window_start THEN k.used + 1 ELSE 1 END,
        window_start = EXCLUDED.window_start
      WHERE rpm IS NULL OR k.window_start <> EXCLUDED.window_start OR k.used < rpm
    RETURNING k.used INTO n;
    IF n IS NULL THEN RETURN; END IF;
    used := n;
    INSERT INTO api_key_days AS a (key_id, owner, day, requests)
    VALUES (key, key_owner, (now() AT TIME ZONE 'UTC')::date, 1)
    ON CONFLICT (key_id, day) DO UPDATE SET requests = a.requests + 1;
  END IF;
  IF tpm IS NOT NULL AND take IS NOT NULL THEN
    IF take > tpm THEN RETURN; END IF;
    INSERT INTO key_windows AS k (key_id, kind, window_start, used) VALUES (key, 'tokens', win, take)
    ON CONFLICT (key_id, kind) DO UPDATE
      SET used = CASE WHEN k.window_start = EXCLUDED.window_start THEN k.used + EXCLUDED.used ELSE EXCLUDED.used END,
        window_start = EXCLUDED.window_start
      WHERE k.window_start <> EXCLUDED.window_start OR k.used + EXCLUDED.used <= tpm
    RETURNING k.used INTO n;
    IF n IS NULL THEN RETURN; END IF;
    t_took := n;
  END IF;
  IF budget IS NOT NULL THEN
    IF charge > budget THEN RETURN; END IF;
    INSERT INTO key_spend AS k (key_id, period_start, spent_usd) VALUES (key, budget_period_start, charge)
    ON CONFLICT (key_id) DO UPDATE
      SET spent_usd = CASE WHEN k.period_start = EXCLUDED.period_start THEN k.spent_usd + EXCLUDED.spent_usd ELSE EXCLUDED.spent_usd END,
        period_start = EXCLUDED.period_start
      WHERE k.period_start <> EXCLUDED.period_start OR k.spent_usd + EXCLUDED.spent_usd <= budget
    RETURNING k.spent_usd::text INTO spent;
    IF spent IS NULL THEN RETURN; END IF;
  END IF;
  ok := true;
END $$
;
