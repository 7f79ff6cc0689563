// The Prometheus registry of one process and the route that serves it. Every role that runs
// in the process (API, worker, gateway, orchestrator) adds its figures to the same registry.

import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { routineRouteLevel } from './log.ts';

/** A registry with the process figures (CPU, RSS, heap, event-loop lag) under `mediaplane_`. */
export function processMetrics(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'mediaplane_' });
  return registry;
}

/** GET /metrics in Prometheus text; like health, it needs no key, and its scrapes are logged only at debug. */
export function serveMetrics(app: FastifyInstance, registry: Registry): void {
  app.get('/metrics', { logLevel: routineRouteLevel(app.log.level) }, async (_req, reply) =>
    reply.type(registry.contentType).send(await registry.metrics()),
  );
}
