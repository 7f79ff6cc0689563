// What a key may do: its settings (one table of descriptors, limit-settings.ts), its owner's
// defaults, and the limits that follow from both. Limits belong to accounts/ because they are
// properties of a key and its owner: the lookup that authenticates a key reads them in the same
// query, so a key with no limits costs nothing more than before. The counting (SQL) is in
// limiter.ts.

import { BudgetSpentError, ForbiddenError, RateLimitedError, type RateWindow, ValidationError } from '../lib/errors.ts';
import {
  type Admission,
  BUDGET_PERIODS,
  type BudgetPeriod,
  COUNT_SETTINGS,
  type CountField,
  LIMIT_SETTINGS,
  type LimitColumns,
  type LimitDescriptor,
  type LimitKind,
  type LimitSettings,
  MAX_COUNT,
  OWNER_SETTINGS,
  type OwnerDescriptor,
  type OwnerSettings,
} from './limit-settings.ts';

export { BUDGET_PERIODS, type BudgetPeriod, type LimitColumns, type LimitSettings } from './limit-settings.ts';

/** The limits a key is held to: its own settings over its owner's defaults; null: none. */
export interface KeyLimits extends Record<CountField, number | null> {
  /** USD per period, as exact decimal text. */
  budget: { usd: string; period: BudgetPeriod } | null;
  /** The model ids the key may use; null: every model. */
  models: readonly string[] | null;
  /** ms since the epoch; null: never. */
  expiresAt: number | null;
}

/** A key's effective limits from its row and its owner's (both null when unset); undefined when it has none. */
export function effectiveLimits(
  key: LimitColumns & { expires_at: Date | string | null },
  owner: Partial<LimitColumns> | null,
): KeyLimits | undefined {
  const count = (k: number | null, o: number | null | undefined) => {
    const v = k ?? o ?? null;
    return v === null || v === 0 ? null : v;
  };
  const counts = Object.fromEntries(
    COUNT_SETTINGS.map((d) => [d.field, count(key[d.column], owner?.[d.column])]),
  ) as Record<CountField, number | null>;
  const usd = key.budget_usd ?? owner?.budget_usd ?? null;
  const models = key.models ?? owner?.models ?? null;
  const limits: KeyLimits = {
    ...counts,
    budget:
      usd === null || Number(usd) === 0
        ? null
        : { usd: trimDecimal(usd), period: key.budget_period ?? owner?.budget_period ?? 'total' },
    models: models === null || models.includes('*') ? null : models,
    expiresAt: key.expires_at === null ? null : new Date(key.expires_at).getTime(),
  };
  return Object.values(limits).every((v) => v === null) ? undefined : limits;
}

/** "0.010000000000" -> "0.01". */
export function trimDecimal(d: string): string {
  return d.includes('.') ? d.replace(/0+$/, '').replace(/\.$/, '') : d;
}

/** The count settings counted per request in the key's rate windows (LIMIT_SETTINGS: `request-window`). */
const WINDOWED = COUNT_SETTINGS.filter((d) => (d.admission as readonly Admission[]).includes('request-window'));

/** Whether a request window must be counted per request (and not in batches): a requests or tokens limit. */
export function windowed(l: KeyLimits | undefined): l is KeyLimits {
  return l !== undefined && WINDOWED.some((d) => l[d.field] !== null);
}

const MODEL_RE = /^[^\s,]{1,256}$/;

/** The problems of a value of each kind of setting (`v` not null); `forKey`: a key's, else an owner default. */
const KIND_CHECKS: Record<LimitKind, (d: LimitDescriptor, v: unknown, forKey: boolean) => string[]> = {
  count: (d, v, forKey) => {
    // On an owner, 0 would be "no default", which is what unset says: only keys take 0.
    const least = forKey ? 0 : 1;
    const max = d.max ?? MAX_COUNT;
    const ok = typeof v === 'number' && Number.isInteger(v) && v >= least && v <= max;
    return ok ? [] : [`${d.field}: must be a whole number from ${least} to ${max} (got ${String(v)})`];
  },
  usd: (d, v, forKey) => {
    if (typeof v !== 'string' || !/^\d{1,18}(\.\d{1,12})?$/.test(v))
      return [`${d.field}: must be a decimal number of USD, like 5 or 0.01 (got ${JSON.stringify(v)})`];
    return !forKey && Number(v) === 0 ? [`${d.field}: an owner default must be above 0 (unset it instead)`] : [];
  },
  period: (d, v) =>
    BUDGET_PERIODS.some((p) => p === v) ? [] : [`${d.field}: must be day, month or total (got ${JSON.stringify(v)})`],
  models: (d, v) =>
    Array.isArray(v)
      ? v
          .filter((m) => typeof m !== 'string' || !MODEL_RE.test(m))
          .map((m) => `${d.field}: ${JSON.stringify(m)} is not a model id (no spaces or commas)`)
      : [`${d.field}: must be a list of model ids`],
  date: (d, v) => (v instanceof Date && !Number.isNaN(v.getTime()) ? [] : [`${d.field}: not a date`]),
};

/** Checks settings before they are written; each problem names the setting and the rule. */
export function checkSettings(s: LimitSettings, o: { forKey: boolean }): void {
  const problems: string[] = [];
  for (const d of LIMIT_SETTINGS as readonly LimitDescriptor[]) {
    const v: unknown = s[d.field as keyof LimitSettings];
    if (v === undefined) continue;
    if (!o.forKey && d.keyOnly) problems.push(`${d.field}: a key setting, not an owner default`);
    else if (v !== null) problems.push(...KIND_CHECKS[d.kind](d, v, o.forKey));
  }
  if (problems.length > 0) throw new ValidationError(problems);
}

/** The settings of a row as the API and the CLI show them (null: not set here). */
export function settingsOf(row: LimitColumns): OwnerSettings {
  const value = (d: OwnerDescriptor) => {
    const v = row[d.column];
    return d.kind === 'usd' && typeof v === 'string' ? trimDecimal(v) : v;
  };
  return Object.fromEntries(OWNER_SETTINGS.map((d) => [d.field, value(d)])) as OwnerSettings;
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
