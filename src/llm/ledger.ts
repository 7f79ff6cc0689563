// Balances and the ledger: all the SQL of LLM pricing in one place (as pg-boss keeps its SQL
// in plans.ts). Every statement is a single statement (CTEs, no transactions), so it is safe
// on a shared pool, from the CLI while the server runs, and atomic on its own. Amounts are
// exact decimals in SQL (numeric); JS numbers only cross in as parameters and out for display.
// The reservation in front of each priced request is the one function, ledger_reserve()
// (migration 403), so that it is planned once per process.

import { randomUUID } from 'node:crypto';
import type { ReserveStep } from '../accounts/index.ts';
import type { Queryable } from '../db/index.ts';
import { sqlParams } from '../lib/sql-params.ts';

export interface Reservation {
  id: string;
  amountUsd: number;
}

export interface LedgerEntry {
  id: string;
  createdAt: string;
  kind: 'charge' | 'credit';
  status: 'reserved' | 'settled' | 'released';
  amountUsd: number;
  model: string | null;
  requestId: string | null;
  maxTokens: number | null;
  completionTokens: number | null;
  pricePerToken: number | null;
  note: string | null;
}

/** Decimal text for a JS number without exponent surprises (8e-8 -> "0.00000008"). */
export function dec(n: number): string {
  if (!Number.isFinite(n) || n < 0) throw new RangeError(`not a non-negative amount: ${n}`);
  return n.toFixed(18).replace(/\.?0+$/, '') || '0';
}

// Key limits and usage (issue #32; accounts/ KeyLimiter): a refund goes back to the key's
// budget of the period it was counted in, and settled tokens are the key's usage of the day,
// in the same statement as the settlement.

/** The final statement: what `r` (owner, refund, key_id, budget_start) gave back returns to the key's budget. */
const KEY_SPEND_REFUND = (r: string) => `UPDATE key_spend k SET spent_usd = GREATEST(0, k.spent_usd - ${r}.refund)
       FROM ${r} WHERE k.key_id = ${r}.key_id AND k.period_start = ${r}.budget_start AND ${r}.refund > 0`;

/** The final statement: `l`'s completion_tokens added to its key's usage of the day. */
const KEY_DAY_TOKENS = (l: string) => `INSERT INTO api_key_days AS a (key_id, owner, day, tokens)
       SELECT ${l}.key_id, ${l}.owner, (now() AT TIME ZONE 'UTC')::date, ${l}.completion_tokens FROM ${l}
       WHERE ${l}.key_id IS NOT NULL AND ${l}.completion_tokens > 0
       ON CONFLICT (key_id, day) DO UPDATE SET tokens = a.tokens + EXCLUDED.tokens`;

/** After a settlement `s`: the refund to the balance and the key's budget, and the key's tokens of the day. */
const SETTLED = (s: string) => `bal AS (
         UPDATE llm_balances b SET balance_usd = b.balance_usd + ${s}.refund, updated_at = now()
         FROM ${s} WHERE b.owner = ${s}.owner AND ${s}.refund > 0),
       k AS (${KEY_SPEND_REFUND(s)})
       ${KEY_DAY_TOKENS(s)}`;

/** A charge to reserve: max_tokens x price from the owner's balance. */
export interface ReserveFor {
  owner: string;
  maxTokens: number;
  pricePerToken: number;
  model: string;
  orchestrator: string;
  requestId: string;
  /** The key the request came with (usage per key, issue #32). */
  keyId?: string | undefined;
  /** The key's budget period the charge was counted against (accounts/ KeyLimiter.hold): refunds go back to it. */
  budgetStart?: string | null | undefined;
}

/**
 * The reservation of `o`: max_tokens x price from the owner's balance, a reserved charge written
 * with it. Its `sql` is ledger_reserve() (migration 403) for this charge: the amount reserved,
 * or NULL when the balance cannot cover it; `budgetStart`, an SQL date expression for the key's
 * budget period (Ledger.reserve binds o.budgetStart).
 */
