// The counting side of key limits (issue #32): every statement is one atomic UPSERT ...
// RETURNING on a row per key (or per address), so every API and gateway process sharing the
// database counts in the same windows and no limit is doubled by running two. Windows are
// MEDIAPLANE_RATE_WINDOW_MS long, aligned on the epoch by the database's clock (not each
// process's). A key with no requests or tokens limit is not counted per request: its requests
// are added to api_key_days in batches (usage only), so the unlimited path costs no statement.

import type { Db, Queryable } from '../db/index.ts';
import {
  BadRequestError,
  BudgetSpentError,
  type MediaplaneError,
  RateLimitedError,
  type RateWindow,
  TooManyRequestsError,
} from '../lib/errors.ts';
import { ADMIT_SQL, AUTH_FAILED_SQL, BUDGET_SQL, FLUSH_SQL, PERIOD_START, TOKENS_SQL } from './limit-sql.ts';
import { budgetPeriodEnd, type KeyLimits, trimDecimal } from './limits.ts';

export interface LimiterOptions {
  /** MEDIAPLANE_RATE_WINDOW_MS: the length of a rate window ("per minute" is per window). */
  windowMs: number;
  /** MEDIAPLANE_AUTH_FAILURES_PER_MINUTE: bad keys answered 401 per address and window; then 429. */
  authFailuresPerWindow: number;
  /** How often the requests of keys without a window are written to api_key_days (ms). */
  flushMs?: number;
  /** A batch that could not be written (it is kept for the next). */
  onError?: (err: unknown) => void;
}

/** Who is counted: a key, its owner, its limits. */
export interface Keyed {
  keyId: string;
  owner: string;
  limits?: KeyLimits | undefined;
}

/** A key's windows after its request was let through (for the x-ratelimit-* headers). */
export interface Windows {
  requests?: RateWindow | undefined;
  tokens?: RateWindow | undefined;
}

/** Tokens taken from a key's window for one charge: what settleTokens gives back. */
export interface TokensHeld {
  windowStart: number;
  reserved: number;
}

interface WindowRow {
  now_ms: number;
  start: number;
  used: number | null;
  t_start: number | null;
  t_used: number | null;
}

/** A refusal inside a transaction: thrown to roll it back, answered after. */
class Refused extends Error {
  readonly answer: MediaplaneError | null;
  constructor(answer: MediaplaneError | null) {
    super('refused');
    this.answer = answer;
  }
}

export class KeyLimiter {
  readonly #db: Db;
  readonly #o: LimiterOptions;
  readonly #pending = new Map<string, { owner: string; requests: number }>();
  readonly #timer: NodeJS.Timeout;
  #flushing: Promise<void> = Promise.resolve();

  constructor(db: Db, opts: LimiterOptions) {
    this.#db = db;
    this.#o = opts;
    this.#timer = setInterval(() => void this.flush(), opts.flushMs ?? 1000);
    this.#timer.unref();
  }

  get windowMs(): number {
    return this.#o.windowMs;
  }

  /**
   * Counts one request of a key with a requests or tokens limit; RateLimitedError when its
   * requests in this window are used up (then it is not counted anywhere).
   */
  async admit(k: Keyed & { limits: KeyLimits }): Promise<Windows> {
    const rpm = k.limits.requestsPerMinute;
    const rows = await this.#db.query<WindowRow>(ADMIT_SQL, [k.keyId, this.#o.windowMs, rpm, k.owner]);
    const row = rows[0];
    if (!row) throw new Error('the request window answered no row');
    const resetMs = row.start + this.#o.windowMs - row.now_ms;
    const windows: Windows = {
      requests:
        rpm === null ? undefined : { limit: rpm, remaining: rpm - (row.used ?? rpm), resetMs: Math.max(1, resetMs) },
      tokens: this.#tokensWindow(k.limits, row),
    };
    if (row.used === null)
      throw new RateLimitedError(
        `rate limit reached: this key may make ${rpm} requests per ${this.#windowText()}; try again in ${Math.ceil(resetMs / 1000)} s`,
        { kind: 'requests', windows },
      );
    return windows;
  }

  /** Counts a request of a key without a window: written with others in the next batch. */
  count(k: Keyed): void {
    const p = this.#pending.get(k.keyId);
    if (p) p.requests++;
    else this.#pending.set(k.keyId, { owner: k.owner, requests: 1 });
  }

