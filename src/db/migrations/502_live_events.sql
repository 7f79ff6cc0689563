-- The webhook events around a live session (spec/API.md section D): recordings and restreaming.
-- They share the outbox of stream events (migration 500): `task_id` holds the stream's id; the
-- outbox's `task` is `{stream, ...extra}` (extra: `session`, `target`), which the webhook
-- payload shows as the routes do.
ALTER TABLE task_events DROP CONSTRAINT task_events_event_check
;
ALTER TABLE task_events ADD CONSTRAINT task_events_event_check CHECK (event IN (
  'task.spawned', 'task.updated', 'task.completed', 'task.failed',
  'asset.created', 'asset.updated', 'asset.ready', 'asset.failed', 'asset.deleted',
  'stream.started', 'stream.idle',
  'recording.started', 'recording.waiting', 'recording.ready',
  'multistream.connected', 'multistream.error', 'multistream.disconnected'))
;
-- The stream row `s` as events may show it: without its key, its hash, and the URLs of its
-- inline multistream targets (each holds another service's stream key).
CREATE FUNCTION stream_shown(s jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_set(s - 'stream_key' - 'stream_key_hash' - 'deleted_at', '{multistream}', jsonb_build_object('targets',
    COALESCE((SELECT jsonb_agg(t #- '{spec,url}') FROM jsonb_array_elements(s #> '{multistream,targets}') AS t), '[]')))
$$
;
-- Writes event `event_name` of stream `stream_id` into the outbox with `extra` beside the stream
-- (its row as it is now), and wakes the outbox's listeners (delivered at commit). `extra` must
-- hold no secret: a target's url never goes in.
CREATE FUNCTION live_event(stream_id uuid, event_name text, extra jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  s jsonb;
BEGIN
  SELECT to_jsonb(streams.*) INTO s FROM streams WHERE id = stream_id;
  IF s IS NULL THEN RETURN; END IF;
  INSERT INTO task_events (id, task_id, owner, event, task)
  VALUES (gen_random_uuid(), stream_id, s ->> 'owner', event_name,
    jsonb_build_object('stream', stream_shown(s)) || COALESCE(extra, '{}'));
  PERFORM pg_notify('mediaplane_task_events', stream_id::text);
END
$$
;
