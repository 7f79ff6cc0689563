// The orchestrator role: loads models into an engine and serves generation to gateways.
// Inside `mediaplane start` it mounts on the shared app under ORCHESTRATOR_PREFIX; as
// `mediaplane orchestrator` it listens on its own port.

import Fastify, { type FastifyBaseLogger, type FastifyInstance, type RawServerDefault } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Registry as MetricsRegistry } from 'prom-client';
import ipaddr from 'ipaddr.js';
import { ConfigError, settingsHelp } from '../../config/index.ts';
import { processMetrics, serveMetrics } from '../../lib/metrics.ts';
import {
  bodyDeadline,
  clientErrorHandler,
  closeApp,
  noSniff,
  type ServerTimeouts,
  serverTimeoutOptions,
} from '../../lib/http-server.ts';
import { jsonBodyParser } from '../../lib/json-body.ts';
import { oneLineRequestLogging, requestLog } from '../../lib/request-log.ts';
import { openAiWireError } from '../../lib/wire-errors.ts';
import { createEngine, type EngineOptions } from './engines/index.ts';
import { orchestratorMetrics } from './metrics.ts';
import { orchestratorRoutes, type OrchestratorState } from './routes.ts';
import { Slots } from './slots.ts';
import { type RegistrationOptions, startRegistration } from './register.ts';

export { TuningError, type Tuning } from './tuning.ts';
export type { Engine } from './engine.ts';
export { createEngine, type EngineOptions } from './engines/index.ts';
export { PREFERRED_QUANTIZATIONS } from './hub.ts';
export {
  listLocalModels,
  type LocalModel,
  localModels,
  type PullEvent,
  type Pulled,
  pullModel,
  removeModel,
} from './models.ts';

/** Where the orchestrator's routes live when it shares the app of `mediaplane start`. */
export const ORCHESTRATOR_PREFIX = '/orchestrator';

/** The settings an orchestrator needs (issue #26: its own options, not the whole Config; main.ts maps them). */
export interface OrchestratorOptions {
  engine: EngineOptions;
  /** Where it listens on its own (MEDIAPLANE_HOST, MEDIAPLANE_PORT); unused when mounted. */
  host: string;
  port: number;
  /** MEDIAPLANE_ORCHESTRATOR_SECRET: asked of gateways, and sent when registering. */
  secret?: string | undefined;
  /** USD per output token, advertised. */
  pricePerToken: number;
  /** Least ms between two SSE writes of a stream (StreamPacer). */
  streamIntervalMs: number;
  /** MEDIAPLANE_BODY_LIMIT_BYTES and MEDIAPLANE_BODY_MAX_DEPTH, as on the shared app. */
  bodyLimitBytes: number;
  bodyMaxDepth: number;
  timeouts: ServerTimeouts;
  /** Sequences per model (MAX_NUM_SEQS) and the queue in front of them. */
  slots: { total: number; maxQueue: number; queueMs: number };
  registration: Omit<RegistrationOptions, 'secret'>;
}

export interface OrchestratorDeps {
  options: OrchestratorOptions;
  log: Logger;
  /** Mount on this app (call before it listens) instead of listening on options.host:options.port. */
  app?: FastifyInstance;
  /** The registry the shared app's GET /metrics serves; on its own it serves this one (or its own
   * processMetrics) at /metrics. */
  metrics?: MetricsRegistry;
  /** The secret gateways must send; options.secret when absent (`mediaplane start`
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
  const secret = deps.secret ?? deps.options.secret;
  if (secret) return secret;
  if (deps.app)
    throw new ConfigError([
      'MEDIAPLANE_ORCHESTRATOR_SECRET: required by an orchestrator mounted on a shared server (mediaplane start keeps a generated one in MEDIAPLANE_DATA_DIR)',
    ]);
  const host = deps.options.host;
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
  const { options } = deps;
  const log = deps.log.child({ role: 'orchestrator' });
  const secret = requiredSecret(deps);
  const engine = createEngine(options.engine, log);
  await engine.start();
  const slots = new Map<string, Slots>();
  const state: OrchestratorState = {
    engine,
    pricePerToken: options.pricePerToken,
    streamIntervalMs: options.streamIntervalMs,
    secret,
    bodyLimitBytes: options.bodyLimitBytes,
    log,
    stats: { active: 0 },
    slots: (model) => {
      let s = slots.get(model);
      if (!s) {
        s = new Slots(options.slots);
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
        ...oneLineRequestLogging(),
        bodyLimit: options.bodyLimitBytes,
        ...serverTimeoutOptions(options.timeouts),
        clientErrorHandler: clientErrorHandler({
          requestTimeoutMs: options.timeouts.requestTimeoutMs,
          answer: (e) => openAiWireError(e),
        }),
      });
      own = app;
      noSniff(app);
      requestLog(app);
      bodyDeadline(app, { timeouts: options.timeouts, answer: (e) => openAiWireError(e) });
      // The JSON rules of the shared app, its depth limit included (issue #25): the gateway's
      // forwarded bodies nest no deeper than those its clients sent.
      app.addContentTypeParser(
        'application/json',
        { parseAs: 'string' },
        jsonBodyParser({ maxDepth: options.bodyMaxDepth }),
      );
      const metrics = deps.metrics ?? processMetrics();
      orchestratorMetrics(metrics, state);
      // Outside the routes' scope, so the secret is not asked for it.
      serveMetrics(app, metrics);
      await app.register(async (scope) => orchestratorRoutes(scope, state));
      url = await app.listen({ host: options.host, port: options.port });
      log.info({ url, engine: engine.name }, 'orchestrator listening');
    }
  } catch (err) {
    await engine.close();
    throw err;
  }
  const registration = startRegistration({ ...options.registration, secret: options.secret, log });
  return {
    url,
    async close() {
      registration.stop();
      if (own) await closeApp(own);
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
