import { BadRequestError, NotFoundError } from '../lib/errors.ts';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type RawServerDefault,
} from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Registry as MetricsRegistry } from 'prom-client';
import type { SigningKeyStore } from '../access/index.ts';
import type { Accounts, Principal } from '../accounts/index.ts';
import type { AssetStore, UploadStaging } from '../assets/index.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import type { Db } from '../db/index.ts';
import type {
  LivePlayback,
  LiveSessionStore,
  MultistreamTargetStore,
  RemoteCut,
  RemoteLadders,
  StreamStore,
} from '../live/index.ts';
import type { Queue, TaskStore } from '../tasks/index.ts';
import { jsonBodyParser } from '../lib/json-body.ts';
import { type RequestAuth, requestAuth } from '../lib/request-auth.ts';
import { schemaValidatorCompiler } from '../lib/schema-validator.ts';
import {
  sharedErrorHandler,
  sharedNotFound,
  transcodeApiErrorHandler,
  transcodeApiNotFound,
  wireErrorFor,
} from './errors.ts';
import {
  bodyDeadline,
  clientErrorHandler,
  noSniff,
  serverTimeoutOptions,
  type ServerTimeouts,
} from '../lib/http-server.ts';
import { routineRouteLevel } from '../lib/log.ts';
import { oneLineRequestLogging, requestLog } from '../lib/request-log.ts';
import { serveMetrics } from '../lib/metrics.ts';
import { createMetrics } from './metrics.ts';
import { collectOpenApi } from './openapi.ts';
import { plainTextKeyword, withPlainText } from './plain-text.ts';
import type { IdempotencyKeys } from './idempotency.ts';
import { taskRoutes } from './routes.ts';
import type { TranscodeRules } from './validate-transcode.ts';
import { accessControlRoutes } from './access-control-routes.ts';
import { assetRoutes } from './asset-routes.ts';
import { capabilitiesRoutes } from './capabilities-routes.ts';
import { clipRoutes } from './clip-routes.ts';
import { type LiveClipSources, liveClipRoutes } from './live-clip-routes.ts';
import { consoleRoutes } from './console-routes.ts';
import { keyRoutes } from './key-routes.ts';
import { exportRoutes } from './export-routes.ts';
import { streamPlayback, streamRoutes } from './stream-routes.ts';
import { multistreamRoutes } from './multistream-routes.ts';
import { sessionRoutes } from './session-routes.ts';
import { mediaAccess } from './media-access.ts';
import { mediaRoutes } from './media-routes.ts';
import { internalLiveRoutes } from './internal-live-routes.ts';
import { liveMediaRoutes } from './live-media-routes.ts';
import { playerRoutes } from './player-routes.ts';
import { type PublicBase, publicBase } from './public-base.ts';
import { uploadRoutes } from './upload-routes.ts';
import { usageRoutes } from './usage-routes.ts';
import type { UsageStore } from '../usage/index.ts';
import { webhookRoutes, type WebhookResender, type WebhookStoreLike } from './webhook-routes.ts';

