-- The first day of a key's budget period (issue #32): 'day' or 'month' in UTC, anything else
-- (a budget for all time) the epoch. The one place this is said: accounts/ limit-sql.ts's
-- PERIOD_START calls it, and key_task_guard below. A SQL function, so the planner inlines it.
CREATE FUNCTION budget_period_start(period text) RETURNS date
LANGUAGE sql STABLE AS $$
  SELECT CASE period WHEN 'day' THEN (now() AT TIME ZONE 'UTC')::date
    WHEN 'month' THEN date_trunc('month', now() AT TIME ZONE 'UTC')::date ELSE DATE '1970-01-01' END
$$
;
-- The condition of a key's new transcoding work (accounts/ KeyLimiter.taskGuard, issue #32),
-- evaluated inside the task's own INSERT, its steps in this order, each only if the ones before
-- it passed: the request counted in the key's window when the auth step left that to the route
-- (count_request; rpm NULL: counted, never refused); the key's budget not spent in its period
-- (budget NULL: none); a slot among its concurrent tasks of `task_type` (max_live NULL: no
-- limit; key_task_slot). One function, so that the order holds (the planner orders a WHERE's
-- conditions as it likes) and so that each process plans these steps once (PL/pgSQL keeps its
-- plans): on the embedded database, planning them in the insert on every POST cost more than
-- running them.
CREATE FUNCTION key_task_guard(
  key uuid, key_owner text, window_ms bigint, count_request boolean, rpm bigint, budget numeric, budget_period text,
  task_type text, max_live integer)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF count_request AND NOT (SELECT h.ok FROM key_hold(key, key_owner, window_ms, true, rpm, NULL, NULL, NULL, NULL, NULL) AS h) THEN
    RETURN false;
  END IF;
  IF budget IS NOT NULL AND EXISTS (SELECT 1 FROM key_spend s WHERE s.key_id = key
    AND s.period_start = budget_period_start(budget_period) AND s.spent_usd >= budget) THEN
    RETURN false;
  END IF;
  RETURN max_live IS NULL OR key_task_slot(key, task_type, max_live);
END $$
;
