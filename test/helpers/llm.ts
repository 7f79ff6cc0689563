// Test helpers for text generation: real orchestrator processes, a real gateway on port 0
// over an in-memory database, and the shared test models.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import Fastify, { type FastifyInstance } from 'fastify';
import type OpenAI from 'openai';
import pino from 'pino';
import { Registry as MetricsRegistry } from 'prom-client';
import { Accounts } from '../../src/accounts/index.ts';
import { loadConfig, type Config, type SettingKey } from '../../src/config/index.ts';
import { openDb, type Db } from '../../src/db/index.ts';
import { Billing, OrchestratorPool, registerGateway, selfBase } from '../../src/llm/gateway/index.ts';
import { Ledger } from '../../src/llm/ledger.ts';
import { orchestratorOptions } from '../../src/main.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The shared GGUF test models, laid out `<org>/<model_name>/*.gguf`. */
export const MODELS_DIR = resolve(REPO_ROOT, '../shared/models');
export const STORIES = 'karpathy/stories260K';
export const TINY = 'stas/tiny-random-llama-2';

const FIXTURE = fileURLToPath(new URL('../llm/fixtures/orchestrator-process.ts', import.meta.url));

export const quietLog = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

/** Settings for tests: defaults, the shared models, CPU, small capacity; `overrides` win. */
export function testConfig(overrides: Partial<Record<SettingKey, unknown>> = {}): Config {
  return loadConfig({
    env: {},
    overrides: {
      host: '127.0.0.1',
      port: 0,
      modelsDir: MODELS_DIR,
      llmGpu: 'cpu',
      maxNumSeqs: 4,
      logLevel: 'silent',
      ...overrides,
    },
  });
}

export interface OrchestratorProcess {
  url: string;
  child: ChildProcess;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Environment of an orchestrator child: CPU, shared models, port 0, plus `env`. */
export function orchestratorEnv(env: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    MEDIAPLANE_PORT: '0',
    MEDIAPLANE_HOST: '127.0.0.1',
    MEDIAPLANE_MODELS_DIR: MODELS_DIR,
    MEDIAPLANE_LLM_GPU: 'cpu',
    MEDIAPLANE_LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
    MAX_NUM_SEQS: '4',
    ...env,
  };
}

/** Runs the orchestrator fixture until it prints its URL (or exits: then rejects with its stderr). */
export async function startOrchestratorProcess(env: Record<string, string> = {}): Promise<OrchestratorProcess> {
  const child = spawn(process.execPath, [FIXTURE], {
    cwd: REPO_ROOT,
    env: orchestratorEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => {
    stderr += b.toString();
    if (process.env.TEST_LOG_LEVEL) process.stderr.write(b);
  });
  const exited = once(child, 'exit');
  const lines = createInterface({ input: child.stdout! });
  const first = new Promise<string>((res) => lines.once('line', res));
  const winner = await Promise.race([first, exited.then(() => null)]);
  if (winner === null) throw new Error(`orchestrator exited: ${stderr.trim()}`);
  const { url } = JSON.parse(winner) as { url: string };
  return {
    url,
    child,
    async kill(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      await exited;
    },
  };
}

/** Runs the fixture expecting it to fail; resolves with its exit code and stderr. */
export async function orchestratorFailure(
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [FIXTURE], {
    cwd: REPO_ROOT,
    env: orchestratorEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, stderr };
}

export interface TestGateway {
  url: string;
  app: FastifyInstance;
  db: Db;
  accounts: Accounts;
  config: Config;
  /** The gateway's metrics (what GET /metrics would show beside the API's own). */
  metrics: MetricsRegistry;
  /** Creates an owner with a key; `usd` adds credits. */
  owner(name: string, usd?: number): Promise<string>;
  close(): Promise<void>;
}

/**
 * The gateway's routes on `app`, its parts built as src/main.ts startGateway builds them (issue
 * #26: registerGateway is handed its pool, ledger and billing), with the test's settings.
 */
export function registerTestGateway(
  app: FastifyInstance,
  o: { config: Config; db: Db; accounts: Accounts; orchestrators?: string[] | undefined; metrics?: MetricsRegistry },
): Promise<{ close(): Promise<void> }> {
  const { config } = o;
  const pool = new OrchestratorPool({
    urls: [...config.gatewayOrchestrators, ...(o.orchestrators ?? [])],
    resolveBase: selfBase(app),
    secret: config.orchestratorSecret,
    pollMs: config.gatewayPollMs,
    log: quietLog,
  });
  const ledger = new Ledger(o.db);
  const billing = new Billing(ledger, { usageBased: config.gatewayUsageBased, limiter: o.accounts.limiter });
  return registerGateway(app, {
    settings: config,
    pool,
    ledger,
    billing,
    accounts: o.accounts,
    log: quietLog,
    metrics: o.metrics,
  });
}

export async function startGateway(
  opts: {
    orchestrators?: string[];
    config?: Partial<Record<SettingKey, unknown>>;
    db?: Db;
    mount?: (app: FastifyInstance) => Promise<void>;
  } = {},
): Promise<TestGateway> {
  const config = testConfig({ gatewayPollMs: 60_000, ...opts.config });
  const db = opts.db ?? (await openDb({}));
  // As in production (src/main.ts): checked keys are reused for MEDIAPLANE_AUTH_CACHE_MS.
  const accounts = new Accounts(db, { authCacheMs: config.authCacheMs });
  const app = Fastify();
  await opts.mount?.(app);
  const metrics = new MetricsRegistry();
  const gw = await registerTestGateway(app, { config, db, accounts, orchestrators: opts.orchestrators, metrics });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    url,
    app,
    db,
    accounts,
    config,
    metrics,
    async owner(name, usd) {
      const { key } = await accounts.createKey(name);
      if (usd)
        await db.query(
          `INSERT INTO llm_balances (owner, balance_usd) VALUES ($1, $2) ON CONFLICT (owner) DO UPDATE SET balance_usd = llm_balances.balance_usd + EXCLUDED.balance_usd`,
          [name, usd],
        );
      return key;
    },
    async close() {
      await gw.close();
      await app.close();
      if (!opts.db) await db.close();
    },
  };
}

