// The orchestrator role: loads models into an engine and serves generation to gateways.
// Inside `mediaplane start` it mounts on the shared app under ORCHESTRATOR_PREFIX; as
// `mediaplane orchestrator` it listens on its own port.

import Fastify, { type FastifyBaseLogger, type FastifyInstance, type RawServerDefault } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Registry as MetricsRegistry } from 'prom-client';
import ipaddr from 'ipaddr.js';
import type { Config } from '../../config/index.ts';
import { ConfigError, settingsHelp } from '../../config/index.ts';
import { processMetrics, serveMetrics } from '../../lib/metrics.ts';
import { clientErrorHandler, serverTimeoutOptions } from '../../lib/http-server.ts';
import { jsonBodyParser } from '../../lib/json-body.ts';
import { openAiWireError } from '../../lib/wire-errors.ts';
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
  /** The secret gateways must send; config.orchestratorSecret when absent (`mediaplane start`
   * passes the one it keeps in the data dir). */
  secret?: string | undefined;
}

/**
 * The secret this orchestrator asks of every caller but /healthz and /metrics. Generation
 * costs compute and bypasses the gateway's keys and ledger, so an orchestrator that anyone
 * but its gateways can reach must have one (issue #15): always when mounted on a shared app
 * (the public port of `mediaplane start`), and on its own port unless it listens on a
 * loopback address only. Checked before the engine loads anything.
 */
function requiredSecret(deps: OrchestratorDeps): string | undefined {
  const secret = deps.secret ?? deps.config.orchestratorSecret;
  if (secret) return secret;
  if (deps.app)
    throw new ConfigError([
      'MEDIAPLANE_ORCHESTRATOR_SECRET: required by an orchestrator mounted on a shared server (mediaplane start keeps a generated one in MEDIAPLANE_DATA_DIR)',
    ]);
  const host = deps.config.host;
  if (!isLoopback(host)) {
    throw new ConfigError([
      `MEDIAPLANE_ORCHESTRATOR_SECRET: required when the orchestrator listens on ${JSON.stringify(host)} (MEDIAPLANE_HOST), which is not a loopback address; set the same secret on its gateways, or listen on 127.0.0.1`,
    ]);
  }
  return undefined;
}

function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  return ipaddr.isValid(host) && ipaddr.process(host).range() === 'loopback';
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
  const secret = requiredSecret(deps);
  const engine = createEngine(config, log);
  await engine.start();
  const slots = new Map<string, Slots>();
  const state: OrchestratorState = {
    engine,
    pricePerToken: config.orchestratorPricePerToken,
    streamIntervalMs: config.orchestratorStreamIntervalMs,
    secret,
    bodyLimitBytes: config.bodyLimitBytes,
    log,
    stats: { active: 0 },
    slots: (model) => {
      let s = slots.get(model);
      if (!s) {
        s = new Slots({
          total: config.maxNumSeqs,
          maxQueue: config.orchestratorMaxQueue,
          queueMs: config.orchestratorQueueMs,
        });
        slots.set(model, s);
      }
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
      const app = Fastify<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger>({
        loggerInstance: log,
        bodyLimit: config.bodyLimitBytes,
        ...serverTimeoutOptions(config),
        clientErrorHandler: clientErrorHandler({
          requestTimeoutMs: config.requestTimeoutMs,
          answer: (e) => openAiWireError(e),
        }),
      });
      own = app;
      // The JSON rules of the shared app, its depth limit included (issue #25): the gateway's
      // forwarded bodies nest no deeper than those its clients sent.
      app.addContentTypeParser(
        'application/json',
        { parseAs: 'string' },
        jsonBodyParser({ maxDepth: config.bodyMaxDepth }),
      );
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
