// The gateway role: POST /llm and the OpenAI-compatible /v1/chat/completions, /v1/models and
// /v1/models/{id}, GET /api/ledger, and POST /llm/orchestrators for self-registration. It
// shares the app (and port) of the transcoding API; orchestrators are reached over HTTP only.

import type { AddressInfo } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { Registry as MetricsRegistry } from 'prom-client';
import type { Accounts } from '../../accounts/index.ts';
import type { Config } from '../../config/index.ts';
import type { Db } from '../../db/index.ts';
import type { Static } from '@sinclair/typebox';
import { AuthError, InternalError, ModelNotFoundError, NotFoundError } from '../../lib/errors.ts';
import { schemaValidatorCompiler } from '../../lib/schema-validator.ts';
import { llmWireErrorFor, tasksWireError, wireErrorHandler } from '../../lib/wire-errors.ts';
import { Ledger } from '../ledger.ts';
import { secretMatches } from '../../lib/bearer.ts';
import { ChatRequestBody, forwardedBodyLimit, toChatRequest, unknownFields } from '../protocol.ts';
import { Billing } from './billing.ts';
import type { CompleteDeps } from './complete.ts';
import { gatewayMetrics } from './metrics.ts';
import { OrchestratorPool } from './pool.ts';
import {
  chatRoute,
  type LedgerQuery,
  ledgerRoute,
  modelRoute,
  modelsRoute,
  type RegistrationBody,
  registrationRoute,
} from './schemas.ts';
import { type GatewayRoutes, serveCompletion } from './serve.ts';
import { registerCompletions } from './completions.ts';
import { registerEmbeddings } from './embeddings.ts';

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

/** A model as OpenAI's GET /v1/models lists it, with whether it is loaded somewhere. */
function modelObject(m: { id: string; warm: boolean }) {
  return { id: m.id, object: 'model' as const, created: 0, owned_by: m.id.split('/')[0] ?? 'unknown', warm: m.warm };
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
  const pool = new OrchestratorPool({
    urls: [...config.gatewayOrchestrators, ...(deps.orchestrators ?? [])],
    resolveBase: selfBase(app),
    secret: config.orchestratorSecret,
    localSecret: deps.localOrchestratorSecret,
    pollMs: config.gatewayPollMs,
    log,
  });
  const ledger = new Ledger(deps.db);
  const completeDeps: CompleteDeps = {
    pool,
    billing: new Billing(ledger, { usageBased: config.gatewayUsageBased }),
    log,
    metrics: gatewayMetrics(deps.metrics ?? new MetricsRegistry(), pool),
    maxForwardBytes: forwardedBodyLimit(config.bodyLimitBytes),
    maxPricePerToken: config.gatewayMaxPricePerToken,
    firstTokenTimeoutMs: config.gatewayFirstTokenTimeoutMs,
    idleTimeoutMs: config.gatewayIdleTimeoutMs,
  };

  // The owner of each request's API key, checked before its body is read or validated (as on
  // the task API: one auth path, one message). Accounts reuses a checked key for
  // MEDIAPLANE_AUTH_CACHE_MS: without that, every chat request pays a database query (~1.2 ms
  // on PGlite) before its first token.
  const owners = new WeakMap<FastifyRequest, string>();
  const requireOwner = async (req: FastifyRequest): Promise<void> => {
    owners.set(req, (await deps.accounts.requirePrincipal(req.headers.authorization)).owner);
  };
  const ownerOf = (req: FastifyRequest): string => {
    const who = owners.get(req);
    if (who === undefined) throw new InternalError('the route has no requireOwner hook');
    return who;
  };

  const routes: GatewayRoutes = { config, log, complete: completeDeps, ledger, requireOwner, ownerOf };
  const chat = async (req: FastifyRequest<{ Body: ChatRequestBody }>, reply: FastifyReply): Promise<unknown> => {
    const body = toChatRequest(req.body, { defaultMaxTokens: config.gatewayDefaultMaxTokens });
    return serveCompletion(routes, req, reply, { body, ignored: unknownFields(req.body, ChatRequestBody) });
  };

  // Chat text is free text: these scopes validate without the task API's plain-text rule.
  const validatorCompiler = schemaValidatorCompiler();
  await app.register(async (scope) => {
    // JSON only: a text/plain body (which Fastify parses by default) is answered 415 as any
    // other wrong content type, not as a JSON object that is "not an object" (issue #15).
    scope.removeContentTypeParser('text/plain');
    scope.setValidatorCompiler(validatorCompiler);
    // OpenAI's shape; under /llm with `detail` beside it for @livepeer/ai (lib/wire-errors.ts).
    scope.setErrorHandler(wireErrorHandler((err, req) => llmWireErrorFor(req.url)(err), log));
    const chatOptions = (summary: string, livepeer: boolean) => ({
      schema: chatRoute(summary, { livepeer }),
      onRequest: requireOwner,
    });
    scope.post<{ Body: ChatRequestBody }>('/llm', chatOptions('Chat completion', true), chat);
    scope.post<{ Body: ChatRequestBody }>(
      '/v1/chat/completions',
      chatOptions('Chat completion (OpenAI-compatible)', false),
      chat,
    );
    for (const register of [registerCompletions, registerEmbeddings]) register(scope, routes);
    scope.get('/v1/models', { schema: modelsRoute, onRequest: requireOwner }, async () => {
      if (pool.models().length === 0) await pool.refresh();
      return { object: 'list', data: pool.models().map(modelObject) };
    });
    // The openai SDK sends `org%2Fname` (one segment, decoded into :id); curl users type
    // `org/name`, which only the wildcard route (kept out of the OpenAPI document) matches.
    const oneModel = async (id: string) => {
      if (!pool.offers(id)) await pool.refresh();
      const m = pool.models().find((x) => x.id === id);
      if (!m) throw new ModelNotFoundError(`The model ${JSON.stringify(id)} does not exist: no orchestrator offers it`);
      return modelObject(m);
    };
    scope.get<{ Params: { id: string } }>(
      '/v1/models/:id',
      { schema: modelRoute, onRequest: requireOwner },
      async (req) => oneModel(req.params.id),
    );
    scope.get<{ Params: { '*': string } }>('/v1/models/*', { onRequest: requireOwner }, async (req) =>
      oneModel(req.params['*']),
    );
    const registrationSecret = async (req: FastifyRequest): Promise<void> => {
      const secret = config.orchestratorSecret;
      if (!secret || !secretMatches(req.headers.authorization, secret))
        throw new AuthError('registration needs the shared orchestrator secret');
    };
    scope.post<{ Body: Static<typeof RegistrationBody> }>(
      '/llm/orchestrators',
      { schema: registrationRoute, onRequest: registrationSecret },
      async (req, reply) => {
        pool.add(req.body.url, true);
        void pool.refresh();
        return reply.status(204).send();
      },
    );
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
    scope.setErrorHandler(wireErrorHandler(tasksWireError, log));
    scope.get<{ Querystring: Static<typeof LedgerQuery> }>(
      '/api/ledger',
      { schema: ledgerRoute, onRequest: requireOwner },
      async (req) => {
        const who = ownerOf(req);
        const limit = req.query.limit ?? 100;
        return { owner: who, balanceUsd: Number(await ledger.balance(who)), entries: await ledger.entries(who, limit) };
      },
    );
  });

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
