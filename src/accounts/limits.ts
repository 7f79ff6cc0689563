// What a key may do (issue #32): its settings, its owner's defaults, and the limits that follow
// from both. Limits belong to accounts/ because they are properties of a key and its owner: the
// lookup that authenticates a key reads them in the same query, so a key with no limits costs
// nothing more than before. The counting (SQL) is in limiter.ts.

import { BudgetSpentError, ForbiddenError, RateLimitedError, type RateWindow, ValidationError } from '../lib/errors.ts';

export type BudgetPeriod = 'day' | 'month' | 'total';
export const BUDGET_PERIODS: readonly BudgetPeriod[] = ['day', 'month', 'total'];

/** The limits a key is held to: its own settings over its owner's defaults; null: none. */
export interface KeyLimits {
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  concurrentTranscodes: number | null;
  /** USD per period, as exact decimal text. */
  budget: { usd: string; period: BudgetPeriod } | null;
  /** The model ids the key may use; null: every model. */
  models: readonly string[] | null;
  /** ms since the epoch; null: never. */
  expiresAt: number | null;
}

/**
 * Settings as stored on a key or its owner: null means "not set here" (a key then takes its
 * owner's default); 0 on a key means "no limit" and lifts an owner's default. In an update,
 * an absent field is left as it is.
 */
export interface LimitSettings {
  requestsPerMinute?: number | null;
  tokensPerMinute?: number | null;
  concurrentTranscodes?: number | null;
  budgetUsd?: string | null;
  budgetPeriod?: BudgetPeriod | null;
  /** ['*'] on a key: every model, whatever its owner's list. */
  models?: string[] | null;
  /** Keys only. */
  expiresAt?: Date | null;
}

/** The columns of a settings row (api_keys or owner_limits), as the driver returns them. */
export interface LimitColumns {
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  concurrent_transcodes: number | null;
  budget_usd: string | null;
  budget_period: BudgetPeriod | null;
  models: string[] | null;
}

export const LIMIT_COLUMNS = [
  'requests_per_minute',
  'tokens_per_minute',
  'concurrent_transcodes',
  'budget_usd',
  'budget_period',
  'models',
] as const;

/** A key's effective limits from its row and its owner's (both null when unset); undefined when it has none. */
export function effectiveLimits(
  key: LimitColumns & { expires_at: Date | string | null },
  owner: Partial<LimitColumns> | null,
): KeyLimits | undefined {
  const count = (k: number | null, o: number | null | undefined) => {
    const v = k ?? o ?? null;
    return v === null || v === 0 ? null : v;
  };
  const usd = key.budget_usd ?? owner?.budget_usd ?? null;
  const models = key.models ?? owner?.models ?? null;
  const limits: KeyLimits = {
    requestsPerMinute: count(key.requests_per_minute, owner?.requests_per_minute),
    tokensPerMinute: count(key.tokens_per_minute, owner?.tokens_per_minute),
    concurrentTranscodes: count(key.concurrent_transcodes, owner?.concurrent_transcodes),
    budget:
      usd === null || Number(usd) === 0
        ? null
        : { usd: trimDecimal(usd), period: key.budget_period ?? owner?.budget_period ?? 'total' },
    models: models === null || models.includes('*') ? null : models,
    expiresAt: key.expires_at === null ? null : new Date(key.expires_at).getTime(),
  };
  const none =
    limits.requestsPerMinute === null &&
    limits.tokensPerMinute === null &&
    limits.concurrentTranscodes === null &&
    limits.budget === null &&
    limits.models === null &&
    limits.expiresAt === null;
  return none ? undefined : limits;
}

/** "0.010000000000" -> "0.01". */
export function trimDecimal(d: string): string {
  return d.includes('.') ? d.replace(/0+$/, '').replace(/\.$/, '') : d;
}

/** Whether a request window must be counted per request (and not in batches): a requests or tokens limit. */
export function windowed(l: KeyLimits | undefined): l is KeyLimits {
  return l !== undefined && (l.requestsPerMinute !== null || l.tokensPerMinute !== null);
}

const MODEL_RE = /^[^\s,]{1,256}$/;

