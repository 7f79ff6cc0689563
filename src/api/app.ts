import { Ajv } from 'ajv';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type RawServerDefault } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Registry as MetricsRegistry } from 'prom-client';
import type { Accounts } from '../accounts/index.ts';
import type { Db } from '../db/index.ts';
import type { Queue, TaskStore } from '../tasks/index.ts';
import { parserErrorBody, transcodeApiErrorHandler, transcodeApiNotFound } from './errors.ts';
import { clientErrorHandler, serverTimeoutOptions, type ServerTimeouts } from '../lib/http-server.ts';
import { serveMetrics } from '../lib/metrics.ts';
import { createMetrics } from './metrics.ts';
import { collectOpenApi } from './openapi.ts';
import { plainTextKeyword, withPlainText } from './plain-text.ts';
import { taskRoutes } from './routes.ts';
import type { TranscodeRules } from './validate-transcode.ts';

export interface ApiDeps {
  /** Mount the transcoding API under /api (false for a gateway-only server). */
  transcodeApi: boolean;
  db: Db;
  accounts: Accounts;
  tasks: TaskStore;
  queue: Queue;
  log: Logger;
  rules: TranscodeRules;
  bodyLimitBytes: number;
  timeouts: ServerTimeouts;
  /** The base URL clients reach the API at (MEDIAPLANE_PUBLIC_URL); links are relative without it. */
  publicUrl?: string | undefined;
  maxQueuedPerOwner: number;
  requesterSalt: string;
  version: string;
  /** The registry GET /metrics serves, shared with the other roles of the process (lib/metrics processMetrics). */
  metrics?: MetricsRegistry;
}

/**
 * The HTTP server with the transcoding API under /api and the operational routes. Other
 * roles (the LLM gateway, a local orchestrator) register their routes on the same instance.
 */
export async function buildApp(deps: ApiDeps): Promise<FastifyInstance> {
  // The request in flight on each socket, so an error Node's parser raises mid-request is
  // answered in that request's API shape.
  const inFlight = new WeakMap<Socket, string>();
  const app = Fastify<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger>({
    loggerInstance: deps.log,
    bodyLimit: deps.bodyLimitBytes,
    trustProxy: false,
    ...serverTimeoutOptions(deps.timeouts),
    clientErrorHandler: clientErrorHandler({
      requestTimeoutMs: deps.timeouts.requestTimeoutMs,
      body: (e, socket) => parserErrorBody(e, inFlight.get(socket)),
    }),
  });
  app.addHook('onRequest', async (req) => {
    inFlight.set(req.raw.socket, req.url);
  });
  app.setValidatorCompiler(validatorCompiler());
  // An empty body with a JSON content type is what several clients send to POST routes
  // without a body (cancel, retry); treat it as no body rather than malformed JSON.
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(
        Object.assign(new Error('invalid JSON'), { statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY' }),
        undefined,
      );
    }
  });

  const openapi = collectOpenApi(app, { title: 'Mediaplane API', version: deps.version });
  const metrics = createMetrics({ tasks: deps.tasks, queue: deps.queue, registry: deps.metrics });
  metrics.instrument(app);

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    try {
      await deps.db.query('SELECT 1');
      return { status: 'ok' };
    } catch {
      return reply.status(503).send({ status: 'database unreachable' });
    }
  });
  serveMetrics(app, metrics.registry);
  app.get('/api/openapi.json', async () => openapi());

  if (!deps.transcodeApi) return app;
  await app.register(
    async (api) => {
      api.setErrorHandler(transcodeApiErrorHandler(deps.log));
      api.setNotFoundHandler(transcodeApiNotFound);
      await taskRoutes(api, deps);
    },
    { prefix: '/api' },
  );
  return app;
}

// Bodies: unknown properties are errors (spec: "no unknown top-level keys"), never stripped;
// types are never coerced; every problem is reported, not just the first. Query strings and
// path parameters are text, so only they are coerced (limit=20). Every string of every part
// must be plain text (api/plain-text.ts, issue #15): one rule at each schema's root.
function validatorCompiler() {
  const strict = new Ajv({
    removeAdditional: false,
    coerceTypes: false,
    useDefaults: false,
    allErrors: true,
    strict: false,
    keywords: [plainTextKeyword],
  });
  const coercing = new Ajv({
    removeAdditional: false,
    coerceTypes: true,
    useDefaults: true,
    allErrors: true,
    strict: false,
    keywords: [plainTextKeyword],
  });
  return ({ schema, httpPart }: { schema: object; httpPart?: string }) =>
    (httpPart === 'querystring' || httpPart === 'params' ? coercing : strict).compile(withPlainText(schema));
}
