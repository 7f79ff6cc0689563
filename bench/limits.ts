// What key limits cost (issue #32), against keys without limits in the same run, on the same
// service process. Not part of `npm test`.
//   node bench/limits.ts [--rounds 200] [--seconds 10] [--connections 10] [--post-rounds 3] [--only llm|transcode]
//   (DATABASE_URL set: against that PostgreSQL server; else the embedded database)
//
// 1. LLM: added time to first token (target < 1 ms at p50). One service process (API, gateway
//    and a local orchestrator with tiny-random-llama-2, as `mediaplane start` runs them); two
//    keys of one owner: `none` has no limit, `limited` has every limit a request meets before
//    its first token (requests and tokens per minute, a monthly budget, a model allowlist, an
//    expiry), all far from reached; and `rpm`, a third, has only a requests limit (its share:
//    the request window; the rest of `limited`'s is the tokens window and the budget). A round
//    streams one short completion with each, in a shuffled order; TTFT is from the request
//    sent to the first byte of the answer's body.
//    The orchestrator is priced (BENCH_PRICE, default 1e-9 USD a token), so both keys reserve
//    in the ledger before forwarding and the limited one checks its budget too; BENCH_PRICE=0
//    measures the free path (nothing written before the first token without limits).
// 2. POST /api/transcode throughput (target >= 0.9): autocannon, each request with the next of
//    400 keys of 400 owners, keys without limits against keys with requests per minute,
//    concurrent transcodes and a budget, far from reached (and keys with a requests limit
//    only, `rpm`); none, then limited, none, rpm, none --post-rounds times (each limited run against the mean of the none runs on either side;
//    the median reported). The address guard is off (no DNS lookup of the body's host).
// Run it with `nice -n 10` on a shared host.
//
// The file is also its own child (`--child service`).

import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Accounts } from '../src/accounts/index.ts';
import { openDb } from '../src/db/index.ts';
import { Ledger } from '../src/llm/ledger.ts';
import { startChild } from './child.ts';
import { median, quantile } from './stats.ts';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const ONLY = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : undefined;
const ROUNDS = arg('rounds', 200);
const SECONDS = arg('seconds', 10);
const CONNECTIONS = arg('connections', 10);
const POST_ROUNDS = arg('post-rounds', 3);
const MODEL = 'stas/tiny-random-llama-2';
const MODELS_DIR = fileURLToPath(new URL('../../shared/models', import.meta.url));
const PRICE = process.env.BENCH_PRICE ?? '0.000000001';
const SELF = fileURLToPath(import.meta.url);
const OWNERS = 400;

// As a child: the service, until the parent kills it.
if (process.argv.includes('--child')) {
  process.once('disconnect', () => process.exit(1));
  const { loadConfig } = await import('../src/config/index.ts');
  const { startRoles } = await import('../src/main.ts');
  const running = await startRoles(loadConfig(), { api: true, worker: false, gateway: true, orchestrator: true });
  console.log(JSON.stringify({ url: running.url }));
  await new Promise(() => {});
}

/** Every limit a request meets before its first token, far from reached. */
const LIMITS = {
  requests_per_minute: 2_000_000_000,
  tokens_per_minute: 2_000_000_000,
  concurrent_transcodes: 1_000_000,
  budget_usd: '1000000',
  budget_period: 'month',
};
async function limit(db: { query(sql: string, p?: unknown[]): Promise<unknown> }, keyId: string, models: boolean) {
  await db.query(
    `UPDATE api_keys SET requests_per_minute = $2, tokens_per_minute = $3, concurrent_transcodes = $4,
       budget_usd = $5::numeric, budget_period = $6, models = $7::text[], expires_at = now() + interval '1 day'
     WHERE id = $1`,
    [
      keyId,
      LIMITS.requests_per_minute,
      LIMITS.tokens_per_minute,
      LIMITS.concurrent_transcodes,
      LIMITS.budget_usd,
      LIMITS.budget_period,
      models ? [MODEL] : null,
    ],
  );
}

