-- An asset's IPFS export (issue #28, spec/API.md section C): `storage` is Livepeer's
-- `asset.storage`, {ipfs?: {cid, url, gatewayUrl, nftMetadata?, spec, updatedAt}, status:
-- {phase, errorMessage?, tasks: {pending?, last?, failed?}}}, kept in the shape the API shows.
-- It follows the asset's `export` tasks that go to IPFS through the trigger below, as the asset
-- follows its making task in migration 010: every way such a task changes (created, claimed,
-- failed, retried, cancelled, a lease taken back) moves `storage` in the same statement, with an
-- `asset.updated` event in the outbox. An export to a custom URL leaves `storage` alone, as on
-- Livepeer. The handler is src/assets/export.ts; the task's params name the asset (`assetId`).
ALTER TABLE assets ADD COLUMN storage jsonb
;
-- The newest run of an export is the one the asset waits for (`tasks.pending`): created or
-- retried, it becomes pending; only the pending one may end the wait. Done: its output
-- ({ipfs: {cid, url, gatewayUrl, nftMetadata?}}) becomes `storage.ipfs`. Failed or cancelled:
-- the earlier export, if any, stands (`reverted`, Livepeer's word), else `failed`.
CREATE FUNCTION asset_storage_follows_export() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  target uuid := (NEW.params ->> 'assetId')::uuid;
  moved uuid;
BEGIN
  FOR moved IN
    UPDATE assets SET updated_at = now(), storage = CASE
      WHEN NEW.phase IN ('pending', 'waiting', 'running') THEN
        COALESCE(storage, '{}'::jsonb) || jsonb_build_object('status', jsonb_build_object(
          'phase', CASE NEW.phase WHEN 'running' THEN 'processing' ELSE 'waiting' END,
          'tasks', jsonb_strip_nulls(jsonb_build_object('pending', NEW.id, 'last', storage #> '{status,tasks,last}'))))
      WHEN NEW.phase = 'completed' THEN
        jsonb_build_object(
          'ipfs', COALESCE(NEW.output -> 'ipfs', '{}'::jsonb) || jsonb_build_object(
            'spec', COALESCE((NEW.params -> 'ipfs') - 'credentials', '{}'::jsonb),
            'updatedAt', (extract(epoch FROM now()) * 1000)::bigint),
          'status', jsonb_build_object('phase', 'ready', 'tasks', jsonb_build_object('last', NEW.id)))
      ELSE
        storage || jsonb_build_object('status', jsonb_build_object(
          'phase', CASE WHEN storage #> '{status,tasks,last}' IS NULL THEN 'failed' ELSE 'reverted' END,
          'errorMessage', COALESCE(NEW.error_message, 'the export was cancelled'),
          'tasks', jsonb_strip_nulls(jsonb_build_object('last', storage #> '{status,tasks,last}', 'failed', NEW.id))))
      END
    WHERE id = target AND phase NOT IN ('deleting', 'deleted')
      AND (NEW.phase IN ('pending', 'waiting', 'running') OR storage #>> '{status,tasks,pending}' = NEW.id::text)
    RETURNING id
  LOOP
    PERFORM asset_event(moved, 'asset.updated');
  END LOOP;
  RETURN NULL;
END
$$
;
-- Only exports to IPFS, when created and on real phase changes (progress writes do not name
-- `phase`). Two triggers: an INSERT trigger's WHEN cannot name OLD.
CREATE TRIGGER tasks_start_asset_storage AFTER INSERT ON tasks
  FOR EACH ROW WHEN (NEW.type = 'export' AND NEW.params -> 'ipfs' IS NOT NULL)
  EXECUTE FUNCTION asset_storage_follows_export()
;
CREATE TRIGGER tasks_move_asset_storage AFTER UPDATE OF phase ON tasks
  FOR EACH ROW WHEN (NEW.type = 'export' AND NEW.params -> 'ipfs' IS NOT NULL AND OLD.phase IS DISTINCT FROM NEW.phase)
  EXECUTE FUNCTION asset_storage_follows_export()
;
