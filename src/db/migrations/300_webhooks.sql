-- Webhooks (issue #18): an owner's subscriptions, one delivery per (task event x webhook),
-- and one log row per attempt. Deliveries are a queue like tasks: a process claims due ones
-- with a lease (FOR UPDATE SKIP LOCKED), so several share the work and a killed one's
-- claims are taken over once their lease runs out (at least once; receivers drop duplicates
-- by the event id).
CREATE TABLE webhooks (
  id uuid PRIMARY KEY,
  owner text NOT NULL REFERENCES owners(name),
  project_id uuid NOT NULL,
  name text NOT NULL,
  url text NOT NULL,
  events text[] NOT NULL,
  -- signs deliveries (Livepeer-Signature); never read back out by the store, never logged
  shared_secret text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz,
  last_triggered_at timestamptz,
  -- {timestamp (ms), statusCode?, error?, response?} of the last failed attempt
  last_failure jsonb
)
;
CREATE INDEX webhooks_by_owner ON webhooks (owner, created_at DESC, id DESC) WHERE deleted_at IS NULL
;
CREATE TABLE webhook_deliveries (
  id uuid PRIMARY KEY,
  webhook_id uuid NOT NULL REFERENCES webhooks(id),
  event_id uuid NOT NULL REFERENCES task_events(id),
  status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  -- claims so far; a claim's number is also its token: only the latest claim writes the outcome
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  lease_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  UNIQUE (event_id, webhook_id)
)
;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'
;
CREATE TABLE webhook_logs (
  id uuid PRIMARY KEY,
  webhook_id uuid NOT NULL REFERENCES webhooks(id),
  delivery_id uuid REFERENCES webhook_deliveries(id),
  event_id uuid NOT NULL,
  event text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  duration_ms double precision NOT NULL,
  url text NOT NULL,
  request_body text NOT NULL,
  -- the headers as sent: the signature is there, the secret never is
  request_headers jsonb NOT NULL,
  status_code integer,
  status_text text,
  error text,
  -- the first KB of the answer
  response_body text,
  success boolean NOT NULL
)
;
CREATE INDEX webhook_logs_by_webhook ON webhook_logs (webhook_id, created_at DESC, id DESC)
;
