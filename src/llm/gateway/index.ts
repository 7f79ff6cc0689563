// The gateway role: POST /llm and the OpenAI-compatible /v1/chat/completions, /v1/completions,
// /v1/embeddings, /v1/models and /v1/models/{id}, GET /api/ledger, and POST /llm/orchestrators
// for self-registration. It shares the app (and port) of the transcoding API; orchestrators are
// reached over HTTP only. Its parts (the orchestrator pool, the ledger, billing) are built by
// the composition root, src/main.ts, and handed in (issue #26); a new route is a file with a
// register function, added to LLM_ROUTES.

import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { Registry as MetricsRegistry } from 'prom-client';
import type { Accounts, Windows } from '../../accounts/index.ts';
import { NotFoundError } from '../../lib/errors.ts';
import { requestAuth } from '../../lib/request-auth.ts';
import { schemaValidatorCompiler } from '../../lib/schema-validator.ts';
import { llmWireErrorFor, rateLimitHeaders, tasksWireError, wireErrorHandler } from '../../lib/wire-errors.ts';
import type { Ledger } from '../ledger.ts';
import { forwardedBodyLimit } from '../protocol/index.ts';
import type { Billing } from './billing.ts';
import { registerChat } from './chat-routes.ts';
import { registerCompletions } from './completions.ts';
import { registerEmbeddings } from './embeddings.ts';
import { registerLedger } from './ledger-route.ts';
import { gatewayMetrics } from './metrics.ts';
import { registerModels } from './model-routes.ts';
import type { OrchestratorPool } from './pool.ts';
import { registerRegistration } from './registration-route.ts';
import type { GatewayRoutes, GatewaySettings } from './serve.ts';

export { Billing } from './billing.ts';
export { OrchestratorPool } from './pool.ts';
export type { GatewaySettings } from './serve.ts';

/** The routes of the LLM error shape (OpenAI's), in the order the OpenAPI document lists them. */
const LLM_ROUTES: ReadonlyArray<(scope: FastifyInstance, routes: GatewayRoutes) => void> = [
  registerChat,
  registerCompletions,
  registerEmbeddings,
  registerModels,
  registerRegistration,
];

/** The settings of the gateway (config/gateway.ts and the orchestrator secret), not the whole Config. */
export interface GatewayOptions extends GatewaySettings {
  gatewayMaxPricePerToken: number;
  gatewayFirstTokenTimeoutMs: number;
  gatewayIdleTimeoutMs: number;
  /** MEDIAPLANE_BODY_LIMIT_BYTES: what the gateway forwards is held to it (protocol forwardedBodyLimit). */
  bodyLimitBytes: number;
}

export interface GatewayDeps {
  settings: GatewayOptions;
  pool: OrchestratorPool;
  ledger: Ledger;
  billing: Billing;
  accounts: Accounts;
  log: Logger;
  /** Where its metrics go (the registry GET /metrics serves); a private one when absent. */
  metrics?: MetricsRegistry | undefined;
}

/**
 * For the pool's orchestrators given as a path (`/orchestrator`: the local one of `mediaplane
 * start`): this server's own address once it listens.
 */
export function selfBase(app: FastifyInstance): (url: string) => string | undefined {
  return (url) => {
    if (!url.startsWith('/')) return url;
    const addr = app.server.address() as AddressInfo | string | null;
    if (!addr || typeof addr === 'string') return undefined;
    const host =
      addr.address === '0.0.0.0' || addr.address === '::'
        ? '127.0.0.1'
        : addr.family === 'IPv6'
          ? `[${addr.address}]`
          : addr.address;
    return `http://${host}:${addr.port}${url}`;
  };
}

/** The routes whose charge counts a limited key's request (Accounts.admit's `defer`). */
const CHARGED_ROUTES = new Set(['/llm', '/v1/chat/completions', '/v1/completions', '/v1/embeddings']);

