import { Type, type Static } from '@sinclair/typebox';
import type { KeyView } from '../../accounts/index.ts';

// The wire shape of an API key as its owner reads it (issue #32: GET /api/key, GET
// /api/key/{id}): its limit settings, its owner's defaults and the limits that follow. Never
// the key itself or its hash.

const Count = Type.Union([Type.Integer(), Type.Null()]);
const Period = Type.Union([Type.Literal('day'), Type.Literal('month'), Type.Literal('total'), Type.Null()]);
const Models = Type.Union([Type.Array(Type.String()), Type.Null()]);

const Settings = Type.Object(
  {
    requestsPerMinute: Count,
    tokensPerMinute: Count,
    concurrentTranscodes: Count,
    budgetUsd: Type.Union([Type.Number(), Type.Null()]),
    budgetPeriod: Period,
    models: Models,
  },
  { description: 'null: not set here (a key then takes its owner default); 0 on a key: no limit' },
);

export const ApiKeySchema = Type.Object({
  id: Type.String(),
  prefix: Type.String({ description: 'The first characters of the key' }),
  createdAt: Type.Number(),
  revokedAt: Type.Optional(Type.Number()),
  expiresAt: Type.Optional(Type.Number()),
  /** Whether this is the key the request was made with. */
  current: Type.Boolean(),
  settings: Settings,
  ownerDefaults: Settings,
  limits: Type.Object(
    {
      requestsPerMinute: Count,
      tokensPerMinute: Count,
      concurrentTranscodes: Count,
      budget: Type.Union([
        Type.Object({
          usd: Type.Number(),
          period: Type.Union([Type.Literal('day'), Type.Literal('month'), Type.Literal('total')]),
        }),
        Type.Null(),
      ]),
      models: Models,
    },
    { description: 'What the key is held to; null: no limit' },
  ),
  windowMs: Type.Integer({ description: 'The rate window "per minute" means (MEDIAPLANE_RATE_WINDOW_MS)' }),
});
export type WireApiKey = Static<typeof ApiKeySchema>;

function wireSettings(s: KeyView['settings']): WireApiKey['settings'] {
  return { ...s, budgetUsd: s.budgetUsd === null ? null : Number(s.budgetUsd) };
}

export function toWireApiKey(k: KeyView, o: { currentKeyId: string; windowMs: number }): WireApiKey {
  const l = k.limits;
  return {
    id: k.id,
    prefix: k.prefix,
    createdAt: k.createdAt.getTime(),
    ...(k.revokedAt ? { revokedAt: k.revokedAt.getTime() } : {}),
    ...(k.expiresAt ? { expiresAt: k.expiresAt.getTime() } : {}),
    current: k.id === o.currentKeyId,
    settings: wireSettings(k.settings),
    ownerDefaults: wireSettings(k.ownerDefaults),
    limits: {
      requestsPerMinute: l?.requestsPerMinute ?? null,
      tokensPerMinute: l?.tokensPerMinute ?? null,
      concurrentTranscodes: l?.concurrentTranscodes ?? null,
      budget: l?.budget ? { usd: Number(l.budget.usd), period: l.budget.period } : null,
      models: l?.models ? [...l.models] : null,
    },
    windowMs: o.windowMs,
  };
}