export function reserveStep(o: ReserveFor): ReserveStep {
  const id = randomUUID();
  return {
    id,
    sql: (bind, budgetStart) =>
      `ledger_reserve(${[
        bind(id, 'uuid'),
        bind(o.owner, 'text'),
        bind(o.maxTokens, 'integer'),
        bind(dec(o.pricePerToken), 'numeric'),
        bind(o.model, 'text'),
        bind(o.orchestrator, 'text'),
        bind(o.requestId, 'text'),
        bind(o.keyId ?? null, 'uuid'),
        budgetStart,
      ].join(', ')})`,
  };
}

export class Ledger {
  readonly #db: Queryable;
  constructor(db: Queryable) {
    this.#db = db;
  }

  /**
   * Takes max_tokens x price from the owner's balance and records a reserved charge; null when
   * the balance cannot cover it. A free request (price 0) needs no balance but is recorded.
   */
  async reserve(o: ReserveFor, q: Queryable = this.#db): Promise<Reservation | null> {
    const step = reserveStep(o);
    const { bind, params } = sqlParams();
    const call = step.sql(bind, bind(o.budgetStart ?? null, 'date'));
    const rows = await q.query<{ amount_usd: string | null }>(`SELECT (${call})::text AS amount_usd`, params);
    const usd = rows[0]?.amount_usd;
    return usd === null || usd === undefined ? null : { id: step.id, amountUsd: Number(usd) };
  }

