-- The archive of live sessions (spec/API.md section D): each session's source rendition is
-- written to the built-in store part by part as it arrives (src/live/archive/), so a
-- recording or a live clip can be made of it later, on any node, and nothing written is lost
-- when the process dies. One row per part stored; a row is written only once its object is
-- whole in the store, so the index never names a part that is not there.
CREATE TABLE live_archive_parts (
  session_id uuid NOT NULL,
  -- the packager's run (one ffmpeg process): its init segment is `live/<session>/init/<run>.mp4`
  run bigint NOT NULL,
  msn bigint NOT NULL,
  part integer NOT NULL,
  -- `live/<session>/m<wall minute>/<run>-<msn>-<part>.m4s`: whole minutes go with one removePrefix
  key text NOT NULL,
  -- wall clock of its first sample (EXT-X-PROGRAM-DATE-TIME's clock) and its media duration
  wall_start_ms bigint NOT NULL,
  duration_ms double precision NOT NULL,
  bytes integer NOT NULL,
  -- starts with a keyframe: where a range extract may begin
  independent boolean NOT NULL,
  PRIMARY KEY (session_id, run, msn, part)
)
;
-- Range extracts (live clips) and the retention sweep find parts by their wall clock.
CREATE INDEX live_archive_parts_by_wall ON live_archive_parts (session_id, wall_start_ms)
;
-- `recording.ready`: a session's recording asset (its id is the session's) became ready. The
-- event carries the stream and the session as the routes show them (the session's row; the
-- webhook payload adds the recording's URLs from the asset). Written by the trigger below in
-- the transaction that makes the asset ready, as asset.ready is.
CREATE FUNCTION recording_ready() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  s record;
BEGIN
  SELECT * INTO s FROM stream_sessions WHERE id = NEW.id;
  IF NOT FOUND THEN RETURN NULL; END IF;
  PERFORM live_event(s.stream_id, 'recording.ready', jsonb_build_object('session', to_jsonb(s),
    'recording', jsonb_build_object('assetId', NEW.id, 'playbackId', NEW.playback_id, 'output', NEW.output)));
  RETURN NULL;
END
$$
;
CREATE TRIGGER assets_recording_ready AFTER UPDATE OF phase ON assets
  FOR EACH ROW WHEN (NEW.phase = 'ready' AND OLD.phase IS DISTINCT FROM NEW.phase AND NEW.source ->> 'type' = 'recording')
  EXECUTE FUNCTION recording_ready()
;
