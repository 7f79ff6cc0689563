import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Registry as MetricsRegistry } from 'prom-client';
import { SigningKeyStore } from './access/index.ts';
import { buildApp, IdempotencyKeys } from './api/index.ts';
import type { UploadStaging } from './assets/index.ts';
import type { Config } from './config/index.ts';
import type { Core } from './core.ts';
import { readOrCreate } from './lib/state-file.ts';
import {
  LiveHolders,
  type LivePlayback,
  LiveSessionStore,
  MultistreamTargetStore,
  RemotePlayback,
  StreamStore,
} from './live/index.ts';
import { validateDwebProof } from './storage/dweb/index.ts';
import { CLIENT_TASK_TYPES, ENCODING_TASK_TYPES } from './tasks/index.ts';
import { registerKeyMetrics, UsageStore } from './usage/index.ts';
import type { WebhookDispatcher } from './webhooks/index.ts';

// The API side of the composition root (main.ts): the stores only the API reads are built
// here and handed in with the core's, so nothing under src/api/ builds one
// (test/api/composition.test.ts).

/** What the process gives the API beside the core. */
export interface ApiRole {
  /** The process has the api role: the transcoding API under /api (false for a gateway-only server). */
  api: boolean;
  webhookDispatcher: WebhookDispatcher;
  metrics: MetricsRegistry;
  uploadStaging: UploadStaging;
  /** The live runtime of this process (roles `start` and `ingest`): the API serves its media and cuts its publishers off. */
  live?: LivePlayback | undefined;
}

/** A salt for requesterId hashes that survives restarts: the setting, else a file in the data dir. */
async function requesterSalt(config: Config): Promise<string> {
  return (
    config.requesterSalt ?? readOrCreate(join(config.dataDir, 'requester-salt'), () => randomBytes(16).toString('hex'))
  );
}

/** The HTTP server of this `version`: the transcoding API under /api with the api role, and the operational routes. */
export async function createApp(core: Core, { api, ...role }: ApiRole, version: string): Promise<FastifyInstance> {
  const { config, db } = core;
  if (config.metricsPerKey) registerKeyMetrics(db, role.metrics);
  return buildApp({
    ...core,
    ...role,
    transcodeApi: api,
    version,
    // Signing keys have no cache, so a disabled or deleted key holds at once.
    signingKeys: new SigningKeyStore(db),
    usage: new UsageStore(db, { created: CLIENT_TASK_TYPES, transcoding: ENCODING_TASK_TYPES }),
    idempotency: new IdempotencyKeys(db, { maxWaiters: config.idempotencyMaxWaiters }),
    rules: {
      allowPrivateUrls: config.allowPrivateUrls,
      c2paConfigured: core.c2paSigner !== undefined,
      validateDwebProof: async (proof, field) =>
        void (await validateDwebProof(proof, { agentDid: core.agent.did(), ...(field ? { field } : {}) })),
    },
    bodyLimitBytes: config.bodyLimitBytes,
    bodyMaxDepth: config.bodyMaxDepth,
    timeouts: config,
    publicUrl: config.publicUrl,
    storeServe: config.storeServe,
    storePresignSeconds: config.storePresignSeconds,
    jwtMaxLifetimeSecs: config.jwtMaxLifetimeSecs,
    maxQueuedPerOwner: config.maxQueuedPerOwner,
    requesterSalt: await requesterSalt(config),
    exportProofConfigured: config.dwebExportProof !== undefined,
    streams: new StreamStore(db),
    multistreamTargets: new MultistreamTargetStore(db),
    cluster: liveCluster(core, role.metrics),
    sessions: new LiveSessionStore(db),
    liveClipSecs: config.liveClipSecs,
    ingestPorts: { rtmp: config.rtmpPort, srt: config.srtPort },
  });
}

/**
 * With a cluster secret, viewers here are served the ladders live on the other nodes (found
 * through the database) and those nodes may ask this one's; without one, only this node's.
 */
function liveCluster(core: Core, metrics: MetricsRegistry): { secret: string; remote: RemotePlayback } | undefined {
  const secret = core.config.clusterSecret;
  if (!secret) return undefined;
  const holders = new LiveHolders({ db: core.db });
  return { secret, remote: new RemotePlayback({ holders, secret, metrics }) };
}
