-- When a split task's early outputs first held every rendition and the audio (the HLS trees'
-- EVENT playlists: transcode/chunked/publish.ts), so its master plays before the last piece
-- ends. Set once on the parent by its pieces (src/tasks/pieces.ts markPlayable), NULL until
-- then and again after a retry (the split runs again). GET /api/task/{id} and GET
-- /api/asset/{id} show it as `playableAt`.
ALTER TABLE tasks ADD COLUMN playable_at timestamptz
;
-- An asset event carries the mark of its task (AssetRow's playable_at), as it carries its progress.
CREATE OR REPLACE FUNCTION asset_event(asset_id uuid, event_name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO task_events (id, task_id, owner, event, task)
  SELECT gen_random_uuid(), a.id, a.owner, event_name,
    (to_jsonb(a) - 'deleted_at') || jsonb_build_object(
      'progress', CASE WHEN a.phase = 'processing' THEN t.progress END, 'playable_at', t.playable_at)
  FROM assets a LEFT JOIN tasks t ON t.id = a.task_id WHERE a.id = asset_id;
  PERFORM pg_notify('mediaplane_task_events', asset_id::text);
END
$$
;
-- A processing asset whose task became playable says so (`asset.updated`), in the mark's own
-- statement, as the trigger of migration 010 moves an asset with its task's phase.
CREATE FUNCTION asset_playable() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  moved uuid;
BEGIN
  FOR moved IN
    UPDATE assets SET updated_at = now() WHERE task_id = NEW.id AND phase = 'processing' RETURNING id
  LOOP
    PERFORM asset_event(moved, 'asset.updated');
  END LOOP;
  RETURN NULL;
END
$$
;
CREATE TRIGGER tasks_playable_assets AFTER UPDATE OF playable_at ON tasks
  FOR EACH ROW WHEN (NEW.type IN ('upload', 'clip') AND OLD.playable_at IS NULL AND NEW.playable_at IS NOT NULL)
  EXECUTE FUNCTION asset_playable()
;
