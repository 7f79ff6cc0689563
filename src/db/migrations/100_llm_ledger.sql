-- LLM credits: one balance per owner and a ledger of every credit and charge. A charge is
-- 'reserved' (max_tokens x price, taken from the balance before forwarding), then 'settled'
-- (kept; reduced to the actual tokens under usage-based settlement) or 'released' (refunded:
-- the request failed before its first token).
CREATE TABLE llm_balances (
  owner text PRIMARY KEY REFERENCES owners(name),
  balance_usd numeric(30, 12) NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now()
)
;
CREATE TABLE llm_ledger (
  id uuid PRIMARY KEY,
  owner text NOT NULL REFERENCES owners(name),
  created_at timestamptz NOT NULL DEFAULT now(),
  kind text NOT NULL CHECK (kind IN ('charge', 'credit')),
  status text NOT NULL CHECK (status IN ('reserved', 'settled', 'released')),
  amount_usd numeric(30, 12) NOT NULL CHECK (amount_usd >= 0),
  model text,
  orchestrator text,
  request_id text,
  max_tokens integer,
  completion_tokens integer,
  price_per_token numeric(30, 18),
  note text
)
;
CREATE INDEX llm_ledger_by_owner ON llm_ledger (owner, created_at DESC, id DESC)
;
