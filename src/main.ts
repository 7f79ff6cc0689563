import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Accounts, KeyTaskAdmission, keyLimiter } from './accounts/index.ts';
import {
  assetFinishSteps,
  AssetStore,
  CLIP_TASK_TYPE,
  createClipHandler,
  createExportHandlers,
  createUploadHandler,
  UPLOAD_TASK_TYPE,
  stagingAreaFor,
  UploadStaging,
  uploadSweepJobs,
} from './assets/index.ts';
import { createBuiltinStore } from './storage/builtin/index.ts';
import { configuredBase, publicBase, TRANSCODE_TASK_TYPE, webhookPayload, type PublicBase } from './api/index.ts';
import type { Config } from './config/index.ts';
import { dbSocketPath, openDb, serveDbSocket } from './db/index.ts';
import { closeApp } from './lib/http-server.ts';
import { createLogger, type Logger } from './lib/log.ts';
import { processMetrics } from './lib/metrics.ts';
import type { Registry as MetricsRegistry } from 'prom-client';
import { ensurePrivateDir } from './lib/private-dir.ts';
import { ENCODING_TASK_TYPES, Queue, TaskStore, Worker } from './tasks/index.ts';
import { WebhookDispatcher, WebhookStore } from './webhooks/index.ts';
import { Sweeper } from './lib/sweep.ts';
import { createChunkedHandlers, createTranscodeHandler, loadC2paSigner, setVodNiceness } from './transcode/index.ts';
import { type IngestListener, LiveArchive, type LiveNode } from './live/index.ts';
import { createLiveNode } from './main-live.ts';
import { dwebStoreFactory, loadAgent } from './storage/dweb/index.ts';
import { runCli } from './cli/index.ts';
import { startOrchestrator } from './llm/orchestrator/index.ts';
import { localOrchestratorSecret, orchestratorOptions, startGateway } from './main-llm.ts';
import { createRetentionSweep } from './main-retention.ts';
import { createApp } from './main-api.ts';
import type { Core } from './core.ts';

export type { Core } from './core.ts';

export { orchestratorOptions, startGateway, tuningFromConfig } from './main-llm.ts';
export { createRetentionSweep } from './main-retention.ts';

// The composition root (STYLE.md, practice 1): the only place that builds the database,
// queue, stores and apps and passes them in. Each role below takes what it needs.

export const VERSION = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8'))
  .version as string;

export async function openCore(config: Config, log: Logger): Promise<Core> {
  // Before anything is written in it: the database's WAL holds secrets (issue #25).
  await ensurePrivateDir(config.dataDir, (msg) => log.warn({ dataDir: config.dataDir }, msg));
  // Checked before the database opens: a bad certificate stops start-up with its message.
  const c2paSigner = await loadC2paSigner(config);
  if (c2paSigner) log.info({ subject: c2paSigner.subject, alg: c2paSigner.alg }, 'C2PA signing enabled');
  const agent = await loadAgent(config);
  const db = await openDb({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.databasePoolSize,
  });
  const builtinStore = createBuiltinStore(config);
  // Key limits are counted in the database, so every process shares them. Every task
  // a key makes or requeues is admitted in one place, the task store: the ones that encode (any
  // route's) need its budget and take one of its concurrent transcodes; an export is a request.
  const admission = new KeyTaskAdmission({
    windowMs: config.rateWindowMs,
    encoding: ENCODING_TASK_TYPES,
  });
  const tasks = new TaskStore(db, { follow: { maxPerOwner: config.maxEventStreamsPerOwner }, admission });
  return {
    config,
    log,
    db,
    agent,
    c2paSigner,
    builtinStore,
    assets: new AssetStore(db, {
      tasks,
      store: builtinStore,
      uploadExpiryMs: config.uploadUrlTtlMs,
      maxStagedBytesPerOwner: config.uploadMaxStagedBytesPerOwner,
      // A cancelled worker may still write a file for a while: a deleted asset's files are removed again after it.
      deleteGraceMs: config.leaseMs * 2,
    }),
    accounts: new Accounts(db, { authCacheMs: config.authCacheMs, limiter: keyLimiter(db, config, log) }),
    tasks,
    queue: new Queue(db, {
      leaseMs: config.leaseMs,
      maxRetries: config.maxRetries,
      maxCrashRetries: config.maxCrashRetries,
      progressEventMs: config.taskProgressEventMs,
    }),
    webhooks: new WebhookStore(db, { maxPerOwner: config.maxWebhooksPerOwner }),
  };
}

