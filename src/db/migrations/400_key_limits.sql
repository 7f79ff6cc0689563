-- Key limits (issue #32; the SQL is in src/limits/sql.ts). A key's own settings override its
-- owner's defaults column by column: NULL on a key means "the owner's default", 0 on a key
-- means "no limit here" (it lifts an owner default); NULL on the owner means no default.
-- The window is MEDIAPLANE_RATE_WINDOW_MS long (a minute unless set), aligned on the epoch
-- of the database's clock, so every API and gateway process counts in the same windows.
ALTER TABLE api_keys
  ADD COLUMN requests_per_minute integer CHECK (requests_per_minute >= 0),
  ADD COLUMN tokens_per_minute integer CHECK (tokens_per_minute >= 0),
  ADD COLUMN concurrent_transcodes integer CHECK (concurrent_transcodes >= 0),
  ADD COLUMN budget_usd numeric(30, 12) CHECK (budget_usd >= 0),
  -- the budget's period: a calendar day or month (UTC), or 'total' for the key's whole life
  ADD COLUMN budget_period text CHECK (budget_period IN ('day', 'month', 'total')),
  -- the models the key may use (exact ids); NULL: the owner's list, or every model
  ADD COLUMN models text[],
  ADD COLUMN expires_at timestamptz
;
CREATE TABLE owner_limits (
  owner text PRIMARY KEY REFERENCES owners(name),
  requests_per_minute integer CHECK (requests_per_minute > 0),
  tokens_per_minute integer CHECK (tokens_per_minute > 0),
  concurrent_transcodes integer CHECK (concurrent_transcodes > 0),
  budget_usd numeric(30, 12) CHECK (budget_usd > 0),
  budget_period text CHECK (budget_period IN ('day', 'month', 'total')),
  models text[],
  updated_at timestamptz NOT NULL DEFAULT now()
)
;
-- One row per key and kind; window_start (ms since the epoch) rolls forward and `used` starts
-- again at each new window. One UPSERT ... RETURNING counts and refuses at once.
CREATE TABLE key_windows (
  key_id uuid NOT NULL REFERENCES api_keys(id),
  kind text NOT NULL CHECK (kind IN ('requests', 'tokens')),
  window_start bigint NOT NULL,
  used bigint NOT NULL,
  PRIMARY KEY (key_id, kind)
)
;
-- Usage per key and UTC day: requests the limiter let through (a request it refused is not
-- counted), and tokens billed (max_tokens on admission, settled to those used). Written in
-- the same statement as the request window for limited keys; in batches for the others.
CREATE TABLE api_key_days (
  key_id uuid NOT NULL REFERENCES api_keys(id),
  owner text NOT NULL REFERENCES owners(name),
  day date NOT NULL,
  requests bigint NOT NULL DEFAULT 0,
  tokens bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (key_id, day)
)
;
CREATE INDEX api_key_days_by_owner ON api_key_days (owner, day)
;
-- What a budgeted key has spent in its current period (period_start: the UTC day or month's
-- first day; 1970-01-01 for 'total'). Reserved with the ledger's charge, given back with it.
CREATE TABLE key_spend (
  key_id uuid PRIMARY KEY REFERENCES api_keys(id),
  period_start date NOT NULL,
  spent_usd numeric(30, 12) NOT NULL DEFAULT 0
)
;
-- Which key a charge was made with (usage per key), and the budget period it counted against.
ALTER TABLE llm_ledger
  ADD COLUMN key_id uuid,
  ADD COLUMN budget_start date
;
CREATE INDEX llm_ledger_by_key ON llm_ledger (key_id, created_at) WHERE key_id IS NOT NULL
;
-- Which key created a task (usage per key, concurrent transcodes per key).
ALTER TABLE tasks ADD COLUMN key_id uuid
;
CREATE INDEX tasks_live_by_key ON tasks (key_id) WHERE key_id IS NOT NULL AND phase IN ('pending', 'waiting', 'running')
;
-- Failed authentications per client address and window (brute force, MEDIAPLANE_AUTH_FAILURES_PER_MINUTE).
CREATE TABLE auth_failures (
  address text PRIMARY KEY,
  window_start bigint NOT NULL,
  failures integer NOT NULL
)
;
