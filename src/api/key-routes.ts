import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Accounts, Principal } from '../accounts/index.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import { ApiKeySchema, toWireApiKey } from './contract/api-key.ts';

// The owner's API keys and their limits, readable (issue #32): GET /api/key lists the owner's
// keys, GET /api/key/{id} shows one (`self`: the key the request is made with). Settings are
// written by the operator (`mediaplane keys create|update`), not through the API: a key that
// could lift its own limits would have none.

export interface KeyRoutesDeps {
  auth: RequestAuth<Principal>;
  accounts: Pick<Accounts, 'keyViews' | 'keyView'>;
  /** MEDIAPLANE_RATE_WINDOW_MS. */
  windowMs: number;
}

const KeyId = Type.Object({ id: Type.String({ maxLength: 64, description: 'A key id, or `self`' }) });

export async function keyRoutes(api: FastifyInstance, deps: KeyRoutesDeps): Promise<void> {
  const { auth, accounts } = deps;
  const onRequest = auth.hook;
  api.get(
    '/key',
    {
      onRequest,
      schema: { summary: "List the owner's API keys with their limits", response: { 200: Type.Array(ApiKeySchema) } },
    },
    async (req) => {
      const who = auth.of(req);
      const keys = await accounts.keyViews(who.owner);
      return keys.map((k) => toWireApiKey(k, { currentKeyId: who.keyId, windowMs: deps.windowMs }));
    },
  );
  api.get<{ Params: Static<typeof KeyId> }>(
    '/key/:id',
    {
      onRequest,
      schema: {
        summary: 'Get an API key with its limits (`self`: the key the request is made with)',
        params: KeyId,
        response: { 200: ApiKeySchema, 404: TasksErrorBody },
      },
    },
    async (req) => {
      const who = auth.of(req);
      const id = req.params.id === 'self' ? who.keyId : req.params.id;
      const key = await accounts.keyView(who.owner, id);
      return toWireApiKey(key, { currentKeyId: who.keyId, windowMs: deps.windowMs });
    },
  );
}