const dataDir = mkdtempSync(join(tmpdir(), 'mediaplane-bench-limits-'));
const env: Record<string, string> = {
  MEDIAPLANE_DATA_DIR: dataDir,
  MEDIAPLANE_PORT: '0',
  MEDIAPLANE_LOG_LEVEL: 'warn',
  MEDIAPLANE_MODELS_DIR: MODELS_DIR,
  MEDIAPLANE_LLM_GPU: 'cpu',
  MEDIAPLANE_LLM_THREADS: '1',
  MEDIAPLANE_ORCHESTRATOR_MODELS: MODEL,
  MEDIAPLANE_ORCHESTRATOR_PRICE_PER_TOKEN: PRICE,
  // As bench/api.ts: no DNS lookup of the body's example.com (the address guard), which this
  // host cannot resolve; the bench measures the API's path, not a resolver.
  MEDIAPLANE_ALLOW_PRIVATE_URLS: 'true',
  // No worker runs the tasks: an owner's queue (100 by default) would fill in a long run and
  // answer 429s the bench would take for a key limit.
  MEDIAPLANE_MAX_QUEUED_PER_OWNER: '1000000',
};

// Keys, limits and credit, written before the service opens the database (the embedded one
// belongs to one process at a time).
const keys = {
  llmNone: '',
  llmRpm: '',
  llmLimited: '',
  none: [] as string[],
  rpm: [] as string[],
  limited: [] as string[],
};
{
  const db = await openDb({ databaseUrl: process.env.DATABASE_URL, dataDir });
  const accounts = new Accounts(db);
  keys.llmNone = (await accounts.createKey('llm')).key;
  const limited = await accounts.createKey('llm');
  keys.llmLimited = limited.key;
  await limit(db, limited.id, true);
  const rpm = await accounts.createKey('llm');
  keys.llmRpm = rpm.key;
  await db.query('UPDATE api_keys SET requests_per_minute = $2 WHERE id = $1', [rpm.id, LIMITS.requests_per_minute]);
  await new Ledger(db).credit({ owner: 'llm', usd: 1000 });
  for (let i = 0; i < OWNERS; i++) {
    keys.none.push((await accounts.createKey(`none${i}`)).key);
    const k = await accounts.createKey(`limited${i}`);
    await limit(db, k.id, false);
    keys.limited.push(k.key);
    const r = await accounts.createKey(`rpm${i}`);
    await db.query('UPDATE api_keys SET requests_per_minute = $2 WHERE id = $1', [r.id, LIMITS.requests_per_minute]);
    keys.rpm.push(r.key);
  }
  await db.close();
}

function startService(): Promise<{ child: ChildProcess; url: string }> {
  return startChild([SELF, '--child', 'service'], env, /"url":"([^"]+)"/);
}

