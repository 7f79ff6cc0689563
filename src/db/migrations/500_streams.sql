-- Live streams (spec/API.md section D): a stream is a live source taken in over RTMP or SRT and
-- played as low-latency HLS. Its row is the stream as GET /api/stream/{id} shows it, with the
-- counters its live session reports every few seconds. All SQL of streams is in
-- src/live/store.ts; its state changes write their webhook events (stream.started,
-- stream.idle) through stream_event below, in the statement that makes the change.
CREATE TABLE streams (
  id uuid PRIMARY KEY,
  owner text NOT NULL REFERENCES owners(name),
  project_id uuid NOT NULL,
  -- the API key that made the stream: a publish counts as one request against its rpm
  key_id uuid,
  name text NOT NULL,
  -- The stream key is shown to its owner (as Livepeer does), so it is kept; publishers are
  -- found by its sha256 (~124 random bits: a fast hash suffices, lookups stay O(1)) and the
  -- key itself is then compared in constant time.
  stream_key text NOT NULL,
  stream_key_hash text NOT NULL UNIQUE,
  -- 16 random lowercase letters and digits, as an asset's: /media/live/<playbackId>/
  playback_id text NOT NULL UNIQUE,
  -- NULL: the default ladder; []: the source alone
  profiles jsonb,
  record boolean NOT NULL DEFAULT false,
  recording_spec jsonb,
  playback_policy jsonb,
  multistream jsonb NOT NULL DEFAULT '{"targets": []}',
  user_tags jsonb,
  creator_id jsonb,
  suspended boolean NOT NULL DEFAULT false,
  is_active boolean NOT NULL DEFAULT false,
  -- the session live now (or last): one per publish
  session_id uuid,
  protocol text CHECK (protocol IN ('rtmp', 'srt')),
  -- What the latest session reported (LiveCounters): NULL health until it was ever live.
  is_healthy boolean,
  issues jsonb NOT NULL DEFAULT '[]',
  ingest_rate double precision NOT NULL DEFAULT 0,
  outgoing_rate double precision NOT NULL DEFAULT 0,
  source_segments integer NOT NULL DEFAULT 0,
  transcoded_segments integer NOT NULL DEFAULT 0,
  source_segments_duration double precision NOT NULL DEFAULT 0,
  transcoded_segments_duration double precision NOT NULL DEFAULT 0,
  source_bytes double precision NOT NULL DEFAULT 0,
  transcoded_bytes double precision NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_seen timestamptz,
  last_terminated_at timestamptz,
  deleted_at timestamptz
)
;
-- GET /api/stream pages newest first by (created_at, id), like assets; deleted streams are gone from it.
CREATE INDEX streams_by_owner ON streams (owner, created_at DESC, id DESC) WHERE deleted_at IS NULL
;
-- Stream events share the outbox of task and asset events (migrations 003 and 010): `task_id`
-- holds the stream's id and `task` the stream row as JSON.
ALTER TABLE task_events DROP CONSTRAINT task_events_event_check
;
ALTER TABLE task_events ADD CONSTRAINT task_events_event_check CHECK (event IN (
  'task.spawned', 'task.updated', 'task.completed', 'task.failed',
  'asset.created', 'asset.updated', 'asset.ready', 'asset.failed', 'asset.deleted',
  'stream.started', 'stream.idle'))
;
-- Writes event `event_name` of the stream row `s` (to_jsonb of the row as the changing
-- statement RETURNED it, so the event shows the change) into the outbox, and wakes the
-- outbox's listeners (tasks/events.ts TASK_EVENTS_CHANNEL; delivered at commit). The key and
-- its hash stay out: an event outlives any need for the secret, and the outbox is kept.
CREATE FUNCTION stream_event(s jsonb, event_name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO task_events (id, task_id, owner, event, task)
  VALUES (gen_random_uuid(), (s ->> 'id')::uuid, s ->> 'owner', event_name,
    s - 'stream_key' - 'stream_key_hash' - 'deleted_at');
  PERFORM pg_notify('mediaplane_task_events', s ->> 'id');
END
$$
;
