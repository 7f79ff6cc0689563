import { type Static, Type } from '@sinclair/typebox';
import {
  COUNT_SETTINGS,
  type CountField,
  type KeyView,
  type LimitDescriptor,
  type OwnerDescriptor,
  OWNER_SETTINGS,
} from '../../accounts/index.ts';

// The wire shape of an API key as its owner reads it (GET /api/key, GET /api/key/{id}): its
// limit settings, its owner's defaults and the limits that follow. Never the key itself or its
// hash. The settings' fields come from the accounts' table of limit settings (LIMIT_SETTINGS):
// a new setting is on the wire, with its description, without a line here.

/** The wire schema of each kind of setting (null: not set, or no limit), with a descriptor's description. */
const KIND_WIRE = {
  count: (d: LimitDescriptor) =>
    Type.Union([Type.Integer({ minimum: 0, ...(d.max === undefined ? {} : { maximum: d.max }) }), Type.Null()], doc(d)),
  usd: (d: LimitDescriptor) => Type.Union([Type.Number({ minimum: 0 }), Type.Null()], doc(d)),
  period: (d: LimitDescriptor) =>
    Type.Union([Type.Literal('day'), Type.Literal('month'), Type.Literal('total'), Type.Null()], doc(d)),
  models: (d: LimitDescriptor) => Type.Union([Type.Array(Type.String()), Type.Null()], doc(d)),
  date: (d: LimitDescriptor) => Type.Union([Type.Number(), Type.Null()], doc(d)),
};
type KindWire = { [K in keyof typeof KIND_WIRE]: ReturnType<(typeof KIND_WIRE)[K]> };

function doc(d: LimitDescriptor): { description: string } {
  return { description: `${d.help} (${d.unit})` };
}

type SettingsProps = { [D in OwnerDescriptor as D['field']]: KindWire[D['kind']] };
const Settings = Type.Object(
  Object.fromEntries(OWNER_SETTINGS.map((d) => [d.field, KIND_WIRE[d.kind](d)])) as SettingsProps,
  { description: 'null: not set here (a key then takes its owner default); 0 on a key: no limit' },
);

type CountProps = { [F in CountField]: KindWire['count'] };
const Counts = Object.fromEntries(COUNT_SETTINGS.map((d) => [d.field, KIND_WIRE.count(d)])) as CountProps;

export const ApiKeySchema = Type.Object({
  id: Type.String(),
  prefix: Type.String({ description: 'The first characters of the key' }),
  createdAt: Type.Number(),
  revokedAt: Type.Optional(Type.Number()),
  expiresAt: Type.Optional(Type.Number({ description: 'ms since the epoch: after it, the key is refused' })),
  /** Whether this is the key the request was made with. */
  current: Type.Boolean(),
  settings: Settings,
  ownerDefaults: Settings,
  limits: Type.Object(
    {
      ...Counts,
      budget: Type.Union([
        Type.Object({
          usd: Type.Number(),
          period: Type.Union([Type.Literal('day'), Type.Literal('month'), Type.Literal('total')]),
        }),
        Type.Null(),
      ]),
      models: Type.Union([Type.Array(Type.String()), Type.Null()]),
    },
    { description: 'What the key is held to; null: no limit' },
  ),
  windowMs: Type.Integer({ description: 'The rate window "per minute" means (MEDIAPLANE_RATE_WINDOW_MS)' }),
});
export type WireApiKey = Static<typeof ApiKeySchema>;

/** Settings on the wire: USD as a number (exact decimal text in the domain). */
function wireSettings(s: KeyView['settings']): WireApiKey['settings'] {
  const value = (d: OwnerDescriptor) => {
    const v = s[d.field];
    return d.kind === 'usd' && v !== null ? Number(v) : v;
  };
  return Object.fromEntries(OWNER_SETTINGS.map((d) => [d.field, value(d)])) as WireApiKey['settings'];
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
      ...(Object.fromEntries(COUNT_SETTINGS.map((d) => [d.field, l?.[d.field] ?? null])) as Record<
        CountField,
        number | null
      >),
      budget: l?.budget ? { usd: Number(l.budget.usd), period: l.budget.period } : null,
      models: l?.models ? [...l.models] : null,
    },
    windowMs: o.windowMs,
  };
}
