// The orchestrator role: loads models into an engine and serves generation to gateways.
// Inside `mediaplane start` it mounts on the shared app under ORCHESTRATOR_PREFIX; as
// `mediaplane orchestrator` it listens on its own port.

import Fastify, { type FastifyBaseLogger, type FastifyInstance, type RawServerDefault } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Registry as MetricsRegistry } from 'prom-client';
import type { Config } from '../../config/index.ts';
import { settingsHelp } from '../../config/index.ts';
import { processMetrics, serveMetrics } from '../../lib/metrics.ts';
import { createEngine } from './engines/index.ts';
import { orchestratorMetrics } from './metrics.ts';
import { orchestratorRoutes, type OrchestratorState } from './routes.ts';
import { Slots } from './slots.ts';
import { startRegistration } from './register.ts';

export { TuningError } from './tuning.ts';
export type { Engine } from './engine.ts';

/** Where the orchestrator's routes live when it shares the app of `mediaplane start`. */
export const ORCHESTRATOR_PREFIX = '/orchestrator';

export interface OrchestratorDeps {
  config: Config;
  log: Logger;
  /** Mount on this app (call before it listens) instead of listening on config.host:config.port. */
  app?: FastifyInstance;
  /** The registry the shared app's GET /metrics serves; on its own it serves this one (or its own
   * processMetrics) at /metrics. */
  metrics?: MetricsRegistry;
}

/**
 * Starts the engine (loading warm models, checking the tuning variables: a TuningError stops
 * start-up), then serves. `url` is the base URL gateways use: absolute when it listens on its
 * own, or the path prefix (ORCHESTRATOR_PREFIX) when mounted on a shared app, which a gateway
 * on the same app resolves against its own address.
 */
export async function startOrchestrator(deps: OrchestratorDeps): Promise<{ url?: string; close(): Promise<void> }> {
  const { config } = deps;
  const log = deps.log.child({ role: 'orchestrator' });
  const engine = createEngine(config, log);
  await engine.start();
  const slots = new Map<string, Slots>();
  const state: OrchestratorState = {
    engine,
    pricePerToken: config.orchestratorPricePerToken,
    streamIntervalMs: config.orchestratorStreamIntervalMs,
    secret: config.orchestratorSecret,
    log,
    stats: { active: 0 },
    slots: (model) => {
      let s = slots.get(model);
      if (!s) slots.set(model, (s = new Slots({ total: config.maxNumSeqs, maxQueue: config.orchestratorMaxQueue, queueMs: config.orchestratorQueueMs })));
      return s;
    },
  };
  let own: FastifyInstance | undefined;
  let url: string;
  try {
    if (deps.app) {
      if (deps.metrics) orchestratorMetrics(deps.metrics, state);
      await deps.app.register(async (scope) => orchestratorRoutes(scope, state), { prefix: ORCHESTRATOR_PREFIX });
      url = ORCHESTRATOR_PREFIX;
    } else {
      const app = Fastify<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger>({ loggerInstance: log, bodyLimit: config.bodyLimitBytes });
      own = app;
      const metrics = deps.metrics ?? processMetrics();
      orchestratorMetrics(metrics, state);
      // Outside the routes' scope, so the secret is not asked for it.
      serveMetrics(app, metrics);
      await app.register(async (scope) => orchestratorRoutes(scope, state));
      url = await app.listen({ host: config.host, port: config.port });
      log.info({ url, engine: engine.name }, 'orchestrator listening');
    }
  } catch (err) {
    await engine.close();
    throw err;
  }
  const registration = startRegistration({ config, log });
  return {
    url,
    async close() {
      registration.stop();
      await own?.close();
      await engine.close();
    },
  };
}

/** Text for `mediaplane orchestrator --help`. */
export function orchestratorHelp(): string {
  return [
    'mediaplane orchestrator: load models and serve text generation to gateways.',
    '',
    'Models live in MEDIAPLANE_MODELS_DIR as <org>/<model_name>/*.gguf; the tuning variables',
    '(USE_8BIT, PIPELINE_PARALLEL_SIZE, TENSOR_PARALLEL_SIZE, MAX_MODEL_LEN, MAX_NUM_BATCHED_TOKENS,',
    'MAX_NUM_SEQS, GPU_MEMORY_UTILIZATION) are checked against each model at start-up.',
    '',
    'Settings:',
    settingsHelp(['server', 'orchestrator']),
  ].join('\n');
}
