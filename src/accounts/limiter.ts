// The counting side of key limits (issue #32): every statement is one atomic UPSERT ...
// RETURNING on a row per key (or per address), so every API and gateway process sharing the
// database counts in the same windows and no limit is doubled by running two. Windows are
// MEDIAPLANE_RATE_WINDOW_MS long, aligned on the epoch by the database's clock (not each
// process's). A key with no requests or tokens limit is not counted per request: its requests
// are added to api_key_days in batches (usage only), so the unlimited path costs no statement.

import type { Db, Queryable } from '../db/index.ts';
import type { Bind } from '../lib/sql-params.ts';
import {
  BadRequestError,
  type MediaplaneError,
  RateLimitedError,
  type RateWindow,
  TooManyRequestsError,
} from '../lib/errors.ts';
import {
  AUTH_FAILED_SQL,
  FLUSH_SQL,
  GIVE_BACK_SQL,
  type HoldRow,
  type HoldSteps,
  holdSql,
  PERIOD_START,
} from './limit-sql.ts';
import { budgetSpent, type KeyLimits, requestsRefused, windowText } from './limits.ts';

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
  /** Set when the route counts the request itself, in the statement that charges it (the LLM routes). */
  deferred?: DeferredCount | undefined;
}

/**
 * A request of a key with a requests or tokens limit whose count the auth step left to the
 * route (issue #32): the LLM routes count it in the one statement that holds its charge
 * (KeyLimiter.hold), so a limited key's request costs one round trip before its first token.
 * `done` once counted; `counted` hears the windows (the x-ratelimit-* headers).
 */
export interface DeferredCount {
  done: boolean;
  counted?: ((windows: Windows) => void) | undefined;
}

