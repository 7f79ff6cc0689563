-- Owners (tenants), their API keys, and tasks. A task row is also its queue job: one row
-- holds the phase the client sees and the lease the workers use, so they cannot disagree.
CREATE TABLE owners (
  name text PRIMARY KEY,
  project_id uuid NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
)
;
CREATE TABLE api_keys (
  id uuid PRIMARY KEY,
  owner text NOT NULL REFERENCES owners(name),
  -- sha256 of the key: keys are 192 random bits, so a fast hash is enough and lookups stay O(1)
  key_hash text NOT NULL UNIQUE,
  prefix text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
)
;
CREATE TABLE tasks (
  id uuid PRIMARY KEY,
  owner text NOT NULL REFERENCES owners(name),
  project_id uuid NOT NULL,
  type text NOT NULL,
  phase text NOT NULL CHECK (phase IN ('pending', 'waiting', 'running', 'completed', 'failed', 'cancelled')),
  -- the request as sent, credentials included: redacted at the boundary, never returned
  params jsonb NOT NULL,
  requester_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  scheduled_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now(),
  progress double precision,
  error_message text,
  retries integer NOT NULL DEFAULT 0,
  output jsonb,
  -- queue state
  run_at timestamptz NOT NULL DEFAULT now(),
  lease_owner text,
  lease_until timestamptz,
  attempts integer NOT NULL DEFAULT 0
)
;
CREATE INDEX tasks_claimable ON tasks (run_at) WHERE phase = 'waiting'
;
CREATE INDEX tasks_leased ON tasks (lease_until) WHERE phase = 'running'
;
CREATE INDEX tasks_by_owner ON tasks (owner, created_at DESC, id DESC)
;