/** Registers the gateway's routes on `app` and starts polling its pool; close() stops that. */
export async function registerGateway(app: FastifyInstance, deps: GatewayDeps): Promise<{ close(): Promise<void> }> {
  const { settings, pool } = deps;
  const log = deps.log;
  const routes: GatewayRoutes = {
    settings,
    log,
    pool,
    ledger: deps.ledger,
    // Accounts reuses a checked key for MEDIAPLANE_AUTH_CACHE_MS: without that, every chat
    // request pays a database query (~1.2 ms on PGlite) before its first token.
    // Each request counts against its key's limits (issue #32); a key with a requests or tokens
    // limit gets OpenAI's x-ratelimit-* headers on every answer (the stream's too: set on the raw response).
    // The routes that charge count a limited key's request in the statement that holds its
    // charge (KeyLimiter.hold: one round trip before the first token); one that ends before
    // its charge is counted as it is refused when the model or its orchestrators refuse it
    // (before-charge.ts: past the window the answer is the 429), else once answered.
    auth: requestAuth(async (header, req, reply) => {
      const res = reply?.raw;
      const headers = (w: Windows) => {
        if (res && !res.headersSent) for (const [h, v] of Object.entries(rateLimitHeaders(w))) res.setHeader(h, v);
      };
      const defer =
        res && CHARGED_ROUTES.has(req.routeOptions.url ?? '') ? { done: false, counted: headers } : undefined;
      const p = await deps.accounts.admit(header, { address: req.ip, defer });
      if (p.deferred && res)
        res.once('close', () => {
          deps.accounts.limiter
            ?.countDeferred(p)
            .catch((err: unknown) => log.warn({ err }, 'could not count a request against its key limits'));
        });
      if (p.windows) headers(p.windows);
      return p;
    }),
    complete: {
      pool,
      billing: deps.billing,
      log,
      metrics: gatewayMetrics(deps.metrics ?? new MetricsRegistry(), pool),
      maxForwardBytes: forwardedBodyLimit(settings.bodyLimitBytes),
      maxPricePerToken: settings.gatewayMaxPricePerToken,
      firstTokenTimeoutMs: settings.gatewayFirstTokenTimeoutMs,
      idleTimeoutMs: settings.gatewayIdleTimeoutMs,
    },
  };
  await registerScopes(app, routes);
  pool.start();
  // The first poll waits for the server to listen (a path-style orchestrator needs its port).
  app.addHook('onReady', async () => {
    setImmediate(() => void pool.refresh());
  });
  return {
    async close() {
      pool.stop();
    },
  };
}

/** The LLM routes in their error shape, unknown paths under their prefixes, and the ledger in the task API's. */
async function registerScopes(app: FastifyInstance, routes: GatewayRoutes): Promise<void> {
  // Chat text is free text: these scopes validate without the task API's plain-text rule.
  const validatorCompiler = schemaValidatorCompiler();
  await app.register(async (scope) => {
    // JSON only: a text/plain body (which Fastify parses by default) is answered 415 as any
    // other wrong content type, not as a JSON object that is "not an object" (issue #15).
    scope.removeContentTypeParser('text/plain');
    scope.setValidatorCompiler(validatorCompiler);
    // OpenAI's shape; under /llm with `detail` beside it for @livepeer/ai (lib/wire-errors.ts).
    scope.setErrorHandler(wireErrorHandler((err, req) => llmWireErrorFor(req.url)(err), routes.log));
    for (const register of LLM_ROUTES) register(scope, routes);
  });
  // Unknown paths under the LLM prefixes answer in the LLM error shape that OpenAI clients
  // parse, not Fastify's default body.
  for (const prefix of ['/v1', '/llm']) {
    await app.register(
      async (scope) => {
        scope.setNotFoundHandler((req, reply) => {
          const path = req.url.split('?')[0] ?? '';
          const { status, body } = llmWireErrorFor(path)(new NotFoundError(`no such route: ${req.method} ${path}`));
          return reply.status(status).send(body);
        });
      },
      { prefix },
    );
  }
  // The ledger belongs to the owner-facing /api, so it answers in that API's error shape.
  await app.register(async (scope) => {
    scope.setValidatorCompiler(validatorCompiler);
    scope.setErrorHandler(wireErrorHandler(tasksWireError, routes.log));
    registerLedger(scope, routes);
  });
}
