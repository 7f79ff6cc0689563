// POST /llm/orchestrators: an orchestrator registers itself with the gateway, proving it holds
// the shared orchestrator secret (not an owner's API key).

import type { Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { secretMatches } from '../../lib/bearer.ts';
import { AuthError } from '../../lib/errors.ts';
import { routineRouteLevel } from '../../lib/log.ts';
import { type RegistrationBody, registrationRoute } from './schemas.ts';
import type { GatewayRoutes } from './serve.ts';

/** Registers the route on a scope with the LLM error handler. */
export function registerRegistration(scope: FastifyInstance, routes: GatewayRoutes): void {
  const registrationSecret = async (req: FastifyRequest): Promise<void> => {
    const secret = routes.settings.orchestratorSecret;
    if (!secret || !secretMatches(req.headers.authorization, secret))
      throw new AuthError('registration needs the shared orchestrator secret');
  };
  scope.post<{ Body: Static<typeof RegistrationBody> }>(
    '/llm/orchestrators',
    // Each orchestrator repeats it every 10 s: its request lines are debug (the pool logs a new one).
    { schema: registrationRoute, onRequest: registrationSecret, logLevel: routineRouteLevel(scope.log.level) },
    async (req, reply) => {
      routes.pool.add(req.body.url, true);
      void routes.pool.refresh();
      return reply.status(204).send();
    },
  );
}
