-- Signing keys for private playback (issue #28, spec/API.md section C): Livepeer's
-- /api/access-control/signing-key routes. A key is an ES256 (P-256) pair; only the public half
-- is kept, as Livepeer shows it (base64 of its SPKI PEM). The private half is answered once at
-- creation and never written anywhere, so a database dump signs no token. A viewer's JWT names
-- its key by that public key (its `pub` claim), so each playback request looks it up by it:
-- the UNIQUE index is that lookup. Deleting is soft (deleted_at): a token of a deleted key is
-- refused with its own reason, and the key keeps its place in the owner's history. The
-- store's SQL is in src/access/signing-keys.ts.
CREATE TABLE signing_keys (
  id uuid PRIMARY KEY,
  owner text NOT NULL REFERENCES owners(name),
  project_id uuid NOT NULL,
  name text NOT NULL,
  public_key text NOT NULL UNIQUE,
  disabled boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- when a token of the key last opened a playback (written at most once a minute a process)
  last_seen timestamptz,
  deleted_at timestamptz
)
;
-- GET /api/access-control/signing-key pages newest first by (created_at, id); deleted keys are gone from it.
CREATE INDEX signing_keys_by_owner ON signing_keys (owner, created_at DESC, id DESC) WHERE deleted_at IS NULL
