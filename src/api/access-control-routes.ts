import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { SigningKeyStore } from '../access/index.ts';
import type { Principal } from '../accounts/index.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import {
  CreatedSigningKeySchema,
  SigningKeyCreateBody,
  SigningKeyPatchBody,
  SigningKeySchema,
  toWireSigningKey,
} from './contract/signing-key.ts';
import { createRoute } from './create-route.ts';
import { ListQuery, type PageOptions, pageOf } from './paging.ts';

// Livepeer's signing-key routes (issue #28, spec/API.md section C), so the `livepeer` SDK's
// accessControl.create/getAll/get/update/delete work unchanged. Owner-scoped like webhooks:
// another owner's key answers 404, as if it did not exist. The private key is in the create
// answer and nowhere else: that route takes no Idempotency-Key (a kept answer would store the
// private key in the database) and nothing here logs a key.

export interface AccessControlRoutesDeps {
  auth: RequestAuth<Principal>;
  signingKeys: Pick<SigningKeyStore, 'create' | 'list' | 'get' | 'update' | 'remove'>;
  /** MEDIAPLANE_PUBLIC_URL, for the list's `Link` (api/paging.ts). */
  publicUrl?: string | undefined;
}

const KeyId = Type.Object({ keyId: Type.String({ maxLength: 64, description: 'The signing key id' }) });
const Errors = TasksErrorBody;
const PATH = '/access-control/signing-key';

export async function accessControlRoutes(api: FastifyInstance, deps: AccessControlRoutesDeps): Promise<void> {
  const { auth, signingKeys: keys } = deps;
  const onRequest = auth.hook;

  createRoute<SigningKeyCreateBody>(api, {
    url: PATH,
    summary: 'Create a signing key (ES256): the answer holds its private key, this once',
    body: SigningKeyCreateBody,
    answer: CreatedSigningKeySchema,
    auth,
    create: async (req, who) => {
      const { key, privateKey } = await keys.create(who.owner, who.projectId, { name: req.body?.name });
      req.log.info({ signingKeyId: key.id, owner: who.owner }, 'signing key created');
      return { ...toWireSigningKey(key), privateKey };
    },
  });

  api.get<{ Querystring: ListQuery }>(
    PATH,
    {
      onRequest,
      schema: {
        summary: 'List signing keys, newest first',
        querystring: ListQuery,
        response: { 200: Type.Array(SigningKeySchema) },
      },
    },
    async (req, reply) => {
      const read = (page: PageOptions) => keys.list(auth.of(req).owner, page);
      return (await pageOf(req, reply, { publicUrl: deps.publicUrl, read })).keys.map(toWireSigningKey);
    },
  );

  api.get<{ Params: Static<typeof KeyId> }>(
    `${PATH}/:keyId`,
    {
      onRequest,
      schema: { summary: 'Get a signing key', params: KeyId, response: { 200: SigningKeySchema, 404: Errors } },
    },
    async (req) => toWireSigningKey(await keys.get(auth.of(req).owner, req.params.keyId)),
  );

  api.patch<{ Params: Static<typeof KeyId>; Body: SigningKeyPatchBody }>(
    `${PATH}/:keyId`,
    {
      onRequest,
      schema: {
        summary: 'Rename a signing key, or disable (or enable) it; 204 as on Livepeer',
        params: KeyId,
        body: SigningKeyPatchBody,
        response: { 204: Type.Null({ description: 'Updated' }), 404: Errors, 422: Errors },
      },
    },
    async (req, reply) => {
      const { name, disabled } = req.body;
      await keys.update(auth.of(req).owner, req.params.keyId, {
        ...(name === undefined ? {} : { name }),
        ...(disabled === undefined ? {} : { disabled }),
      });
      return reply.status(204).send();
    },
  );

  api.delete<{ Params: Static<typeof KeyId> }>(
    `${PATH}/:keyId`,
    {
      onRequest,
      schema: {
        summary: 'Delete a signing key: tokens it signed are refused from the next request on',
        params: KeyId,
        response: { 204: Type.Null({ description: 'Deleted' }), 404: Errors },
      },
    },
    async (req, reply) => {
      await keys.remove(auth.of(req).owner, req.params.keyId);
      return reply.status(204).send();
    },
  );
}
