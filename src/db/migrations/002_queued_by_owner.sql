-- The per-owner queue limit counts an owner's pending, waiting and running tasks on every
-- POST /api/transcode; this index keeps that count off the owner's finished history.
CREATE INDEX tasks_queued_by_owner ON tasks (owner) WHERE phase IN ('pending', 'waiting', 'running')
;
