// An owner's usage (or one key's) over a range of UTC days: the rows of each source
// (store.ts) summed per day, per model and per key. Pure: no SQL here.

import type { KeyDayRow, KeyRow, ModelDayRow, TaskDayRow, UsageRange, UsageStore } from './store.ts';

export interface UsageFigures {
  /** Authenticated requests the limiter let through, both APIs. */
  requests: number;
  /** LLM tokens billed (max_tokens on admission, settled to those used). */
  tokens: number;
  /** Tasks created. */
  tasks: number;
  /** Minutes of media transcoded by the tasks that completed. */
  transcodedMinutes: number;
  /** USD charged by the LLM gateway (reservations not yet settled included; refunds not). */
  usd: number;
}

export interface ModelUsage {
  model: string;
  /** LLM requests charged for the model. */
  requests: number;
  /** Tokens settled for the model's charges. */
  tokens: number;
  usd: number;
}

export interface DayUsage extends UsageFigures {
  /** YYYY-MM-DD (UTC) */
  day: string;
  models: ModelUsage[];
}

export interface KeyUsage extends UsageFigures {
  id: string;
  prefix: string;
  createdAt: Date;
  revokedAt: Date | null;
}

export interface Usage {
  owner: string;
  from: string;
  to: string;
  total: UsageFigures;
  /** Days with any usage, oldest first. */
  days: DayUsage[];
  /** Models with any charge in the range, most USD first. */
  models: ModelUsage[];
  /** Every key of the owner (the one asked for, with a key). */
  keys: KeyUsage[];
}

const zero = (): UsageFigures => ({ requests: 0, tokens: 0, tasks: 0, transcodedMinutes: 0, usd: 0 });
/** Cents of a cent are what a ledger of 12 decimals can show; floats of sums are rounded to it. */
const round = (x: number, digits: number): number => Number(x.toFixed(digits));

function add(into: UsageFigures, r: Partial<UsageFigures>): void {
  into.requests += r.requests ?? 0;
  into.tokens += r.tokens ?? 0;
  into.tasks += r.tasks ?? 0;
  into.transcodedMinutes += r.transcodedMinutes ?? 0;
  into.usd += r.usd ?? 0;
}

function tidy<T extends UsageFigures>(f: T): T {
  f.transcodedMinutes = round(f.transcodedMinutes, 4);
  f.usd = round(f.usd, 12);
  return f;
}

function addModel(into: Map<string, ModelUsage>, r: ModelDayRow): void {
  const m = into.get(r.model) ?? { model: r.model, requests: 0, tokens: 0, usd: 0 };
  m.requests += r.requests;
  m.tokens += r.tokens;
  m.usd += r.usd;
  into.set(r.model, m);
}

const byUsd = (a: ModelUsage, b: ModelUsage) => b.usd - a.usd || a.model.localeCompare(b.model);
const models = (m: Map<string, ModelUsage>) =>
  [...m.values()].map((x) => ({ ...x, usd: round(x.usd, 12) })).sort(byUsd);

/** Sums the sources' rows per day, model and key. */
export function buildUsage(o: {
  range: UsageRange;
  keys: KeyRow[];
  keyDays: KeyDayRow[];
  modelDays: ModelDayRow[];
  taskDays: TaskDayRow[];
}): Usage {
  const days = new Map<string, { figures: UsageFigures; models: Map<string, ModelUsage> }>();
  const dayOf = (day: string) => {
    const d = days.get(day) ?? { figures: zero(), models: new Map<string, ModelUsage>() };
    days.set(day, d);
    return d;
  };
  const perKey = new Map(o.keys.map((k) => [k.id, { ...k, ...zero() }]));
  const keyOf = (id: string | null) => (id ? perKey.get(id) : undefined);
  const total = zero();
  const allModels = new Map<string, ModelUsage>();
  const count = (day: string, keyId: string | null, f: Partial<UsageFigures>) => {
    add(dayOf(day).figures, f);
    add(total, f);
    const k = keyOf(keyId);
    if (k) add(k, f);
  };
  for (const r of o.keyDays) count(r.day, r.keyId, { requests: r.requests, tokens: r.tokens });
  for (const r of o.taskDays) count(r.day, r.keyId, { tasks: r.tasks, transcodedMinutes: r.transcodedSeconds / 60 });
  for (const r of o.modelDays) {
    // Requests and tokens are the limiter's (api_key_days, every request of both APIs); the
    // ledger gives USD to the totals, and everything to the per-model figures.
    count(r.day, r.keyId, { usd: r.usd });
    addModel(dayOf(r.day).models, r);
    addModel(allModels, r);
  }
  return {
    owner: o.range.owner,
    from: o.range.from,
    to: o.range.to,
    total: tidy(total),
    days: [...days.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([day, d]) => ({ day, ...tidy(d.figures), models: models(d.models) })),
    models: models(allModels),
    keys: [...perKey.values()].map(tidy),
  };
}

/** The usage of `range` (one key's when it names one), read from the store. */
export async function readUsage(store: UsageStore, range: UsageRange, keys: KeyRow[]): Promise<Usage> {
  const [keyDays, modelDays, taskDays] = await Promise.all([
    store.keyDays(range),
    store.modelDays(range),
    store.taskDays(range),
  ]);
  return buildUsage({ range, keys, keyDays, modelDays, taskDays });
}