export interface ApiDeps {
  /** Mount the transcoding API under /api (false for a gateway-only server). */
  transcodeApi: boolean;
  /** GET /readyz asks it `SELECT 1`; the stores below are what the routes read and write. */
  db: Pick<Db, 'query'>;
  accounts: Accounts;
  tasks: TaskStore;
  queue: Queue;
  /** The webhooks of /api/webhook (webhooks/ WebhookStore). */
  webhooks: WebhookStoreLike;
  /** Sends a logged delivery again for POST /api/webhook/{id}/log/{logId}/resend (webhooks/ WebhookDispatcher). */
  webhookDispatcher: WebhookResender;
  log: Logger;
  rules: TranscodeRules;
  bodyLimitBytes: number;
  /** MEDIAPLANE_BODY_MAX_DEPTH: the deepest nesting of a JSON body (400 past it). */
  bodyMaxDepth: number;
  timeouts: ServerTimeouts;
  /** The base URL clients reach the API at (MEDIAPLANE_PUBLIC_URL); links are relative without it. */
  publicUrl?: string | undefined;
  maxQueuedPerOwner: number;
  /** Idempotency-Keys of the routes that create (api/idempotency.ts). */
  idempotency: IdempotencyKeys;
  /** The owners' playback signing keys (/api/access-control, and /media's JWT check). */
  signingKeys: SigningKeyStore;
  /** What the keys used, for /api/usage. */
  usage: UsageStore;
  requesterSalt: string;
  version: string;
  /** The built-in store (issue #27): /media serves it. */
  builtinStore: BuiltinStore;
  /** MEDIAPLANE_STORE_SERVE and MEDIAPLANE_STORE_PRESIGN_SECONDS. */
  storeServe: 'proxy' | 'redirect';
  storePresignSeconds: number;
  /** MEDIAPLANE_JWT_MAX_LIFETIME_SECS: the longest a playback JWT may be valid for; absent: no bound. */
  jwtMaxLifetimeSecs?: number;
  assets: AssetStore;
  /** Where upload bytes wait until they are whole, and their completion (assets/staging.ts, built in main.ts). */
  uploadStaging: UploadStaging;
  /** The registry GET /metrics serves, shared with the other roles of the process (lib/metrics processMetrics). */
  metrics?: MetricsRegistry;
  /** MEDIAPLANE_DWEB_EXPORT_PROOF is set: an asset export to IPFS may come without a proof of its own. */
  exportProofConfigured?: boolean;
  /** Where the built browser console is (issue #29); console/dist beside src/ when absent. */
  consoleDir?: string;
  /** Live streams (spec/API.md section D): their rows, and the runtime of this node when it takes publishers. */
  streams: StreamStore;
  live?: LivePlayback | undefined;
  /**
   * Several nodes (MEDIAPLANE_CLUSTER_SECRET set): the ladders live on other nodes, which viewers
   * here are served, and the secret those nodes ask this one's /internal/live/ with.
   */
  cluster?: { remote: RemoteLadders & RemoteCut; secret: string } | undefined;
  /** MEDIAPLANE_RTMP_PORT and MEDIAPLANE_SRT_PORT, for the streams' ingest URLs (0: that ingest is off). */
  ingestPorts: { rtmp: number; srt: number };
  /** Saved restream targets (live/ MultistreamTargetStore): their routes, and the streams' inline specs saved there. */
  multistreamTargets?: MultistreamTargetStore | undefined;
  /** Live sessions (live/ LiveSessionStore): their routes, a live clip's session and GET /api/session/{id}/clips read them. */
  sessions?: Pick<LiveSessionStore, 'get' | 'list'> | undefined;
  /** MEDIAPLANE_LIVE_CLIP_SECS: how far back a clip of a live stream may reach, and its longest length. */
  liveClipSecs?: number | undefined;
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
    ...oneLineRequestLogging(),
    bodyLimit: deps.bodyLimitBytes,
    trustProxy: false,
    ...serverTimeoutOptions(deps.timeouts),
    clientErrorHandler: clientErrorHandler({
      requestTimeoutMs: deps.timeouts.requestTimeoutMs,
      answer: (e, socket) => wireErrorFor(inFlight.get(socket))(e),
    }),
    // A URL Fastify's router cannot decode (`%zz`) is answered before any route runs: in the
    // shape of the API its path belongs to, and under /media as a missing file, like any other
    // path trick there (issue #27).
    frameworkErrors: (_err, req, reply) => {
      const path = req.raw.url ?? '';
      const err = path.startsWith('/media/')
        ? new NotFoundError()
        : new BadRequestError('the request URL is not valid (a bad percent-encoding?)');
      const { status, body } = wireErrorFor(path)(err);
      // The reply's generics are those of a route with no schema; the body is the API's error shape.
      void (reply as unknown as FastifyReply).code(status).send(body);
    },
  });
  app.addHook('onRequest', async (req) => {
    inFlight.set(req.raw.socket, req.url);
  });
  noSniff(app);
  // One line a request, with a 4xx's reason; probes, the console's files and /media at debug.
  requestLog(app);
  // The body's deadline, in the shape of the API the request is for (uploads: an idle timeout).
  bodyDeadline(app, { timeouts: deps.timeouts, answer: (e, req) => wireErrorFor(req.url)(e) });
  // Every string of every part the task API validates must be plain text (api/plain-text.ts,
  // issue #15): one rule at each schema's root. The LLM routes set their own (chat text is free).
  app.setValidatorCompiler(schemaValidatorCompiler({ keywords: [plainTextKeyword], prepare: withPlainText }));
  // Whatever no API's scope answers (a root route, an unknown path) answers in the shape of
  // the API its path belongs to.
  app.setErrorHandler(sharedErrorHandler(deps.log));
  app.setNotFoundHandler(sharedNotFound);
  // Every JSON body of every API on this app (and of a local orchestrator mounted on it): an
  // empty one is no body, one nested past bodyMaxDepth a 400 before it is built (issue #25).
  app.addContentTypeParser('application/json', { parseAs: 'string' }, jsonBodyParser({ maxDepth: deps.bodyMaxDepth }));

  const openapi = collectOpenApi(app, { title: 'Mediaplane API', version: deps.version });
  const metrics = createMetrics({ tasks: deps.tasks, queue: deps.queue, registry: deps.metrics });
  metrics.instrument(app);

  // Probes come every few seconds: their lines only at debug (lib/log.ts routineRouteLevel).
  const probeLevel = { logLevel: routineRouteLevel(app.log.level) };
  app.get('/healthz', probeLevel, async () => ({ status: 'ok' }));
  app.get('/readyz', probeLevel, async (_req, reply) => {
    try {
      await deps.db.query('SELECT 1');
      return { status: 'ok' };
    } catch {
      return reply.status(503).send({ status: 'database unreachable' });
    }
  });
  serveMetrics(app, metrics.registry);
  app.get('/api/openapi.json', async () => openapi());

  if (deps.transcodeApi) {
    await mediaAndApiRoutes(app, deps);
    // The browser console at `/` (issue #29): a client of /api, so only where /api is. It
    // uploads to and plays from the base the API's absolute URLs start with.
    const base = publicBase(app, deps.publicUrl);
    await consoleRoutes(app, { publicBase: base, ...(deps.consoleDir ? { dir: deps.consoleDir } : {}) });
    // The console's embed snippet loads the player from here, not from a CDN.
    await playerRoutes(app);
  }
  return app;
}