const agent = new http.Agent({ keepAlive: true });
/** One streamed completion: ms to the first byte of the body, and the status. */
function ttft(url: string, key: string, seed: number): Promise<number> {
  const body = JSON.stringify({
    model: MODEL,
    messages: [{ role: 'user', content: 'Say hello.' }],
    max_tokens: 4,
    seed,
    stream: true,
  });
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}/v1/chat/completions`,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let first = 0;
        let text = '';
        res.on('data', (c: Buffer) => {
          first ||= performance.now();
          if (res.statusCode !== 200) text += c.toString();
        });
        res.on('end', () =>
          res.statusCode === 200 ? resolve(first - t0) : reject(new Error(`${res.statusCode}: ${text}`)),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

type LlmLeg = 'none' | 'rpm' | 'limited';
const LLM_LEGS: readonly LlmLeg[] = ['none', 'rpm', 'limited'];

/** A copy of `xs` in a random order (Fisher-Yates). */
function shuffled<T>(xs: readonly T[]): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

async function llmLeg(url: string): Promise<object> {
  const legs: Record<LlmLeg, string> = { none: keys.llmNone, rpm: keys.llmRpm, limited: keys.llmLimited };
  for (let i = 0; i < 10; i++) for (const leg of LLM_LEGS) await ttft(url, legs[leg], i); // warm-up
  const runs: Record<LlmLeg, number[]> = { none: [], rpm: [], limited: [] };
  for (let i = 0; i < ROUNDS; i++)
    for (const leg of shuffled(LLM_LEGS)) runs[leg].push(await ttft(url, legs[leg], 100 + i));
  const ms = (x: number) => +x.toFixed(3);
  // The same round's requests ran back to back: the median of their differences.
  const paired = (leg: LlmLeg) => ms(median(runs[leg].map((t, i) => t - (runs.none[i] ?? t))));
  const p50 = (leg: LlmLeg) => median(runs[leg]);
  return {
    rounds: ROUNDS,
    pricePerToken: Number(PRICE),
    ttftP50Ms: { none: ms(p50('none')), rpm: ms(p50('rpm')), limited: ms(p50('limited')) },
    ttftP90Ms: {
      none: ms(quantile(runs.none, 0.9)),
      rpm: ms(quantile(runs.rpm, 0.9)),
      limited: ms(quantile(runs.limited, 0.9)),
    },
    addedTtftP50Ms: ms(p50('limited') - p50('none')),
    pairedAddedTtftP50Ms: paired('limited'),
    rpmOnly: { addedTtftP50Ms: ms(p50('rpm') - p50('none')), pairedAddedTtftP50Ms: paired('rpm') },
    target: 'addedTtftP50Ms < 1',
  };
}

const transcodeBody = JSON.stringify({
  input: { url: 'https://example.com/video.mp4' },
  storage: {
    type: 's3',
    endpoint: 'https://s3.example.com',
    bucket: 'b',
    credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
  },
  outputs: { hls: { path: '/out/hls' } },
});

async function posts(url: string, list: string[]): Promise<number> {
  // The requests autocannon abandoned at the end of the last run are still being answered:
  // let them finish before this run starts.
  await new Promise((r) => setTimeout(r, 2000));
  let next = 0;
  const r = await autocannon({
    url: `${url}/api/transcode`,
    method: 'POST',
    connections: CONNECTIONS,
    duration: SECONDS,
    headers: { 'content-type': 'application/json' },
    body: transcodeBody,
    requests: [
      {
        setupRequest: (req) => ({
          ...req,
          headers: { ...req.headers, authorization: `Bearer ${list[next++ % list.length]}` },
        }),
      },
    ],
  });
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0)
    throw new Error(
      `${r.non2xx} answers were not 2xx (a limit was reached, or the queue limit), ${r.errors} errors, ${r.timeouts} timeouts`,
    );
  // Answers over the run's time: autocannon's per-second average is 0 for a second with none.
  return r['2xx'] / r.duration;
}

async function transcodeLeg(url: string): Promise<object> {
  const none = [await posts(url, keys.none)];
  const limited: number[] = [];
  const rpm: number[] = [];
  for (let i = 0; i < POST_ROUNDS; i++) {
    limited.push(await posts(url, keys.limited));
    none.push(await posts(url, keys.none));
    rpm.push(await posts(url, keys.rpm));
    none.push(await posts(url, keys.none));
  }
  // Each run against the mean of the none runs on either side of it.
  const around = (i: number) => ((none[i] ?? 0) + (none[i + 1] ?? 0)) / 2;
  const ratios = limited.map((l, i) => l / around(2 * i));
  const rpmRatios = rpm.map((l, i) => l / around(2 * i + 1));
  const r = (x: number) => +x.toFixed(3);
  return {
    seconds: SECONDS,
    connections: CONNECTIONS,
    reqPerSec: { none: none.map(Math.round), limited: limited.map(Math.round), rpm: rpm.map(Math.round) },
    ratios: ratios.map(r),
    ratio: r(median(ratios)),
    rpmOnly: { ratios: rpmRatios.map(r), ratio: r(median(rpmRatios)) },
    target: 'ratio >= 0.9',
  };
}

const loadBefore = loadavg()[0] ?? 0;
const service = await startService();
try {
  const report: Record<string, unknown> = { database: process.env.DATABASE_URL ? 'postgres' : 'embedded' };
  if (ONLY !== 'transcode') report.llm = await llmLeg(service.url);
  if (ONLY !== 'llm') report.transcode = await transcodeLeg(service.url);
  report.hostLoadAvg1m = { before: +loadBefore.toFixed(2), after: +(loadavg()[0] ?? 0).toFixed(2) };
  console.log(JSON.stringify(report, null, 2));
} finally {
  agent.destroy();
  service.child.kill('SIGTERM');
  await new Promise((r) => service.child.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
}
