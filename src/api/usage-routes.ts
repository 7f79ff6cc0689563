import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import { NotFoundError, ValidationError } from '../lib/errors.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import { readUsage, type UsageStore } from '../usage/index.ts';
import { LivepeerUsageMetric, LivepeerUsageQuery, toWireUsage, UsageQuery, UsageSchema } from './contract/usage.ts';

// Usage (issue #32): GET /api/usage (the owner's keys together, per day, per model and per
// key), GET /api/usage/keys/{id} (one key's), and Livepeer's GET /api/data/usage/query. Like
// every route they count against the calling key's own request limit, and only against it:
// another key of the owner spending its limit or budget never refuses a read of usage.

export interface UsageRoutesDeps {
  auth: RequestAuth<Principal>;
  usage: UsageStore;
}

const KeyId = Type.Object({
  id: Type.String({ maxLength: 64, description: 'The API key id, or `self`: the key the request is made with' }),
});
/** The longest range one answer covers: a year of days, each with its models. */
const MAX_DAYS = 366;
const DAY_MS = 86_400_000;
const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** The range of a query: `to` today and `from` 29 days before it unless given; 422s name the field as the schema's do. */
export function dayRange(
  q: { from?: string | undefined; to?: string | undefined },
  now = Date.now(),
): {
  from: string;
  to: string;
} {
  const to = q.to ?? isoDay(now);
  const toMs = Date.parse(`${to}T00:00:00Z`);
  const from = q.from ?? isoDay(toMs - 29 * DAY_MS);
  const fromMs = Date.parse(`${from}T00:00:00Z`);
  const problems: string[] = [];
  // The pattern lets 2026-02-31 through; Date.parse does not take it (or rolls it over).
  if (Number.isNaN(fromMs) || isoDay(fromMs) !== from)
    problems.push('querystring.from: must be a real day, YYYY-MM-DD');
  if (Number.isNaN(toMs) || isoDay(toMs) !== to) problems.push('querystring.to: must be a real day, YYYY-MM-DD');
  if (problems.length) throw new ValidationError(problems);
  if (fromMs > toMs) throw new ValidationError('querystring.from: must be on or before querystring.to');
  if ((toMs - fromMs) / DAY_MS + 1 > MAX_DAYS)
    throw new ValidationError(`querystring.to: a range is at most ${MAX_DAYS} days`);
  return { from, to };
}

export async function usageRoutes(api: FastifyInstance, deps: UsageRoutesDeps): Promise<void> {
  const { auth, usage } = deps;
  const onRequest = auth.hook;

  /** One key's usage (`self`: the caller's), or the owner's; another owner's key (or none) is a 404. */
  const answer = async (who: Principal, q: UsageQuery, asked: string | undefined) => {
    const owner = who.owner;
    const keyId = asked === 'self' ? who.keyId : asked;
    const range = { owner, ...dayRange(q), keyId };
    if (keyId === undefined) return toWireUsage(await readUsage(usage, range, await usage.keys(owner)));
    const key = await usage.key(owner, keyId);
    if (!key) throw new NotFoundError();
    return toWireUsage(await readUsage(usage, range, [key]), key.id);
  };

  api.get<{ Querystring: UsageQuery }>(
    '/usage',
    {
      onRequest,
      schema: {
        summary: "The owner's usage per UTC day, per model and per key (one key's with ?key=)",
        querystring: UsageQuery,
        response: { 200: UsageSchema, 404: TasksErrorBody, 422: TasksErrorBody },
      },
    },
    async (req) => answer(auth.of(req), req.query, req.query.key),
  );

  api.get<{ Params: Static<typeof KeyId>; Querystring: Omit<UsageQuery, 'key'> }>(
    '/usage/keys/:id',
    {
      onRequest,
      schema: {
        summary: "One API key's usage per UTC day and per model; another owner's key is a 404",
        params: KeyId,
        querystring: Type.Omit(UsageQuery, ['key'], { additionalProperties: false }),
        response: { 200: UsageSchema, 404: TasksErrorBody, 422: TasksErrorBody },
      },
    },
    async (req) => answer(auth.of(req), req.query, req.params.id),
  );

  api.get<{ Querystring: LivepeerUsageQuery }>(
    '/data/usage/query',
    {
      onRequest,
      schema: {
        summary: "Livepeer's usage metric (the livepeer SDK's metrics.getUsage): minutes transcoded and stored",
        querystring: LivepeerUsageQuery,
        response: { 200: LivepeerUsageMetric, 422: TasksErrorBody },
      },
    },
    async (req) => {
      const q = req.query;
      if (q['breakdownBy[]'] !== undefined)
        throw new ValidationError(
          'querystring.breakdownBy[]: not supported: the answer is one UsageMetric object (filter with creatorId instead)',
        );
      const fromMs = q.from ?? 0;
      const toMs = q.to ?? Date.now();
      if (fromMs > toMs) throw new ValidationError('querystring.from: must be before querystring.to');
      const owner = auth.of(req).owner;
      const u = await usage.livepeerUsage({ owner, fromMs, toMs, creatorId: q.creatorId });
      const mins = (s: number) => Number((s / 60).toFixed(4));
      return {
        UserID: owner,
        ...(q.creatorId === undefined ? {} : { CreatorID: q.creatorId }),
        TotalUsageMins: mins(u.transcodedSeconds),
        StorageUsageMins: mins(u.storedSeconds),
      };
    },
  );
}