  /**
   * Takes a charge's tokens from the key's tokens window and its USD from the key's budget, and
   * runs `reserve` (the ledger's reservation) in the same transaction: all three or none. Returns
   * what was held, or the refusal (429 tokens, 402 budget; `reserve` answering null: 'balance').
   */
  async hold<R>(
    k: Keyed,
    o: {
      tokens: number;
      pricePerToken: string;
      reserve: (q: Queryable, budgetStart: string | null) => Promise<R | null>;
    },
  ): Promise<{ reserved: R; tokens: TokensHeld | undefined } | MediaplaneError | 'balance'> {
    const tpm = k.limits?.tokensPerMinute ?? null;
    const budget = Number(o.pricePerToken) > 0 ? (k.limits?.budget ?? null) : null;
    if (tpm !== null && o.tokens > tpm)
      return new BadRequestError(
        `max_tokens: this request may take ${o.tokens} tokens, more than this key's ${tpm} tokens per ${this.#windowText()}; lower max_tokens (or n)`,
        { param: 'max_tokens' },
      );
    try {
      return await this.#db.tx(async (q) => {
        const tokens = tpm === null ? undefined : await this.#takeTokens(q, k, { tokens: o.tokens, limit: tpm });
        let budgetStart: string | null = null;
        if (budget) {
          const rows = await q.query<{ start: string; spent: string | null; usd: string }>(BUDGET_SQL, [
            k.keyId,
            budget.usd,
            o.tokens,
            o.pricePerToken,
            budget.period,
          ]);
          const row = rows[0];
          if (!row?.spent)
            throw new Refused(budgetSpent(budget, row && { request: row.usd, spent: await spentNow(q, k) }));
          budgetStart = row.start;
        }
        const reserved = await o.reserve(q, budgetStart);
        if (reserved === null) throw new Refused(null);
        return { reserved, tokens };
      });
    } catch (err) {
      if (err instanceof Refused) return err.answer ?? 'balance';
      throw err;
    }
  }

  async #takeTokens(q: Queryable, k: Keyed, o: { tokens: number; limit: number }): Promise<TokensHeld> {
    const rows = await q.query<WindowRow>(TOKENS_SQL, [k.keyId, this.#o.windowMs, o.tokens, o.limit]);
    const row = rows[0];
    if (!row) throw new Error('the tokens window answered no row');
    if (row.used !== null) return { windowStart: row.start, reserved: o.tokens };
    // The statement's own reading of the window predates the lock it waited for: read it again.
    const [now] = await q.query<{ t_start: number; t_used: number }>(
      `SELECT window_start::float8 AS t_start, used::float8 AS t_used FROM key_windows WHERE key_id = $1::uuid AND kind = 'tokens'`,
      [k.keyId],
    );
    const tokens = this.#tokensWindow(k.limits, { ...row, t_start: now?.t_start ?? null, t_used: now?.t_used ?? null });
    throw new Refused(
      new RateLimitedError(
        `rate limit reached: this key may use ${o.limit} tokens per ${this.#windowText()} and has ${tokens?.remaining ?? 0} left; this request may take ${o.tokens} (max_tokens x n)`,
        { kind: 'tokens', windows: { tokens } },
      ),
    );
  }

  /** Gives back the tokens a charge held but did not use (only within the same window). */
  async settleTokens(keyId: string, held: TokensHeld, used: number): Promise<void> {
    const unused = held.reserved - Math.min(used, held.reserved);
    if (unused <= 0) return;
    await this.#db.query(
      `UPDATE key_windows SET used = GREATEST(0, used - $3::bigint)
       WHERE key_id = $1::uuid AND kind = 'tokens' AND window_start = $2::bigint`,
      [keyId, held.windowStart, unused],
    );
  }

  /**
   * The refusal of new transcoding work for a key whose budget is spent (the task API answers
   * it 429), or undefined. Reads the key's spend only when it has a budget.
   */
  async budgetRefusal(k: Keyed): Promise<BudgetSpentError | undefined> {
    const budget = k.limits?.budget;
    if (!budget) return undefined;
    const rows = await this.#db.query<{ spent: boolean }>(
      `SELECT spent_usd >= $2::numeric AS spent FROM key_spend WHERE key_id = $1::uuid AND period_start = ${PERIOD_START('$3')}`,
      [k.keyId, budget.usd, budget.period],
    );
    return rows[0]?.spent ? budgetSpent(budget) : undefined;
  }

  /**
   * Runs `create` (which writes a task and counts the key's live ones in the same statement)
   * holding the key's lock when it has a concurrent-transcodes limit, so that processes
   * creating tasks for one key take turns and the count is exact.
   */
  async withTaskSlot<T>(k: Keyed, create: (q: Queryable) => Promise<T>): Promise<T> {
    if (!k.limits?.concurrentTranscodes) return create(this.#db);
    return this.#db.tx(async (q) => {
      await q.query('SELECT pg_advisory_xact_lock(400, hashtext($1::text))', [k.keyId]);
      return create(q);
    });
  }

  /**
   * One more bad key from `address`: the 429 to answer once the address has had its
   * MEDIAPLANE_AUTH_FAILURES_PER_MINUTE in this window, else undefined (answer 401).
   */
  async authFailed(address: string): Promise<TooManyRequestsError | undefined> {
    const rows = await this.#db.query<{ failures: number; now_ms: number; start: number }>(AUTH_FAILED_SQL, [
      address,
      this.#o.windowMs,
    ]);
    const row = rows[0];
    if (!row || row.failures <= this.#o.authFailuresPerWindow) return undefined;
    return new TooManyRequestsError(
      `too many requests with a bad API key from this address; try again in ${Math.ceil((row.start + this.#o.windowMs - row.now_ms) / 1000)} s`,
      { retryAfterMs: row.start + this.#o.windowMs - row.now_ms },
    );
  }

  /** Writes the batched request counts (one statement for all keys). */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(() => this.#flushNow());
    return this.#flushing;
  }

  async #flushNow(): Promise<void> {
    if (this.#pending.size === 0) return;
    const batch = [...this.#pending];
    this.#pending.clear();
    try {
      await this.#db.query(FLUSH_SQL, [
        batch.map(([id]) => id),
        batch.map(([, p]) => p.owner),
        batch.map(([, p]) => p.requests),
      ]);
    } catch (err) {
      for (const [id, p] of batch) {
        const now = this.#pending.get(id);
        if (now) now.requests += p.requests;
        else this.#pending.set(id, p);
      }
      this.#o.onError?.(err);
    }
  }

  /** Stops the batch timer and writes what is left. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
  }

  #tokensWindow(limits: KeyLimits | undefined, row: WindowRow): RateWindow | undefined {
    const tpm = limits?.tokensPerMinute ?? null;
    if (tpm === null) return undefined;
    const used = row.t_start === row.start ? (row.t_used ?? 0) : 0;
    return {
      limit: tpm,
      remaining: Math.max(0, tpm - used),
      resetMs: Math.max(1, row.start + this.#o.windowMs - row.now_ms),
    };
  }

  #windowText(): string {
    const ms = this.#o.windowMs;
    return ms === 60_000 ? 'minute' : `${ms / 1000} s (MEDIAPLANE_RATE_WINDOW_MS)`;
  }
}

/** What the key has spent in its current period (the refusal's figure, read after the lock it waited for). */
async function spentNow(q: Queryable, k: Keyed): Promise<string> {
  const budget = k.limits?.budget;
  if (!budget) return '0';
  const rows = await q.query<{ spent: string }>(
    `SELECT spent_usd::text AS spent FROM key_spend WHERE key_id = $1::uuid AND period_start = ${PERIOD_START('$2')}`,
    [k.keyId, budget.period],
  );
  return rows[0]?.spent ?? '0';
}

