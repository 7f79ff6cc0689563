-- The outbox of task changes (issue #18). Every statement that changes a task writes its
-- event here in the same statement (tasks/events.ts), so no change is without its event
-- and no event without its change, whatever process dies when. Webhook dispatchers fan the
-- rows out and mark them `dispatched_at`; `id` is the id receivers drop duplicates by.
CREATE TABLE task_events (
  id uuid PRIMARY KEY,
  task_id uuid NOT NULL,
  owner text NOT NULL,
  event text NOT NULL CHECK (event IN ('task.spawned', 'task.updated', 'task.completed', 'task.failed')),
  -- the task row right after the change (TaskRow's columns, snake_case), its params without
  -- the secrets in them: an event outlives the task's need for its credentials (issue #15)
  task jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  dispatched_at timestamptz
)
;
CREATE INDEX task_events_undispatched ON task_events (created_at) WHERE dispatched_at IS NULL
;
CREATE INDEX task_events_by_task ON task_events (task_id, created_at)
;
-- When the last progress event of the task's current run was written: progress becomes an
-- event at most once per MEDIAPLANE_TASK_PROGRESS_EVENT_MS, and the first of a run always
-- (a claim clears it).
ALTER TABLE tasks ADD COLUMN last_progress_event_at timestamptz
;