/** /media and everything under /api: tasks, webhooks, uploads, assets, clips, exports, signing keys. */
async function mediaAndApiRoutes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
  const base = publicBase(app, deps.publicUrl);
  const { signingKeys } = deps;
  await mediaRoutes(app, {
    store: deps.builtinStore,
    serve: deps.storeServe,
    presignSeconds: deps.storePresignSeconds,
    authorize: mediaAccess({ assets: deps.assets, signingKeys, jwtMaxLifetimeSecs: deps.jwtMaxLifetimeSecs }),
  });
  await liveMediaRoutes(app, {
    streams: deps.streams,
    live: deps.live,
    remote: deps.cluster?.remote,
    signingKeys,
    jwtMaxLifetimeSecs: deps.jwtMaxLifetimeSecs,
  });
  await internalLiveRoutes(app, { secret: deps.cluster?.secret, live: deps.live });
  await app.register(
    async (api) => {
      // Every route under /api names this check itself (lib/request-auth.ts, issue #26); an
      // unknown path asks for a key too, so without one it is a 401, not a map of the routes.
      // Every request of a key counts against its limits here (issue #32), on this API and the LLM routes alike.
      // A route whose task counts its key's request (its config's countsKeyRequest, create-route.ts)
      // has it counted in its task's insert (one statement, the task store's admission); one
      // answered before the insert is counted once answered. Every other route counts it here.
      const auth = requestAuth(async (header, req, reply) => {
        const defer = reply && req.routeOptions.config.countsKeyRequest ? { done: false } : undefined;
        const p = await deps.accounts.admit(header, { address: req.ip, defer });
        const counted = (err: unknown) => deps.log.warn({ err }, 'could not count a request against its key limits');
        if (p.deferred) reply?.raw.once('close', () => void deps.accounts.limiter?.countDeferred(p).catch(counted));
        return p;
      });
      api.setErrorHandler(transcodeApiErrorHandler(deps.log));
      api.setNotFoundHandler(async (req, reply) => {
        await auth.hook(req);
        return transcodeApiNotFound(req, reply);
      });
      await apiRoutes(api, deps, { auth, publicBase: base });
    },
    { prefix: '/api' },
  );
}

