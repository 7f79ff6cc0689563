-- Assets (issue #27, spec/API.md section C): videos the service keeps in its built-in store and
-- plays back. An asset is made by a task (`upload` now, `clip` in issue #28) and its phase
-- follows that task through the trigger below, so every way a task changes (claim, failure,
-- retry, cancel, a lease taken back) moves its asset in the same transaction, with the
-- asset's webhook event in the outbox. The store's own SQL is in src/assets/store.ts.
CREATE TABLE assets (
  id uuid PRIMARY KEY,
  owner text NOT NULL REFERENCES owners(name),
  project_id uuid NOT NULL,
  -- 16 random lowercase letters and digits, as Livepeer's: the asset's name in media keys
  -- (`asset/<playbackId>/...`) and playback URLs, so it is unique among all owners
  playback_id text NOT NULL UNIQUE,
  name text NOT NULL,
  -- 'audio' when the finished task found no video (copied from its output by the trigger)
  type text NOT NULL DEFAULT 'video' CHECK (type IN ('video', 'audio')),
  phase text NOT NULL CHECK (phase IN ('uploading', 'waiting', 'processing', 'ready', 'failed', 'deleting', 'deleted')),
  error_message text,
  -- the task that makes the asset (tasks are never deleted: retention keeps rows, issue #25)
  task_id uuid NOT NULL REFERENCES tasks(id),
  -- where the bytes came from ({type: url|directUpload|clip, ...}) and what the owner asked of
  -- the processing ({staticMp4?, profiles?, c2pa?}): shown back as the request had them
  source jsonb NOT NULL,
  spec jsonb NOT NULL DEFAULT '{}',
  playback_policy jsonb,
  creator_id jsonb,
  -- the finished task's AssetOutput (videoSpec, size, hash, store keys); NULL until ready
  output jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz
)
;
-- GET /api/asset pages newest first by (created_at, id), like tasks; deleted assets are gone from it.
CREATE INDEX assets_by_owner ON assets (owner, created_at DESC, id DESC) WHERE deleted_at IS NULL
;
-- The trigger finds a task's asset on every phase change of an upload or clip task.
CREATE INDEX assets_by_task ON assets (task_id)
;
-- Deletes the store could not finish (the asset stays `deleting`), for the sweep that retries them.
CREATE INDEX assets_deleting ON assets (updated_at) WHERE phase = 'deleting'
;
-- Upload URLs of POST /api/asset/request-upload: capabilities for one asset. Only the sha256
-- of the token is kept (like API keys: 256 random bits, so a fast hash suffices and lookups
-- stay O(1)); a database dump grants no upload. A row lives until the upload finishes (kept,
-- with the size received) or until the sweep expires it (deleted, once its task failed).
CREATE TABLE asset_uploads (
  asset_id uuid PRIMARY KEY REFERENCES assets(id),
  token_hash text NOT NULL UNIQUE,
  expires_at timestamptz NOT NULL,
  finished_at timestamptz,
  size bigint
)
;
CREATE INDEX asset_uploads_unfinished ON asset_uploads (expires_at) WHERE finished_at IS NULL
;
-- Asset events share the outbox of task events (issue #18's task_events, migration 003): the
-- webhook dispatcher fans out both. For an asset event `task_id` holds the asset's id and
-- `task` the asset row as JSON. PostgreSQL named the column's CHECK `task_events_event_check`
-- (table_column_check), on a server and in PGlite alike.
ALTER TABLE task_events DROP CONSTRAINT task_events_event_check
;
ALTER TABLE task_events ADD CONSTRAINT task_events_event_check CHECK (event IN (
  'task.spawned', 'task.updated', 'task.completed', 'task.failed',
  'asset.created', 'asset.updated', 'asset.ready', 'asset.failed', 'asset.deleted'))
;
-- Writes asset `asset_id`'s event `event_name` into the outbox, the row as it is now (AssetRow's columns,
-- with its task's progress while processing), and wakes the outbox's listeners: the channel
-- is tasks/events.ts TASK_EVENTS_CHANNEL, on which webhook dispatchers LISTEN (the NOTIFY
-- is delivered when the transaction commits). The one place an asset event is made: the
-- store (src/assets/store.ts) calls it after its own changes, the trigger after a task's.
CREATE FUNCTION asset_event(asset_id uuid, event_name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO task_events (id, task_id, owner, event, task)
  SELECT gen_random_uuid(), a.id, a.owner, event_name,
    (to_jsonb(a) - 'deleted_at') || jsonb_build_object('progress', CASE WHEN a.phase = 'processing' THEN t.progress END)
  FROM assets a LEFT JOIN tasks t ON t.id = a.task_id WHERE a.id = asset_id;
  PERFORM pg_notify('mediaplane_task_events', asset_id::text);
END
$$
;
-- The asset follows its task (the phases of spec/API.md section C): pending -> uploading,
-- waiting -> waiting, running -> processing, completed -> ready (the task's output, an
-- AssetOutput, copied with the type it found), failed or cancelled -> failed (with the
-- reason). An asset being deleted is no longer moved: its task is cancelled on the way.
-- No INSERT trigger: the store inserts an asset with the phase of its new task.
CREATE FUNCTION asset_follows_task() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  next_phase text := CASE NEW.phase
    WHEN 'pending' THEN 'uploading' WHEN 'waiting' THEN 'waiting' WHEN 'running' THEN 'processing'
    WHEN 'completed' THEN 'ready' ELSE 'failed' END;
  moved uuid;
BEGIN
  FOR moved IN
    UPDATE assets SET phase = next_phase, updated_at = now(),
      error_message = CASE WHEN next_phase = 'failed'
        THEN COALESCE(NEW.error_message, 'the task making this asset was cancelled') END,
      output = CASE WHEN next_phase = 'ready' THEN NEW.output ELSE output END,
      type = CASE WHEN next_phase = 'ready' AND NEW.output ->> 'type' IN ('video', 'audio')
        THEN NEW.output ->> 'type' ELSE type END
    WHERE task_id = NEW.id AND phase NOT IN ('deleting', 'deleted')
    RETURNING id
  LOOP
    PERFORM asset_event(moved, CASE next_phase
      WHEN 'ready' THEN 'asset.ready' WHEN 'failed' THEN 'asset.failed' ELSE 'asset.updated' END);
  END LOOP;
  RETURN NULL;
END
$$
;
-- Only the task types that make assets, and only real phase changes (progress writes do not
-- name `phase`, so they never reach the WHEN).
CREATE TRIGGER tasks_move_assets AFTER UPDATE OF phase ON tasks
  FOR EACH ROW WHEN (NEW.type IN ('upload', 'clip') AND OLD.phase IS DISTINCT FROM NEW.phase)
  EXECUTE FUNCTION asset_follows_task()
;
