-- What an unfinished upload holds of its owner's allowance of staged bytes
-- (MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER): the length a tus upload declared at creation,
-- the Content-Length of a direct PUT, or what a streamed PUT has taken so far (it grows in
-- steps). Written only by AssetStore.stage and unstage (src/assets/store.ts), under the
-- owner's advisory lock, so two processes never both take the last of the allowance. An
-- upload stops counting once it finishes, its asset leaves `uploading` (deleted, failed) or
-- the expiry sweep deletes its row. Uploads staged before this migration count as 0.
ALTER TABLE asset_uploads ADD COLUMN staged_bytes bigint NOT NULL DEFAULT 0
;
-- The owner's uploads in progress, summed on every reservation.
CREATE INDEX assets_uploading ON assets (owner) WHERE phase = 'uploading'
;
