-- Idempotency-Key on POST /api/transcode and POST /api/webhook (issue #18, api/idempotency.ts):
-- one row per (owner, route, key). A request claims its key by inserting the row (claim set,
-- status NULL) before it does its work, and stores its answer (status + JSON body) once it
-- succeeds; a failed request deletes its claim. Rows older than 24 h are ignored and replaced
-- by the next request with the key, and purged a batch at a time.
CREATE TABLE idempotency_keys (
  owner text NOT NULL,
  route text NOT NULL,
  key text NOT NULL,
  -- SHA-256 (hex) of the request body in canonical JSON: the same key with another body is a 422.
  body_hash text NOT NULL,
  -- The request that holds the key while its work is in flight.
  claim uuid NOT NULL,
  -- The first answer, NULL while it is in flight.
  status integer,
  response jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (owner, route, key)
)
;
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)
;
