-- A charge's reservation (llm/ledger.ts reserveStep): max_tokens x price taken from the owner's
-- balance and a reserved charge written with it; NULL (and nothing written) when the balance
-- cannot cover it. A free charge (price 0) needs no balance and is written all the same. The
-- amount reserved is returned. In a function so that each process plans these statements once
-- (PL/pgSQL keeps its plans): on the embedded database, planning them as CTEs of each request's
-- statement cost more than running them, in front of every priced request's first token. The
-- UPDATE re-checks the balance on the row it locked, so concurrent reservations never overdraw.
CREATE FUNCTION ledger_reserve(
  charge_id uuid, charge_owner text, charge_max_tokens integer, price numeric, charge_model text,
  charge_orchestrator text, charge_request_id text, charge_key uuid, charge_budget_start date)
RETURNS numeric LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  usd numeric(30, 12) := (charge_max_tokens * price)::numeric(30, 12);
BEGIN
  IF usd > 0 THEN
    UPDATE llm_balances b SET balance_usd = b.balance_usd - usd, updated_at = now()
    WHERE b.owner = charge_owner AND b.balance_usd >= usd;
    IF NOT FOUND THEN RETURN NULL; END IF;
  END IF;
  INSERT INTO llm_ledger (id, owner, kind, status, amount_usd, model, orchestrator, request_id, max_tokens,
    price_per_token, key_id, budget_start)
  VALUES (charge_id, charge_owner, 'charge', 'reserved', usd, charge_model, charge_orchestrator, charge_request_id,
    charge_max_tokens, price, charge_key, charge_budget_start);
  RETURN usd;
END $$
;
