// The Prometheus registry of one process and the route that serves it. Every role that runs
// in the process (API, worker, gateway, orchestrator) adds its figures to the same registry.

import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Registry } from 'prom-client';

/** A registry with the process figures (CPU, RSS, heap, event-loop lag) under `mediaplane_`. */
export function processMetrics(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'mediaplane_' });
  return registry;
}

/** GET /metrics in Prometheus text; like health, it needs no key. */
export function serveMetrics(app: FastifyInstance, registry: Registry): void {
  app.get('/metrics', async (_req, reply) => reply.type(registry.contentType).send(await registry.metrics()));
}