  /**
   * Records a free request (price 0) as a settled zero charge in one statement: it needs no
   * balance, so nothing has to be reserved before forwarding, and the gateway writes this
   * once the answer is out instead of touching the database in front of the first token.
   */
  async recordFree(o: {
    owner: string;
    maxTokens: number;
    model: string;
    orchestrator: string;
    requestId: string;
    completionTokens: number;
    keyId?: string | undefined;
  }): Promise<void> {
    await this.#db.query(
      `WITH l AS (
         INSERT INTO llm_ledger (id, owner, kind, status, amount_usd, model, orchestrator, request_id, max_tokens, price_per_token, completion_tokens, key_id)
         VALUES ($1, $2, 'charge', 'settled', 0, $3, $4, $5, $6, 0, $7, $8::uuid)
         RETURNING owner, key_id, completion_tokens)
       ${KEY_DAY_TOKENS('l')}`,
      [randomUUID(), o.owner, o.model, o.orchestrator, o.requestId, o.maxTokens, o.completionTokens, o.keyId ?? null],
    );
  }

  /** Refunds a reservation in full (the request failed before its first token). */
  async release(id: string): Promise<void> {
    await this.#db.query(
      `WITH r AS (
         UPDATE llm_ledger SET status = 'released' WHERE id = $1 AND status = 'reserved'
         RETURNING owner, amount_usd AS refund, key_id, budget_start),
       b AS (
         UPDATE llm_balances b SET balance_usd = b.balance_usd + r.refund, updated_at = now()
         FROM r WHERE b.owner = r.owner AND r.refund > 0)
       ${KEY_SPEND_REFUND('r')}`,
      [id],
    );
  }

  /**
   * Settles a reservation: the reserved charge becomes final. With `usageBased`, it becomes the
   * actual completion tokens x price (never more than reserved) and the rest goes back to the balance.
   */
  async settle(id: string, o: { completionTokens: number; usageBased: boolean }): Promise<void> {
    await this.#db.query(
      `WITH s AS (
         UPDATE llm_ledger l SET status = 'settled', completion_tokens = $2,
           amount_usd = CASE WHEN $3::boolean THEN LEAST(old.amount_usd, ($2::integer * old.price_per_token)::numeric(30, 12)) ELSE old.amount_usd END
         FROM llm_ledger old WHERE l.id = $1 AND old.id = l.id AND l.status = 'reserved'
         RETURNING l.owner, old.amount_usd - l.amount_usd AS refund, l.key_id, l.budget_start, l.completion_tokens),
       ${SETTLED('s')}`,
      [id, o.completionTokens, o.usageBased],
    );
  }

  /**
   * Settles the reservation of a request of several parts (the prompts of a text completion,
   * issue #25) once, at the sum of each part's tokens x its orchestrator's price (never more
   * than reserved; the rest goes back to the balance). The entry keeps the price and the
   * orchestrator when every part had the same, so that amount = tokens x price can be checked;
   * it shows none where they differed.
   */
  async settleJoint(
    id: string,
    o: { completionTokens: number; parts: Array<{ tokens: number; pricePerToken: number; orchestrator: string }> },
  ): Promise<void> {
    await this.#db.query(
      `WITH p AS (
         SELECT COALESCE(sum(u.tokens * u.price), 0)::numeric(30, 12) AS usd,
           CASE WHEN count(DISTINCT u.price) = 1 THEN min(u.price) END AS price,
           CASE WHEN count(DISTINCT u.orchestrator) = 1 THEN min(u.orchestrator) END AS orchestrator
         FROM unnest($3::integer[], $4::numeric[], $5::text[]) AS u (tokens, price, orchestrator)),
       s AS (
         UPDATE llm_ledger l SET status = 'settled', completion_tokens = $2, amount_usd = LEAST(old.amount_usd, p.usd),
           price_per_token = p.price, orchestrator = p.orchestrator
         FROM llm_ledger old, p WHERE l.id = $1 AND old.id = l.id AND l.status = 'reserved'
         RETURNING l.owner, old.amount_usd - l.amount_usd AS refund, l.key_id, l.budget_start, l.completion_tokens),
       ${SETTLED('s')}`,
      [
        id,
        o.completionTokens,
        o.parts.map((p) => p.tokens),
        o.parts.map((p) => dec(p.pricePerToken)),
        o.parts.map((p) => p.orchestrator),
      ],
    );
  }

  /** Adds credit; null when the owner does not exist. */
  async credit(o: { owner: string; usd: number; note?: string }): Promise<{ balanceUsd: string } | null> {
    const rows = await this.#db.query<{ balance_usd: string | null }>(
      `WITH o AS (SELECT name FROM owners WHERE name = $1),
       b AS (
         INSERT INTO llm_balances (owner, balance_usd) SELECT name, $2::numeric FROM o
         ON CONFLICT (owner) DO UPDATE SET balance_usd = llm_balances.balance_usd + EXCLUDED.balance_usd, updated_at = now()
         RETURNING balance_usd),
       l AS (
         INSERT INTO llm_ledger (id, owner, kind, status, amount_usd, note)
         SELECT $3, name, 'credit', 'settled', $2::numeric, $4 FROM o RETURNING id)
       SELECT (SELECT balance_usd::text FROM b) AS balance_usd, (SELECT count(*) FROM l) AS n`,
      [o.owner, dec(o.usd), randomUUID(), o.note ?? null],
    );
    const bal = rows[0]?.balance_usd;
    return bal === null || bal === undefined ? null : { balanceUsd: bal };
  }

  async balance(owner: string): Promise<string> {
    const rows = await this.#db.query<{ balance_usd: string }>(
      'SELECT balance_usd::text AS balance_usd FROM llm_balances WHERE owner = $1',
      [owner],
    );
    return rows[0]?.balance_usd ?? '0';
  }

  /** The owner's credits and charges, newest first; released reservations are not charges. */
  async entries(owner: string, limit: number): Promise<LedgerEntry[]> {
    const rows = await this.#db.query<{
      id: string;
      created_at: Date | string;
      kind: 'charge' | 'credit';
      status: LedgerEntry['status'];
      amount_usd: string;
      model: string | null;
      request_id: string | null;
      max_tokens: number | null;
      completion_tokens: number | null;
      price_per_token: string | null;
      note: string | null;
    }>(
      `SELECT id, created_at, kind, status, amount_usd, model, request_id, max_tokens, completion_tokens, price_per_token, note
       FROM llm_ledger WHERE owner = $1 AND status <> 'released' ORDER BY created_at DESC, id DESC LIMIT $2`,
      [owner, limit],
    );
    return rows.map((r) => ({
      id: r.id,
      createdAt: new Date(r.created_at).toISOString(),
      kind: r.kind,
      status: r.status,
      amountUsd: Number(r.amount_usd),
      model: r.model,
      requestId: r.request_id,
      maxTokens: r.max_tokens,
      completionTokens: r.completion_tokens,
      pricePerToken: r.price_per_token === null ? null : Number(r.price_per_token),
      note: r.note,
    }));
  }
}
