import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Registry as MetricsRegistry } from 'prom-client';
import type { Accounts } from './accounts/index.ts';
import { type Config, explicitSettings, settings } from './config/index.ts';
import type { Db } from './db/index.ts';
import type { Logger } from './lib/log.ts';
import { readOrCreate } from './lib/state-file.ts';
import { Billing, OrchestratorPool, registerGateway, selfBase } from './llm/gateway/index.ts';
import { Ledger } from './llm/ledger.ts';
import type { OrchestratorOptions, Tuning } from './llm/orchestrator/index.ts';

// The LLM side of the composition root (main.ts): the gateway's parts and the orchestrator's
// options, built from the settings and handed in (issue #26: the LLM side takes no Config).

/**
 * The secret the local orchestrator of `mediaplane start` asks of its gateway: the setting,
 * else one generated on first start and kept in the data dir. Its routes are on the public
 * port, and without it anyone could generate text there with no key and no charge (issue #15).
 */
export async function localOrchestratorSecret(config: Config): Promise<string> {
  return (
    config.orchestratorSecret ??
    readOrCreate(join(config.dataDir, 'orchestrator-secret'), () => randomBytes(32).toString('base64url'))
  );
}

/** The tuning variables of the settings (API.md section B, "Orchestrators"). */
export function tuningFromConfig(c: Config): Tuning {
  return {
    use8bit: c.use8bit,
    pipelineParallelSize: c.pipelineParallelSize,
    tensorParallelSize: c.tensorParallelSize,
    maxModelLen: c.maxModelLen,
    // "Left at its default" means not set at all (issue #4): an explicit MAX_MODEL_LEN=8192 is
    // checked like any other value. A config loadConfig did not make (a hand-built object)
    // cannot tell, so there a value equal to the default counts as the default.
    maxModelLenIsDefault: !(explicitSettings(c)?.has('maxModelLen') ?? c.maxModelLen !== settings.maxModelLen.default),
    maxNumBatchedTokens: c.maxNumBatchedTokens,
    maxNumSeqs: c.maxNumSeqs,
    gpuMemoryUtilization: c.gpuMemoryUtilization,
  };
}

/** The orchestrator's options from the settings (issue #26: the LLM side takes no Config). */
export function orchestratorOptions(config: Config): OrchestratorOptions {
  const c = config;
  return {
    engine: {
      kind: c.orchestratorEngine,
      modelsDir: c.modelsDir,
      models: c.orchestratorModels,
      tuning: tuningFromConfig(c),
      llamaCpp: { threads: c.llmThreads, gpu: c.llmGpu, quantization: c.llmQuantization, hubUrl: c.modelHubUrl },
      vllm: { url: c.vllmUrl, command: c.vllmCommand, startTimeoutMs: c.vllmStartTimeoutMs },
    },
    host: c.host,
    port: c.port,
    secret: c.orchestratorSecret,
    pricePerToken: c.orchestratorPricePerToken,
    streamIntervalMs: c.orchestratorStreamIntervalMs,
    bodyLimitBytes: c.bodyLimitBytes,
    bodyMaxDepth: c.bodyMaxDepth,
    timeouts: { requestTimeoutMs: c.requestTimeoutMs, keepAliveTimeoutMs: c.keepAliveTimeoutMs },
    slots: { total: c.maxNumSeqs, maxQueue: c.orchestratorMaxQueue, queueMs: c.orchestratorQueueMs },
    registration: { gateways: c.orchestratorRegisterWith, publicUrl: c.orchestratorPublicUrl },
  };
}

/**
 * The LLM gateway on `app`, its parts built here and handed in (issue #26). Orchestrators are
 * the configured ones and `orchestrators` (with the local one of `mediaplane start`, given as a
 * path on this server, which gets `localSecret` instead of MEDIAPLANE_ORCHESTRATOR_SECRET).
 */
export function startGateway(
  app: FastifyInstance,
  core: { config: Config; log: Logger; db: Db; accounts: Accounts },
  o: { orchestrators?: string[]; metrics?: MetricsRegistry; localSecret?: string | undefined },
): Promise<{ close(): Promise<void> }> {
  const { config } = core;
  const log = core.log.child({ role: 'gateway' });
  const pool = new OrchestratorPool({
    urls: [...config.gatewayOrchestrators, ...(o.orchestrators ?? [])],
    resolveBase: selfBase(app),
    secret: config.orchestratorSecret,
    localSecret: o.localSecret,
    pollMs: config.gatewayPollMs,
    log,
  });
  const ledger = new Ledger(core.db);
  const billing = new Billing(ledger, { usageBased: config.gatewayUsageBased, limiter: core.accounts.limiter });
  return registerGateway(app, {
    settings: config,
    pool,
    ledger,
    billing,
    accounts: core.accounts,
    log,
    metrics: o.metrics,
  });
}