export interface LocalLlm {
  /** The gateway's base URL. */
  url: string;
  gw: TestGateway;
  /** The key of the owner "alice" (no credits: the mounted orchestrator is free). */
  key: string;
  /** The openai SDK on the gateway's /v1 with `key`, never retrying. */
  client: OpenAI;
  /** The secret between the gateway and the orchestrator, whose own routes are at `${url}/orchestrator`. */
  secret: string;
  close(): Promise<void>;
}

/**
 * A gateway with a llama.cpp orchestrator mounted in its app (both roles in one server, as
 * `mediaplane start` runs them) serving `models`; `config` adds to the orchestrator's settings.
 */
export async function startLocalLlm(opts: {
  models: string[];
  config?: Partial<Record<SettingKey, unknown>>;
}): Promise<LocalLlm> {
  // Imported here: most tests of this helper's users need neither node-llama-cpp nor the SDK.
  const { startOrchestrator } = await import('../../src/llm/orchestrator/index.ts');
  const { default: OpenAI } = await import('openai');
  const secret = 'local-llm-test-orchestrator-secret';
  let orch: { close(): Promise<void> } | undefined;
  const gw = await startGateway({
    orchestrators: ['/orchestrator'],
    config: { orchestratorSecret: secret },
    mount: async (app) => {
      orch = await startOrchestrator({
        options: orchestratorOptions(
          testConfig({ orchestratorModels: opts.models, orchestratorSecret: secret, ...opts.config }),
        ),
        log: quietLog,
        app,
      });
    },
  });
  const key = await gw.owner('alice');
  return {
    url: gw.url,
    gw,
    key,
    client: new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 }),
    secret,
    async close() {
      await gw.close();
      await orch?.close();
    },
  };
}

/**
 * The sum of the samples named `sample` in Prometheus text whose labels include `labels`
 * (a histogram's count is the sample `<name>_count`); 0 when there is none.
 */
export function sampleSum(text: string, sample: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== sample) continue;
    const have = new Map([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(m[3]);
  }
  return sum;
}

/** Reads an SSE response body whole: its events in order. */
export async function readSse(res: Response): Promise<Array<{ event?: string | undefined; data: string }>> {
  const { parseSse } = await import('../../src/lib/sse.ts');
  const out: Array<{ event?: string | undefined; data: string }> = [];
  if (!res.body) return out;
  for await (const ev of parseSse(res.body)) out.push({ event: ev.event, data: ev.data });
  return out;
}
