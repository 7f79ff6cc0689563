// The gateway role: POST /llm and the OpenAI-compatible /v1/chat/completions and /v1/models,
// GET /api/ledger, and POST /llm/orchestrators for self-registration. It shares the app
// (and port) of the transcoding API; orchestrators are reached over HTTP only.

import type { AddressInfo } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { Registry as MetricsRegistry } from 'prom-client';
import type { Accounts } from '../../accounts/index.ts';
import type { Config } from '../../config/index.ts';
import type { Db } from '../../db/index.ts';
import { AuthError, BadRequestError, NotFoundError, ValidationError } from '../../lib/errors.ts';
import { Ledger } from '../ledger.ts';
import { forwardedBodyLimit, secretMatches, validateChatRequest } from '../protocol.ts';
import { complete, type CompleteDeps } from './complete.ts';
import { llmErrorBody } from './errors.ts';
import { gatewayMetrics } from './metrics.ts';
import { Registry } from './registry.ts';

export { llmErrorBody } from './errors.ts';

export interface GatewayDeps {
  config: Config;
  db: Db;
  accounts: Accounts;
  log: Logger;
  /** Orchestrator base URLs in addition to MEDIAPLANE_GATEWAY_ORCHESTRATORS; a path such as
   * `/orchestrator` means this same server (the local orchestrator of `mediaplane start`). */
  orchestrators?: string[];
  /** Where its metrics go (the registry GET /metrics serves); a private one when absent. */
  metrics?: MetricsRegistry;
  /** The secret of the orchestrators given as a path (the local one of `mediaplane start`,
   * kept in the data dir); MEDIAPLANE_ORCHESTRATOR_SECRET when absent. Sent to those only. */
  localOrchestratorSecret?: string | undefined;
}

/** For orchestrators given as a path: this server's own address once it listens. */
function selfBase(app: FastifyInstance): (url: string) => string | undefined {
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

export async function registerGateway(app: FastifyInstance, deps: GatewayDeps): Promise<{ close(): Promise<void> }> {
  const { config } = deps;
  const log = deps.log.child({ role: 'gateway' });
  const registry = new Registry({
    urls: [...config.gatewayOrchestrators, ...(deps.orchestrators ?? [])],
    resolveBase: selfBase(app),
    secret: config.orchestratorSecret,
    localSecret: deps.localOrchestratorSecret,
    pollMs: config.gatewayPollMs,
    log,
  });
  const ledger = new Ledger(deps.db);
  const completeDeps: CompleteDeps = {
    registry,
    ledger,
    log,
    metrics: gatewayMetrics(deps.metrics ?? new MetricsRegistry(), registry),
    maxForwardBytes: forwardedBodyLimit(config.bodyLimitBytes),
    maxPricePerToken: config.gatewayMaxPricePerToken,
    usageBased: config.gatewayUsageBased,
    firstTokenTimeoutMs: config.gatewayFirstTokenTimeoutMs,
    idleTimeoutMs: config.gatewayIdleTimeoutMs,
  };

  // Accounts reuses a checked key for MEDIAPLANE_AUTH_CACHE_MS: without that, every chat
  // request pays a database query (~1.2 ms on PGlite) before its first token.
  const owner = async (req: FastifyRequest): Promise<string> => {
    const p = await deps.accounts.authenticate(req.headers.authorization);
    if (!p) throw new AuthError('missing or unknown API key (Authorization: Bearer <key>)');
    return p.owner;
  };

  const chat = async (req: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    const who = await owner(req);
    const body = validateChatRequest(req.body, { defaultMaxTokens: config.gatewayDefaultMaxTokens });
    const res = reply.raw;
    const gone = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) gone.abort();
    });
    if (body.stream) reply.hijack();
    try {
      const out = await complete(completeDeps, { owner: who, body, res, clientGone: gone.signal });
      if (body.stream) return undefined;
      return reply.send(out.json);
    } catch (err) {
      if (!body.stream) throw err;
      // Hijacked and nothing sent yet: answer the error ourselves in the LLM shape.
      const { status, body: errBody } = llmErrorBody(err, log);
      if (!res.headersSent && !res.destroyed)
        res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(errBody));
      return undefined;
    }
  };

  await app.register(async (scope) => {
    // JSON only: a text/plain body (which Fastify parses by default) is answered 415 as any
    // other wrong content type, not as a JSON object that is "not an object" (issue #15).
    scope.removeContentTypeParser('text/plain');
    scope.setErrorHandler((err, _req, reply) => {
      const { status, body } = llmErrorBody(err, log);
      return reply.status(status).send(body);
    });
    scope.post('/llm', chat);
    scope.post('/v1/chat/completions', chat);
    scope.get('/v1/models', async (req) => {
      await owner(req);
      if (registry.models().length === 0) await registry.refresh();
      return {
        object: 'list',
        data: registry
          .models()
          .map((m) => ({
            id: m.id,
            object: 'model',
            created: 0,
            owned_by: m.id.split('/')[0] ?? 'unknown',
            warm: m.warm,
          })),
      };
    });
    scope.post('/llm/orchestrators', async (req, reply) => {
      const secret = config.orchestratorSecret;
      if (!secret || !secretMatches(req.headers.authorization, secret))
        throw new AuthError('registration needs the shared orchestrator secret');
      const url = (req.body as { url?: unknown } | undefined)?.url;
      if (typeof url !== 'string' || !/^https?:\/\/[^\s]+$/.test(url))
        throw new ValidationError('url: must be the http(s) base URL of the orchestrator');
      registry.add(url, true);
      void registry.refresh();
      return reply.status(204).send();
    });
  });

  // Unknown paths under the LLM prefixes answer in the LLM error shape that OpenAI clients
  // parse, not Fastify's default body.
  for (const prefix of ['/v1', '/llm']) {
    await app.register(
      async (scope) => {
        scope.setNotFoundHandler((req, reply) => {
          const { status, body } = llmErrorBody(
            new NotFoundError(`no such route: ${req.method} ${req.url.split('?')[0] ?? ''}`),
            log,
          );
          return reply.status(status).send(body);
        });
      },
      { prefix },
    );
  }

  // The ledger belongs to the owner-facing /api, so it answers in that API's error shape.
  await app.register(async (scope) => {
    scope.setErrorHandler((err: Error & { statusCode?: number }, _req, reply) => {
      const status =
        err instanceof AuthError
          ? 401
          : err instanceof BadRequestError || err instanceof ValidationError
            ? 400
            : (err.statusCode ?? 500);
      if (status >= 500) log.error({ err }, 'ledger route failed');
      return reply.status(status).send({ errors: [status >= 500 ? 'internal error' : err.message] });
    });
    scope.get('/api/ledger', async (req) => {
      const who = await owner(req);
      const raw = (req.query as { limit?: string } | undefined)?.limit;
      const limit = raw === undefined ? 100 : Number(raw);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
        throw new ValidationError('limit: must be an integer from 1 to 1000');
      return { owner: who, balanceUsd: Number(await ledger.balance(who)), entries: await ledger.entries(who, limit) };
    });
  });

  registry.start();
  // The first poll waits for the server to listen (a path-style orchestrator needs its port).
  app.addHook('onReady', async () => {
    setImmediate(() => void registry.refresh());
  });
  return {
    async close() {
      registry.stop();
    },
  };
}