export function createWorker(core: Core): Worker {
  const dweb = dwebStoreFactory(core.config, core.agent);
  const transcodeDeps = {
    config: core.config,
    log: core.log,
    c2paSigner: core.c2paSigner,
    builtinStore: core.builtinStore,
    objectStores: { 'dweb.storage': dweb, 'web3.storage': dweb },
    // The stitch of a chunked asset runs the asset's finish step.
    finishSteps: assetFinishSteps(),
  };
  const assetDeps = {
    config: core.config,
    store: core.builtinStore,
    log: core.log,
    c2paSigner: core.c2paSigner,
    // Live sessions' archived source: recordings and live clips are made of it.
    archive: new LiveArchive({ db: core.db, store: core.builtinStore, ffmpegPath: core.config.ffmpegPath }),
  };
  // Every video goes through the one job entry (transcode/job.ts): a long input of any of
  // these task types is split into pieces, which the chunked handlers below run.
  const transcode = createTranscodeHandler(transcodeDeps, { split: true });
  return new Worker({
    db: core.db,
    queue: core.queue,
    // One handler per task type; the API's contract for the type says what its params are.
    handlers: {
      [TRANSCODE_TASK_TYPE]: transcode,
      ...createChunkedHandlers(transcodeDeps),
      [UPLOAD_TASK_TYPE]: createUploadHandler(assetDeps, { split: true }),
      [CLIP_TASK_TYPE]: createClipHandler(assetDeps, { split: true }),
      ...createExportHandlers({ config: core.config, store: core.builtinStore, agent: core.agent }),
    },
    log: core.log.child({ role: 'worker' }),
    scratchRoot: join(resolve(core.config.dataDir), 'scratch'),
    concurrency: core.config.workerConcurrency,
    pollMs: core.config.pollMs,
    heartbeatMs: core.config.heartbeatMs,
    retryBackoffMs: core.config.retryBackoffMs,
    retryBackoffMaxMs: core.config.retryBackoffMaxMs,
  });
}

/**
 * Delivers task and asset events to webhooks. Every process with the API or worker role runs one, so
 * deliveries go on while any of them is up; they share the work through the database.
 * The payload is the task or the asset as GET /api/task/{id} or /api/asset/{id} shows it (the API's wire shape).
 */
export function createWebhookDispatcher(
  core: Core,
  metrics?: MetricsRegistry,
  base: PublicBase = configuredBase(core.config),
): WebhookDispatcher {
  const { config } = core;
  return new WebhookDispatcher({
    db: core.db,
    log: core.log.child({ role: 'webhooks' }),
    metrics,
    render: (e) => webhookPayload(e, base),
    allowPrivateUrls: config.allowPrivateUrls,
    timeoutMs: config.webhookTimeoutMs,
    maxAgeMs: config.webhookMaxAgeMs,
    retryMs: config.webhookRetryMs,
    retryMaxMs: config.webhookRetryMaxMs,
    pollMs: config.webhookPollMs,
    concurrency: config.webhookConcurrency,
    resendsPerMinute: config.webhookResendsPerMinute,
    stopGraceMs: Math.min(config.shutdownGraceMs, config.webhookTimeoutMs),
  });
}

/**
 * Upload staging and completion: the bytes wait in the built-in store's bucket when it is
 * S3-protocol (any API process takes any request of an upload), else in this process's data
 * dir; what each owner's uploads hold is counted, and a whole upload finished, by the asset store.
 */