/** The refusal naming the key's budget; `charge`: the request that would pass it, and what was spent before. */
function budgetSpent(
  budget: NonNullable<KeyLimits['budget']>,
  charge?: { request: string; spent: string },
): BudgetSpentError {
  const end = budgetPeriodEnd(budget.period, Date.now());
  const per = budget.period === 'total' ? '' : ` per ${budget.period}`;
  const again = end === undefined ? '' : `; it starts again at ${new Date(end).toISOString()}`;
  const why = charge
    ? `this request (up to ${trimDecimal(charge.request)} USD) would pass this key's budget of ${budget.usd} USD${per} (${trimDecimal(charge.spent)} USD spent)`
    : `this key's budget of ${budget.usd} USD${per} is used up`;
  return new BudgetSpentError(`budget exceeded: ${why}${again}`, {
    retryAfterMs: end === undefined ? undefined : end - Date.now(),
  });
}

/** The limiter of a service process from its settings (MEDIAPLANE_RATE_WINDOW_MS, MEDIAPLANE_AUTH_FAILURES_PER_MINUTE). */
export function keyLimiter(
  db: Db,
  settings: { rateWindowMs: number; authFailuresPerMinute: number },
  log: { warn(o: object, msg: string): void },
): KeyLimiter {
  return new KeyLimiter(db, {
    windowMs: settings.rateWindowMs,
    authFailuresPerWindow: settings.authFailuresPerMinute,
    onError: (err) => log.warn({ err }, 'could not write API key usage counts; kept for the next batch'),
  });
}
