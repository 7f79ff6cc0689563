-- A stream event's row leaves out the URLs of the stream's inline multistream targets too: each
-- holds another service's stream key, a secret as much as the stream's own (the routes never
-- show it either, api/contract/stream.ts).
CREATE OR REPLACE FUNCTION stream_event(s jsonb, event_name text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  targets jsonb := COALESCE(
    (SELECT jsonb_agg(t #- '{spec,url}') FROM jsonb_array_elements(s #> '{multistream,targets}') AS t), '[]');
BEGIN
  INSERT INTO task_events (id, task_id, owner, event, task)
  VALUES (gen_random_uuid(), (s ->> 'id')::uuid, s ->> 'owner', event_name,
    jsonb_set(s - 'stream_key' - 'stream_key_hash' - 'deleted_at', '{multistream}', jsonb_build_object('targets', targets)));
  PERFORM pg_notify('mediaplane_task_events', s ->> 'id');
END
$$
;
