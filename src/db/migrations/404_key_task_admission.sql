-- A key's concurrent transcodes count every task of its that encodes, whatever route made it (a
-- transcode, an upload, a clip): `encoding` names those task types (main.ts says which). As
-- key_task_slot did for one type: the key's advisory lock, held until the statement's
-- transaction ends, and then a count that sees every task a process that held it before committed.
CREATE FUNCTION key_encoding_slot(key uuid, encoding text[], max_live integer) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(400, hashtext(key::text));
  RETURN (SELECT count(*) FROM (SELECT 1 FROM tasks WHERE key_id = key AND type = ANY(encoding)
    AND phase IN ('pending', 'waiting', 'running') LIMIT max_live) AS live) < max_live;
END $$
;
-- The one admission of a key's new or requeued task (accounts/ KeyTaskAdmission; tasks/ TaskStore
-- runs it in the statement that writes the task): NULL when admitted, else the reason of the
-- refusal, its steps in this order, each only if the ones before passed: 'requests', the request
-- counted in the key's window when the auth step left that to the route (count_request; rpm NULL:
-- counted, never refused); and, for a task whose type encodes, 'budget', the key's budget not
-- spent in its period (budget NULL: none), then 'transcodes', a slot among its concurrent tasks
-- that encode (max_live NULL: no limit). A task that does not encode (an export) is a request of
-- its key and nothing more. One PL/pgSQL function, so that the order holds and each process plans
-- these steps once (see key_task_guard, which it replaces).
CREATE FUNCTION key_task_admission(
  key uuid, key_owner text, window_ms bigint, count_request boolean, rpm bigint, budget numeric, budget_period text,
  task_type text, encoding text[], max_live integer)
RETURNS text LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF count_request AND NOT (SELECT h.ok FROM key_hold(key, key_owner, window_ms, true, rpm, NULL, NULL, NULL, NULL, NULL) AS h) THEN
    RETURN 'requests';
  END IF;
  IF (task_type = ANY(encoding)) IS NOT TRUE THEN
    RETURN NULL;
  END IF;
  IF budget IS NOT NULL AND EXISTS (SELECT 1 FROM key_spend s WHERE s.key_id = key
    AND s.period_start = budget_period_start(budget_period) AND s.spent_usd >= budget) THEN
    RETURN 'budget';
  END IF;
  IF max_live IS NOT NULL AND NOT key_encoding_slot(key, encoding, max_live) THEN
    RETURN 'transcodes';
  END IF;
  RETURN NULL;
END $$
;
-- Replaced by key_task_admission and key_encoding_slot: no statement calls them any more.
DROP FUNCTION key_task_guard(uuid, text, bigint, boolean, bigint, numeric, text, text, integer)
;
DROP FUNCTION key_task_slot(uuid, text, integer)
;
