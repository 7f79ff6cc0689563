-- Retention (issue #25): the sweep deletes task events that were fanned out to webhooks long
-- enough ago (tasks/queue.ts purgeEvents), oldest first, a batch at a time. Events not yet
-- fanned out are in task_events_undispatched (migration 003) and never purged.
CREATE INDEX task_events_dispatched ON task_events (created_at) WHERE dispatched_at IS NOT NULL
;