/** Checks settings before they are written; each problem names the setting and the rule. */
export function checkSettings(s: LimitSettings, o: { forKey: boolean }): void {
  const problems: string[] = [];
  // On an owner, 0 would be "no default", which is what unset says: only keys take 0.
  const least = o.forKey ? 0 : 1;
  for (const [name, v] of [
    ['requestsPerMinute', s.requestsPerMinute],
    ['tokensPerMinute', s.tokensPerMinute],
    ['concurrentTranscodes', s.concurrentTranscodes],
  ] as const)
    if (v !== undefined && v !== null && !(Number.isInteger(v) && v >= least && v <= 2_147_483_647))
      problems.push(`${name}: must be a whole number from ${least} to 2147483647 (got ${v})`);
  if (s.budgetUsd !== undefined && s.budgetUsd !== null && !/^\d{1,18}(\.\d{1,12})?$/.test(s.budgetUsd))
    problems.push(`budgetUsd: must be a decimal number of USD, like 5 or 0.01 (got ${JSON.stringify(s.budgetUsd)})`);
  if (!o.forKey && s.budgetUsd !== undefined && s.budgetUsd !== null && Number(s.budgetUsd) === 0)
    problems.push('budgetUsd: an owner default must be above 0 (unset it instead)');
  if (s.budgetPeriod !== undefined && s.budgetPeriod !== null && !BUDGET_PERIODS.includes(s.budgetPeriod))
    problems.push(`budgetPeriod: must be day, month or total (got ${JSON.stringify(s.budgetPeriod)})`);
  for (const m of s.models ?? [])
    if (!MODEL_RE.test(m)) problems.push(`models: ${JSON.stringify(m)} is not a model id (no spaces or commas)`);
  if (!o.forKey && s.expiresAt !== undefined) problems.push('expiresAt: a key setting, not an owner default');
  if (s.expiresAt && Number.isNaN(s.expiresAt.getTime())) problems.push('expiresAt: not a date');
  if (problems.length > 0) throw new ValidationError(problems);
}

/** The settings of a row as the API and the CLI show them (null: not set here). */
export function settingsOf(row: LimitColumns): Required<Omit<LimitSettings, 'expiresAt'>> {
  return {
    requestsPerMinute: row.requests_per_minute,
    tokensPerMinute: row.tokens_per_minute,
    concurrentTranscodes: row.concurrent_transcodes,
    budgetUsd: row.budget_usd === null ? null : trimDecimal(row.budget_usd),
    budgetPeriod: row.budget_period,
    models: row.models,
  };
}

/** When the budget period that holds `now` started (UTC) and when it ends (ms); no end for 'total'. */
export function budgetPeriodEnd(period: BudgetPeriod, now: number): number | undefined {
  const d = new Date(now);
  if (period === 'day') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
  if (period === 'month') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  return undefined;
}

/** A 403 naming the model when the key's allowlist does not hold it (issue #32). */
export function checkModel(limits: KeyLimits | undefined, model: string): void {
  const allowed = limits?.models;
  if (!allowed || allowed.includes(model)) return;
  throw new ForbiddenError(`model ${model} is not allowed for this API key (it may use: ${allowed.join(', ')})`, {
    code: 'model_not_allowed',
    param: 'model',
  });
}

/** The refusal naming the key's budget; `charge`: the request that would pass it, and what was spent before. */
export function budgetSpent(
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

/** How a rate window's length reads in a refusal: "minute", or its seconds and the setting. */
export function windowText(windowMs: number): string {
  return windowMs === 60_000 ? 'minute' : `${windowMs / 1000} s (MEDIAPLANE_RATE_WINDOW_MS)`;
}

/** The refusal of a request past its key's requests window, `resetMs` before it starts again; `windows`: the key's. */
export function requestsRefused(o: {
  rpm: number | null;
  windowMs: number;
  resetMs: number;
  windows: { requests?: RateWindow | undefined; tokens?: RateWindow | undefined };
}): RateLimitedError {
  return new RateLimitedError(
    `rate limit reached: this key may make ${o.rpm} requests per ${windowText(o.windowMs)}; try again in ${Math.ceil(o.resetMs / 1000)} s`,
    { kind: 'requests', windows: o.windows },
  );
}