/** The ledger's reservation, written by the hold statement (llm/ledger.ts reserveStep): its charge's id and its call. */
export interface ReserveStep {
  id: string;
  sql(bind: Bind, budgetStart: string): string;
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

/** What a hold took: the ledger's reservation (when it wrote one), the key's tokens, its windows. */
export interface Held {
  reserved: { id: string; amountUsd: number } | undefined;
  tokens: TokensHeld | undefined;
  windows: Windows;
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
   * requests in this window are used up (then it is not counted anywhere). `refuse` false:
   * counted whatever the limit (a deferred request that ended before its charge).
   */
  async admit(k: Keyed & { limits: KeyLimits }, o: { refuse?: boolean } = {}): Promise<Windows> {
    const rpm = k.limits.requestsPerMinute;
    const row = await this.#run({
      keyId: k.keyId,
      owner: k.owner,
      windowMs: this.#o.windowMs,
      requests: { limit: o.refuse === false ? null : rpm },
      tokens: k.limits.tokensPerMinute === null ? undefined : { take: null, limit: k.limits.tokensPerMinute },
    });
    const windows = this.#windowsOf(k.limits, row, true);
    if (row.used === null) throw this.#requestsRefused(rpm, windows, row);
    return windows;
  }

  /** Counts a deferred request that never reached its charge (a refusal before it), once; no refusal. */
  async countDeferred(k: Keyed): Promise<void> {
    if (!k.deferred || k.deferred.done || !k.limits) return;
    k.deferred.done = true;
    await this.admit({ ...k, limits: k.limits }, { refuse: false });
  }

  async #run(steps: HoldSteps): Promise<HoldRow> {
    const { sql, params } = holdSql(steps);
    const row = (await this.#db.query<HoldRow>(sql, params))[0];
    if (!row) throw new Error('the key limits statement answered no row');
    return row;
  }

  /** The key's windows from a hold's row (requests: only when this request was counted in it). */
  #windowsOf(limits: KeyLimits | undefined, row: HoldRow, counted: boolean): Windows {
    const rpm = limits?.requestsPerMinute ?? null;
    const resetMs = Math.max(1, row.start + this.#o.windowMs - row.now_ms);
    const tpm = limits?.tokensPerMinute ?? null;
    const tokensUsed = row.t_took ?? (row.t_start === row.start ? (row.t_used ?? 0) : 0);
    return {
      requests: rpm === null || !counted ? undefined : { limit: rpm, remaining: rpm - (row.used ?? rpm), resetMs },
      tokens: tpm === null ? undefined : { limit: tpm, remaining: Math.max(0, tpm - tokensUsed), resetMs },
    };
  }

  #requestsRefused(rpm: number | null, windows: Windows, row: { start: number; now_ms: number }): RateLimitedError {
    const resetMs = row.start + this.#o.windowMs - row.now_ms;
    return requestsRefused({ rpm, windowMs: this.#o.windowMs, resetMs, windows });
  }

  /** Counts a request of a key without a window: written with others in the next batch. */
  count(k: Keyed): void {
    const p = this.#pending.get(k.keyId);
    if (p) p.requests++;
    else this.#pending.set(k.keyId, { owner: k.owner, requests: 1 });
  }

  /**
   * Counts the request (when its count was deferred to here), takes a charge's tokens from the
   * key's tokens window and its USD from the key's budget, and writes `reserve` (the ledger's
   * reservation) in ONE statement: each step only if the ones before it succeeded. Returns what
   * was held, or the refusal (429 requests or tokens, 402 budget; no reservation: 'balance'),
   * with what the steps before it took given back (a counted request stays counted).
   */
  async hold(
    k: Keyed,
    o: { tokens: number; pricePerToken: string; reserve?: ReserveStep | undefined },
  ): Promise<Held | MediaplaneError | 'balance'> {
    const tpm = k.limits?.tokensPerMinute ?? null;
    const budget = Number(o.pricePerToken) > 0 ? (k.limits?.budget ?? null) : null;
    if (tpm !== null && o.tokens > tpm)
      return new BadRequestError(
        `max_tokens: this request may take ${o.tokens} tokens, more than this key's ${tpm} tokens per ${this.#windowText()}; lower max_tokens (or n)`,
        { param: 'max_tokens' },
      );
    const count = k.deferred !== undefined && !k.deferred.done;
    const row = await this.#run({
      keyId: k.keyId,
      owner: k.owner,
      windowMs: this.#o.windowMs,
      requests: count ? { limit: k.limits?.requestsPerMinute ?? null } : undefined,
      tokens: tpm === null ? undefined : { take: o.tokens, limit: tpm },
      budget: budget ? { ...budget, tokens: o.tokens, pricePerToken: o.pricePerToken } : undefined,
      reserve: o.reserve,
    });
    // Counted once its statement ran: one that failed leaves the count to countDeferred.
    if (count && k.deferred) k.deferred.done = true;
    const windows = this.#windowsOf(k.limits, row, count);
    if (count) k.deferred?.counted?.(windows);
    if (count && row.used === null) return this.#requestsRefused(k.limits?.requestsPerMinute ?? null, windows, row);
    if (tpm !== null && row.t_took === null) return this.#tokensRefused(k, { tokens: o.tokens, limit: tpm }, windows);
    const tokens = tpm === null ? undefined : { windowStart: row.start, reserved: o.tokens };
    if (budget && row.spent === null) {
      await this.#giveBack(k, tokens);
      return budgetSpent(budget, { request: row.usd ?? '0', spent: await spentNow(this.#db, k) });
    }
    if (o.reserve && row.res_usd === null) {
      await this.#giveBack(k, tokens, budget ? { start: row.budget_start, usd: row.usd } : undefined);
      return 'balance';
    }
    const reserved =
      o.reserve && row.res_usd !== null ? { id: o.reserve.id, amountUsd: Number(row.res_usd) } : undefined;
    return { reserved, tokens, windows };
  }

  /** The refusal of a charge past the tokens window (read again: the statement's reading predates its wait). */
  async #tokensRefused(k: Keyed, o: { tokens: number; limit: number }, windows: Windows): Promise<RateLimitedError> {
    const [now] = await this.#db.query<{ start: number; used: number; now_ms: number }>(
      `SELECT window_start::float8 AS start, used::float8 AS used,
         (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now_ms
       FROM key_windows WHERE key_id = $1::uuid AND kind = 'tokens'`,
      [k.keyId],
    );
    const current = now && now.start + this.#o.windowMs > now.now_ms ? now.used : 0;
    const tokens = windows.tokens && { ...windows.tokens, remaining: Math.max(0, o.limit - current) };
    return new RateLimitedError(
      `rate limit reached: this key may use ${o.limit} tokens per ${this.#windowText()} and has ${tokens?.remaining ?? 0} left; this request may take ${o.tokens} (max_tokens x n)`,
      { kind: 'tokens', windows: { ...windows, tokens } },
    );
  }

  /** Gives back what a refused charge's earlier steps took: its tokens, its USD. */
  async #giveBack(
    k: Keyed,
    tokens: TokensHeld | undefined,
    usd?: { start: string | null; usd: string | null },
  ): Promise<void> {
    if (!tokens && !usd) return;
    await this.#db.query(GIVE_BACK_SQL, [
      k.keyId,
      tokens?.windowStart ?? 0,
      tokens?.reserved ?? 0,
      usd?.start ?? null,
      usd?.usd ?? '0',
    ]);
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

  #windowText(): string {
    return windowText(this.#o.windowMs);
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