/** The routes modules under /api, each handed what it uses of the API's deps and nothing more. */
async function apiRoutes(
  api: FastifyInstance,
  deps: ApiDeps,
  edge: { auth: RequestAuth<Principal>; publicBase: PublicBase },
): Promise<void> {
  const { auth, publicBase: base } = edge;
  const { assets, tasks, rules, publicUrl, idempotency, exportProofConfigured } = deps;
  // What each route that makes a task uses: its Idempotency-Key, the requester's id, the owner's queue bound, links.
  const creates = {
    auth,
    publicBase: base,
    idempotency,
    maxQueuedPerOwner: deps.maxQueuedPerOwner,
    requesterSalt: deps.requesterSalt,
  };
  await taskRoutes(api, { ...creates, tasks, rules, publicUrl });
  const { webhooks, webhookDispatcher } = deps;
  await webhookRoutes(api, { auth, idempotency, webhooks, webhookDispatcher, rules, publicUrl });
  await uploadRoutes(api, { sessions: assets, staging: deps.uploadStaging, publicBase: base });
  const streamInfo = streamPlayback(deps.streams, base);
  await assetRoutes(api, { ...creates, assets, rules, publicUrl, streamPlayback: streamInfo });
  const liveClips = liveClipSources(deps);
  await clipRoutes(api, { ...creates, assets, live: liveClips });
  if (liveClips) await liveClipRoutes(api, { auth, live: liveClips, assets, publicBase: base, publicUrl });
  await exportRoutes(api, { ...creates, assets, tasks, rules, exportProofConfigured });
  await accessControlRoutes(api, { auth, signingKeys: deps.signingKeys, publicUrl });
  const { streams, live, ingestPorts } = deps;
  const saver = deps.multistreamTargets;
  const targets = saver && { saver, rules };
  await streamRoutes(api, {
    auth,
    streams,
    live,
    remote: deps.cluster?.remote,
    publicBase: base,
    publicUrl,
    ingestPorts,
    targets,
  });
  if (saver) await multistreamRoutes(api, { auth, targets: saver, streams, rules, publicUrl });
  if (deps.sessions)
    await sessionRoutes(api, { auth, sessions: deps.sessions, streams, assets, publicBase: base, publicUrl });
  await keyRoutes(api, { auth, accounts: deps.accounts, windowMs: deps.accounts.limiter?.windowMs ?? 60_000 });
  await usageRoutes(api, { auth, usage: deps.usage });
  await capabilitiesRoutes(api, { auth, rules, exportProofConfigured, publicBase: base });
}

/** What clips of live streams read, where the live sessions are known. */
function liveClipSources(deps: ApiDeps): LiveClipSources | undefined {
  if (!deps.sessions || deps.liveClipSecs === undefined) return undefined;
  return { streams: deps.streams, sessions: deps.sessions, clipSecs: deps.liveClipSecs };
}
