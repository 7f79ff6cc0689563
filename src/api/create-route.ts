// A POST that creates something (a task, a webhook) once per Idempotency-Key (idempotency.ts):
// the API key's check named on the route, the body checked by its schema, and a retried
// request with the same key answered as the first was. One shape for every create route.

import type { TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import { IdempotencyConflictBody, IdempotencyHeaders, type IdempotencyKeys } from './idempotency.ts';

export interface CreateRoute<B> {
  url: string;
  summary: string;
  /** The body's schema, and the created thing's as it is answered. */
  body: TSchema;
  answer: TSchema;
  auth: RequestAuth<Principal>;
  /** Absent: the route takes no Idempotency-Key (its answer must not be kept; see asset-routes.ts). */
  idempotency?: IdempotencyKeys;
  /**
   * The task this route writes counts its key's request, in the task's own statement (the task
   * store's admission), rather than the auth step: true only where that statement is the
   * request's first write (not inside another transaction, which a refusal would roll back).
   */
  countsKeyRequest?: boolean;
  /** Checks the body further, creates, and returns the wire shape of what was created. */
  create(req: FastifyRequest<{ Body: B }>, who: Principal): Promise<unknown>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route counts its key's request itself (CreateRoute.countsKeyRequest); the auth step defers it. */
    countsKeyRequest?: boolean;
  }
}

export function createRoute<B>(app: FastifyInstance, o: CreateRoute<B>): void {
  const { idempotency } = o;
  const schema = {
    summary: o.summary,
    ...(idempotency ? { headers: IdempotencyHeaders } : {}),
    body: o.body,
    response: { 200: o.answer, ...(idempotency ? { 409: IdempotencyConflictBody } : {}), 422: TasksErrorBody },
  };
  const config = { countsKeyRequest: o.countsKeyRequest === true };
  app.post<{ Body: B }>(o.url, { onRequest: o.auth.hook, schema, config }, async (req, reply) => {
    const who = o.auth.of(req);
    if (!idempotency) return o.create(req, who);
    return idempotency.once(req, reply, who.owner, () => o.create(req, who));
  });
}
