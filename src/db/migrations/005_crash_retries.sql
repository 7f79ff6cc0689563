-- Runs lost to a worker that stopped heartbeating (issue #20), counted apart from failures:
-- `retries` stays every automatic rerun (the Task's status.retries), `crashes` is how many
-- of them a lease expiry caused. A job failure may be retried MEDIAPLANE_MAX_RETRIES times
-- (retries - crashes), a crash MEDIAPLANE_MAX_CRASH_RETRIES times, so a storage outage
-- cannot use up the budget that covers killed workers, nor the other way round.
ALTER TABLE tasks ADD COLUMN crashes integer NOT NULL DEFAULT 0
;
