// GET /v1/models and /v1/models/{id}: the models some orchestrator offers, as OpenAI lists them,
// with whether each is loaded somewhere (`warm`) and whether it costs anything (`priced`: a
// client such as the console shows no credit for a model that needs none).

import type { FastifyInstance } from 'fastify';
import { ModelNotFoundError } from '../../lib/errors.ts';
import type { OrchestratorPool } from './pool.ts';
import { modelRoute, modelsRoute } from './schemas.ts';
import type { GatewayRoutes } from './serve.ts';

/** A model as OpenAI's GET /v1/models lists it, with whether it is loaded somewhere and priced. */
function modelObject(m: { id: string; warm: boolean; priced: boolean }) {
  const owner = m.id.split('/')[0] ?? 'unknown';
  return { id: m.id, object: 'model' as const, created: 0, owned_by: owner, warm: m.warm, priced: m.priced };
}

async function oneModel(pool: OrchestratorPool, id: string, ceiling: number) {
  if (!pool.offers(id)) await pool.refresh();
  const m = pool.models(ceiling).find((x) => x.id === id);
  if (!m) throw new ModelNotFoundError(`The model ${JSON.stringify(id)} does not exist: no orchestrator offers it`);
  return modelObject(m);
}

/** Registers the model routes on a scope with the LLM error handler. */
export function registerModels(scope: FastifyInstance, routes: GatewayRoutes): void {
  const { pool } = routes;
  const ceiling = routes.complete.maxPricePerToken;
  const onRequest = routes.auth.hook;
  scope.get('/v1/models', { schema: modelsRoute, onRequest }, async () => {
    if (pool.models().length === 0) await pool.refresh();
    return { object: 'list', data: pool.models(ceiling).map(modelObject) };
  });
  // The openai SDK sends `org%2Fname` (one segment, decoded into :id); curl users type
  // `org/name`, which only the wildcard route (kept out of the OpenAPI document) matches.
  scope.get<{ Params: { id: string } }>('/v1/models/:id', { schema: modelRoute, onRequest }, async (req) =>
    oneModel(pool, req.params.id, ceiling),
  );
  scope.get<{ Params: { '*': string } }>('/v1/models/*', { onRequest }, async (req) =>
    oneModel(pool, req.params['*'], ceiling),
  );
}
