-- What an unfinished upload holds of its owner's allowance of staged bytes
-- (MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER): the length a tus upload declared at creation,
-- the Content-Length of a direct PUT, or what a streamed PUT has taken so far (it grows in
-- steps). Written only by AssetStore.stage and unstage (src/assets/store.ts), under the
-- owner's advisory lock, so two processes never both take the last of the allowance. An
-- upload holds it until it finishes, its staged bytes are freed (unstage: terminated, refused,
-- or its asset deleted or failed, which the staging sweep of the process holding the bytes
-- notices), or the expiry sweep deletes its row. Uploads staged before this migration hold 0.
ALTER TABLE asset_uploads ADD COLUMN staged_bytes bigint NOT NULL DEFAULT 0
;
-- The asset's owner, copied here so that an owner's unfinished uploads are found by one index,
-- whatever their asset's phase (a deleted asset's bytes count until they are freed).
ALTER TABLE asset_uploads ADD COLUMN owner text
;
UPDATE asset_uploads u SET owner = a.owner FROM assets a WHERE a.id = u.asset_id
;
ALTER TABLE asset_uploads ALTER COLUMN owner SET NOT NULL
;
CREATE INDEX asset_uploads_staged_by_owner ON asset_uploads (owner) WHERE finished_at IS NULL
;
