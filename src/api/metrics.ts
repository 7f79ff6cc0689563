import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { processMetrics } from '../lib/metrics.ts';
import { PHASES, type Queue, type TaskStore } from '../tasks/index.ts';

/**
 * Prometheus metrics of one process: HTTP latency, tasks by phase, queue depth, and what the
 * other roles of the process (LLM gateway, local orchestrator) add to the same registry.
 */
export function createMetrics(deps: { tasks: TaskStore; queue: Queue; registry?: Registry | undefined }): {
  registry: Registry;
  instrument(app: FastifyInstance): void;
} {
  const registry = deps.registry ?? processMetrics();
  const latency = new Histogram({
    name: 'mediaplane_http_request_duration_seconds',
    help: 'HTTP request latency by route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
  new Gauge({
    name: 'mediaplane_tasks',
    help: 'Tasks by phase (all owners, from the database)',
    labelNames: ['phase'],
    registers: [registry],
    async collect() {
      const counts = await deps.tasks.countByPhase();
      for (const phase of PHASES) this.set({ phase }, counts[phase] ?? 0);
    },
  });
  new Gauge({
    name: 'mediaplane_queue_depth',
    help: 'Tasks waiting for a worker',
    registers: [registry],
    async collect() {
      this.set(await deps.queue.depth());
    },
  });
  const errors = new Counter({
    name: 'mediaplane_http_errors_total',
    help: 'HTTP responses with status >= 500',
    labelNames: ['route'],
    registers: [registry],
  });
  return {
    registry,
    instrument(app) {
      app.addHook('onResponse', async (req, reply) => {
        const route = req.routeOptions.url ?? 'unmatched';
        latency.observe({ method: req.method, route, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
        if (reply.statusCode >= 500) errors.inc({ route });
      });
    },
  };
}