function createUploadStaging(core: Core): UploadStaging {
  return new UploadStaging({
    area: stagingAreaFor(core.builtinStore, resolve(core.config.dataDir)),
    store: core.builtinStore,
    maxBytes: core.config.uploadMaxBytes,
    allowance: core.assets,
    sessions: core.assets,
  });
}

/**
 * Fails uploads past their URL's expiry and frees what was staged for uploads that ended
 * (issue #27): each API process sweeps its own folder, or the shared bucket.
 */
function startUploadSweep(core: Core, staging: UploadStaging): Sweeper {
  const sweep = new Sweeper({
    log: core.log.child({ role: 'uploads' }),
    // Often enough that an expired upload's bytes go within half its lifetime, and those of an
    // upload whose asset was deleted within a minute (until then they count against its owner).
    everyMs: Math.max(1000, Math.min(60_000, core.config.uploadUrlTtlMs / 2)),
    batch: 100,
    jobs: uploadSweepJobs(core.assets, staging),
  });
  sweep.start();
  return sweep;
}

export interface RoleSet {
  /** The transcoding API under /api. */
  api: boolean;
  worker: boolean;
  /** The LLM gateway (POST /llm, /v1/*) on the same HTTP server. */
  gateway?: boolean;
  /** A local orchestrator mounted on the same HTTP server (used by the local gateway). */
  orchestrator?: boolean;
  /** Live ingest: the RTMP and SRT listeners (each unless its port is 0) and the ladders; needs the api role. */
  ingest?: boolean;
}

/** The roles started in this process, and how to stop them. */
export interface StartedRoles {
  url?: string;
  app?: FastifyInstance;
  worker?: Worker;
  /** Deletes old task events, webhook history and expired Idempotency-Keys (with the worker role). */
  retentionSweep?: Sweeper;
  /** Fails expired uploads and frees what this process staged for uploads that ended (with the api role). */
  uploadSweep?: Sweeper;
  /** Delivers task events to webhooks (always built: the API's resend uses it; started with the api or worker role). */
  webhookDispatcher: WebhookDispatcher;
  /** The live runtime (with the ingest role) and its listening ingests. */
  live?: LiveNode;
  ingest?: IngestListener[];
  core: Core;
  /** Graceful stop: stop taking work, finish or release running jobs, close the database. */
  stop(): Promise<void>;
}

/** Starts the roles asked for in this process, sharing one database connection. */
export async function startRoles(
  config: Config,
  roles: RoleSet,
  log = createLogger({ level: config.logLevel }),
): Promise<StartedRoles> {
  const core = await openCore(config, log);
  const closers: Array<() => Promise<void>> = [];
  // One registry for the process: GET /metrics shows every role that runs in it.
  const metrics = processMetrics();
  const delivers = roles.api || roles.worker;
  // Links in webhook payloads start where the API's do: the app's address once it listens.
  let links = configuredBase(config);
  const webhookDispatcher = createWebhookDispatcher(core, delivers ? metrics : undefined, () => links());
  const running: StartedRoles = { core, webhookDispatcher, stop: async () => {} };
  try {
    if (roles.api || roles.gateway) {
      const uploadStaging = createUploadStaging(core);
      if (roles.ingest) running.live = createLiveNode(core, metrics);
      const app = await createApp(
        core,
        { api: roles.api, webhookDispatcher, metrics, uploadStaging, live: running.live },
        VERSION,
      );
      if (roles.api) {
        const sweep = startUploadSweep(core, uploadStaging);
        running.uploadSweep = sweep;
        closers.unshift(() => sweep.stop());
      }
      // Routes are added before listen; the local orchestrator first, so the gateway's
      // first poll (once the server is ready) finds it.
      const orchestrators = [...config.gatewayOrchestrators];
      const localSecret = roles.orchestrator ? await localOrchestratorSecret(config) : undefined;
      if (roles.orchestrator) {
        const options = orchestratorOptions(config);
        const orch = await startOrchestrator({ options, log, app, metrics, secret: localSecret });
        if (orch.url) orchestrators.unshift(orch.url);
        closers.push(() => orch.close());
      }
      if (roles.gateway) {
        const gateway = await startGateway(app, core, { orchestrators, metrics, localSecret });
        closers.unshift(() => gateway.close());
      }
      closers.unshift(() => closeApp(app));
      // After the server: the last batch of request counts is written before the database closes.
      closers.push(async () => core.accounts.limiter?.close());
      running.url = await app.listen({ port: config.port, host: config.host });
      links = publicBase(app, config.publicUrl);
      running.app = app;
      log.info({ url: running.url, version: VERSION }, 'HTTP server listening');
    }
    if (roles.worker) await startWorkerRole(running, closers);
    if (running.live) await startIngest(running, { nextToWorker: roles.worker, closers });
    if (delivers) {
      webhookDispatcher.start();
      // Stopped after the worker and the API; what they write as they stop stays in the outbox
      // for the next process to deliver.
      closers.push(() => webhookDispatcher.stop());
    }
    if (core.db.kind === 'embedded') {
      const socket = await serveDbSocket(core.db, dbSocketPath(config.dataDir));
      closers.push(() => socket.close());
    }
  } catch (err) {
    for (const close of closers) await close().catch(() => {});
    await core.db.close();
    throw err;
  }
  let stopped: Promise<void> | undefined;
  running.stop = () =>
    (stopped ??= (async () => {
      for (const close of closers) await close().catch((err: unknown) => log.error({ err }, 'error while stopping'));
      await core.db.close();
    })());
  return running;
}

