// One auth-hook pattern for every API on the server (issue #26): a route names its check in
// its own options (`onRequest: auth.hook`), so no route is guarded, or left open, by a hook it
// happens to share a scope with; its handler reads what the check found with `auth.of(req)`.
// The task API, its webhooks and the LLM gateway all check API keys this way.

import type { FastifyReply, FastifyRequest } from 'fastify';
import { InternalError } from './errors.ts';

export interface RequestAuth<P> {
  /** onRequest hook: checks the request's Authorization header (its error otherwise) and keeps what it found. */
  readonly hook: (req: FastifyRequest, reply?: FastifyReply) => Promise<void>;
  /** What the hook found for `req`. */
  of(req: FastifyRequest): P;
}

/**
 * Auth by `check`, which answers who an Authorization header belongs to or throws (an AuthError:
 * 401; a 429 past a key's limits). It also gets the request (the client's address) and, in a
 * hook, the reply (headers every answer carries: a key's rate-limit headers).
 */
export function requestAuth<P>(
  check: (authorization: string | undefined, req: FastifyRequest, reply?: FastifyReply) => Promise<P>,
): RequestAuth<P> {
  const found = new WeakMap<FastifyRequest, P>();
  return {
    hook: async (req, reply) => {
      found.set(req, await check(req.headers.authorization, req, reply));
    },
    of: (req) => {
      const who = found.get(req);
      if (who === undefined) throw new InternalError('the route has no auth hook (onRequest: auth.hook)');
      return who;
    },
  };
}
