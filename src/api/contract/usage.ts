import { Type, type Static } from '@sinclair/typebox';
import type { KeyUsage, Usage } from '../../usage/index.ts';

// The wire contract of the usage routes (issue #32): GET /api/usage (an owner's, or one key's
// at /api/usage/keys/{id}) in our own shape, and GET /api/data/usage/query in Livepeer Studio's,
// as the `livepeer` SDK's metrics.getUsage sends it and parses the answer (its models
// operations/getusagemetrics.ts and components/usagemetric.ts: one UsageMetric object with
// capitalized fields).

const Day = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'A UTC day, YYYY-MM-DD' });

export const UsageQuery = Type.Object(
  {
    from: Type.Optional({ ...Day, description: 'The first UTC day, YYYY-MM-DD (default: 29 days before `to`)' }),
    to: Type.Optional({ ...Day, description: 'The last UTC day, inclusive, YYYY-MM-DD (default: today)' }),
    key: Type.Optional(
      Type.String({ maxLength: 64, description: "One key's usage (its id, or `self`): as /api/usage/keys/{id}" }),
    ),
  },
  { additionalProperties: false },
);
export type UsageQuery = Static<typeof UsageQuery>;

const count = (description: string) => Type.Number({ minimum: 0, description });
const Figures = {
  requests: count('Authenticated requests of both APIs that the limiter let through (refused ones are not counted)'),
  tokens: count('LLM tokens billed: max_tokens when a request is admitted, settled to those generated'),
  tasks: count('Tasks created'),
  transcodedMinutes: count('Minutes of media transcoded by the tasks that completed (their inputs’ durations)'),
  usd: count('USD charged by the LLM gateway (a reservation not yet settled counts; a refunded one does not)'),
};
const ModelUsageSchema = Type.Object(
  {
    model: Type.String(),
    requests: count('LLM requests charged for the model'),
    tokens: count('Tokens generated, as settled in the ledger'),
    usd: count('USD charged'),
  },
  { additionalProperties: false },
);
const KeyUsageSchema = Type.Object(
  {
    id: Type.String(),
    prefix: Type.String({ description: 'The first characters of the key, as `mediaplane keys list` shows them' }),
    createdAt: Type.Number({ description: 'ms since the epoch' }),
    revokedAt: Type.Optional(Type.Number({ description: 'ms since the epoch' })),
    ...Figures,
  },
  { additionalProperties: false },
);

export const UsageSchema = Type.Object(
  {
    owner: Type.String(),
    from: Day,
    to: Day,
    key: Type.Optional(Type.String({ description: 'The key asked for, when one was' })),
    total: Type.Object(Figures, { additionalProperties: false }),
    days: Type.Array(
      Type.Object({ day: Day, ...Figures, models: Type.Array(ModelUsageSchema) }, { additionalProperties: false }),
      { description: 'Every UTC day with usage, oldest first' },
    ),
    models: Type.Array(ModelUsageSchema, { description: 'Every model charged in the range, most USD first' }),
    keys: Type.Array(KeyUsageSchema, { description: 'Every key of the owner (with a key asked for: that one)' }),
  },
  { additionalProperties: false },
);

function wireKey(k: KeyUsage): Static<typeof KeyUsageSchema> {
  const { createdAt, revokedAt, ...rest } = k;
  return { ...rest, createdAt: createdAt.getTime(), ...(revokedAt ? { revokedAt: revokedAt.getTime() } : {}) };
}

export function toWireUsage(u: Usage, keyId?: string): Static<typeof UsageSchema> {
  return { ...u, ...(keyId ? { key: keyId } : {}), keys: u.keys.map(wireKey) };
}

/** Livepeer's query of GET /data/usage/query (the SDK sends `breakdownBy[]`). */
export const LivepeerUsageQuery = Type.Object(
  {
    from: Type.Optional(
      Type.Integer({ minimum: 0, description: 'Start of the range, ms since the epoch (inclusive); default 0' }),
    ),
    to: Type.Optional(Type.Integer({ minimum: 0, description: 'End of the range, ms (exclusive); default now' })),
    timeStep: Type.Optional(
      Type.Union([Type.Literal('hour'), Type.Literal('day')], {
        description: "Accepted as Livepeer's; the answer is one total over the range either way",
      }),
    ),
    creatorId: Type.Optional(Type.String({ maxLength: 256, description: "Only this creator's videos" })),
    'breakdownBy[]': Type.Optional(
      Type.Union([Type.Literal('creatorId'), Type.Array(Type.Literal('creatorId'))], {
        description: 'Refused (422): the answer is one UsageMetric object; filter by creatorId instead',
      }),
    ),
  },
  { additionalProperties: false },
);
export type LivepeerUsageQuery = Static<typeof LivepeerUsageQuery>;

/** Livepeer's UsageMetric. DeliveryUsageMins is left out: this service does not count viewing. */
export const LivepeerUsageMetric = Type.Object(
  {
    UserID: Type.String({ description: 'The owner' }),
    CreatorID: Type.Optional(Type.String()),
    TotalUsageMins: Type.Number({
      description: 'Minutes of media transcoded by the tasks that completed in the range',
    }),
    StorageUsageMins: Type.Number({
      description: 'Minutes of the ready assets kept, made before the end of the range',
    }),
  },
  { additionalProperties: false },
);