/** The worker and, with it, the sweep of old history (several processes may sweep at once). */
async function startWorkerRole(running: StartedRoles, closers: Array<() => Promise<void>>): Promise<void> {
  const { core } = running;
  const worker = createWorker(core);
  await worker.start();
  running.worker = worker;
  closers.unshift(() => worker.stop(core.config.shutdownGraceMs));
  // The processes that run tasks sweep old history (issue #25); several may at once.
  const sweep = createRetentionSweep(core);
  sweep.start();
  running.retentionSweep = sweep;
  closers.unshift(() => sweep.stop());
  core.log.info({ workerId: worker.id, concurrency: core.config.workerConcurrency }, 'worker started');
}

/**
 * Starts the ingest listeners once the API listens (players find the media routes there). Live is
 * stopped first on shutdown: publishers cut off, renditions ended, streams marked idle while the
 * database is open. Beside a worker, VOD's ffmpegs run niced so the ladders keep real time.
 */
async function startIngest(
  running: StartedRoles,
  o: { nextToWorker: boolean; closers: Array<() => Promise<void>> },
): Promise<void> {
  const live = running.live;
  if (!live) return;
  o.closers.unshift(() => live.close());
  // The other nodes reach this one's ladders at its internal URL, else where its API listens.
  running.ingest = await live.listen({ internalUrl: running.core.config.internalUrl ?? running.url });
  if (o.nextToWorker) {
    setVodNiceness(VOD_NICENESS_BESIDE_LIVE);
    o.closers.push(async () => setVodNiceness(0));
  }
}

/** How much lower VOD encodes run beside live ladders (nice 10 of 19: they still progress when live is idle). */
const VOD_NICENESS_BESIDE_LIVE = 10;

/** Stops gracefully on SIGTERM/SIGINT; a second signal exits at once. */
export function stopOnSignals(running: StartedRoles, log: Logger): Promise<void> {
  return new Promise((resolveStopped) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) process.exit(1);
      stopping = true;
      log.info({ signal }, 'shutting down: no new jobs; running jobs finish or are handed back');
      void running.stop().then(resolveStopped);
    };
    // The service owns its shutdown. A dependency (when-exit, via @storacha/client) hooks
    // these signals to re-raise them at once, which would kill the process mid-drain.
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      process.removeAllListeners(sig);
      process.on(sig, onSignal);
    }
  });
}

export async function main(argv: string[]): Promise<number> {
  return runCli(argv, {
    version: VERSION,
    startRoles,
    stopOnSignals,
    startOrchestrator: (config, log) => startOrchestrator({ options: orchestratorOptions(config), log }),
  });
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
