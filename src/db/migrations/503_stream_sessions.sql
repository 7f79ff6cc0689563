-- Live sessions and the nodes that hold them (spec/API.md section D). A session is one publish,
-- continued by a publisher that comes back within the reconnect window, on this node or
-- another. All SQL of these tables is in src/live/session-store.ts and node-registry.ts.
--
-- A node with ingest registers itself (a fresh id at each start), beats every second, and
-- deletes its row when it stops. A session is held by the node in `node_id`; the hold (its
-- lease) lasts while that node's heartbeat is fresh, so a node that was killed loses its
-- sessions a few seconds later and any node may continue them.
CREATE TABLE live_nodes (
  id text PRIMARY KEY,
  -- where the other nodes reach its ladders (MEDIAPLANE_INTERNAL_URL, else its API's address)
  internal_url text,
  heartbeat_at timestamptz NOT NULL DEFAULT now()
)
;
CREATE TABLE stream_sessions (
  id uuid PRIMARY KEY,
  stream_id uuid NOT NULL REFERENCES streams(id),
  owner text NOT NULL,
  project_id uuid NOT NULL,
  -- the stream's name and playback id, and what it was to make, copied at the session's start
  name text NOT NULL,
  playback_id text NOT NULL,
  profiles jsonb,
  record boolean NOT NULL DEFAULT false,
  recording_spec jsonb,
  -- live: a publisher sends; waiting: it went and may come back within the window; ended
  state text NOT NULL CHECK (state IN ('live', 'waiting', 'ended')),
  node_id text,
  -- the stream's LiveCounters, as the session last reported them
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
  -- the publisher's last data: the reconnect window counts from it
  last_seen timestamptz NOT NULL DEFAULT now(),
  ended_at timestamptz,
  -- when its recording was handed to the asset pipeline (queueing it again is harmless)
  recording_queued_at timestamptz
)
;
-- GET /api/stream/{id}/sessions and GET /api/session page newest first by (created_at, id).
CREATE INDEX stream_sessions_by_stream ON stream_sessions (stream_id, created_at DESC, id DESC)
;
CREATE INDEX stream_sessions_by_owner ON stream_sessions (owner, created_at DESC, id DESC)
;
-- The sweep reads the sessions not ended, and the ended ones whose recording is not queued yet.
CREATE INDEX stream_sessions_open ON stream_sessions (state) WHERE state <> 'ended'
;
CREATE INDEX stream_sessions_unqueued ON stream_sessions (ended_at)
  WHERE record AND state = 'ended' AND recording_queued_at IS NULL
;
