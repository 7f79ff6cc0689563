-- Saved restream targets (spec/API.md section D, Livepeer's `/multistream/target`): where a
-- stream's renditions are pushed over RTMP(S) or SRT. The url holds the other service's stream
-- key: a secret kept in this table alone (a stream names its targets by id), never shown in a
-- response, a log line or an event. All SQL of targets is in src/live/multistream/target-store.ts.
CREATE TABLE multistream_targets (
  id uuid PRIMARY KEY,
  owner text NOT NULL REFERENCES owners(name),
  project_id uuid NOT NULL,
  name text,
  url text NOT NULL,
  -- a disabled target is kept on its streams but nothing is pushed to it
  disabled boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz
)
;
CREATE INDEX multistream_targets_by_owner ON multistream_targets (owner, created_at DESC, id DESC)
  WHERE deleted_at IS NULL
;
