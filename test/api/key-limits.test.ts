// Issue #32's acceptance: key limits enforced the same way by two API processes sharing one
// PostgreSQL (one in this process, one a child process), in front of one real orchestrator
// process (tiny-random-llama-2, priced). A 60-per-window key gets exactly 60 of 200 concurrent
// callers split across both processes and both APIs, the rest 429 with truthful headers; a
// tokens limit holds within one request's max_tokens; a $0.01 budget stops the key at the
// request that would pass it (402 on the LLM, 429 on the task API); an expired key is a 401;
// a model outside the allowlist a 403 naming it; nothing refused is in the ledger; the openai
// SDK's retry on 429 succeeds once the window passes; the livepeer SDK surfaces the 429; bad
// keys per address are counted across processes. The embedded database: key-limits-embedded.test.ts.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import OpenAI from 'openai';
import type { LimitSettings } from '../../src/accounts/index.ts';
import { type OrchestratorProcess, REPO_ROOT, startOrchestratorProcess, TINY } from '../helpers/llm.ts';
import { testPostgres } from '../helpers/postgres.ts';
import { refused } from '../helpers/sdk.ts';
import { databaseFor, startTestServer, type TestServer, transcodeBody } from '../helpers/server.ts';
import { installRateClock, type TestRateClock } from '../helpers/rate-window.ts';

const CHILD = fileURLToPath(new URL('./fixtures/api-process.ts', import.meta.url));
const SECRET = 'key-limits-shared-secret-0123456789';
const PRICE = 0.0001; // USD per output token: 50 tokens are 0.005 USD
const WINDOW_MS = 10_000;

interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

async function call(
  base: string,
  method: string,
  path: string,
  o: { key?: string; body?: unknown } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, {
    method,
    headers,
    ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body, headers: res.headers };
}

/** A seeded chat request: the tiny model answers max_tokens tokens every time. */
const chat = (max_tokens: number, model = TINY) => ({
  model,
  messages: [{ role: 'user', content: 'Hello' }],
  max_tokens,
  seed: 1,
});

async function startApiProcess(env: Record<string, string>): Promise<{ url: string; stop(): Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mediaplane-api-'));
  const child: ChildProcess = spawn(process.execPath, [CHILD], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, MEDIAPLANE_DATA_DIR: dataDir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = once(child, 'exit');
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const first = new Promise<string>((res) => lines.once('line', res));
  const line = await Promise.race([first, exited.then(() => null)]);
  if (line === null) throw new Error(`the API process exited: ${stderr.trim()}`);
  return {
    url: (JSON.parse(line) as { url: string }).url,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

const server = await testPostgres();

describe('key limits: two API processes on one PostgreSQL', { skip: server ? false : 'no PostgreSQL server' }, () => {
  let orch: OrchestratorProcess;
  let a: TestServer;
  let b: { url: string; stop(): Promise<void> };
  /** Both processes, alternately. */
  let bases: string[];
  let clock: TestRateClock;
  const used: string[] = [];

  const createKey = async (owner: string, settings: LimitSettings = {}, usd = 0) => {
    const accounts = a.running.core.accounts;
    const k = await accounts.createKey(owner, settings);
    if (usd > 0)
      await a.running.core.db.query(
        `INSERT INTO llm_balances (owner, balance_usd) VALUES ($1, $2) ON CONFLICT (owner) DO UPDATE SET balance_usd = EXCLUDED.balance_usd`,
        [owner, usd],
      );
    used.push(k.id);
    return { id: k.id, key: k.key };
  };

  before(async () => {
    orch = await startOrchestratorProcess({
      MEDIAPLANE_ORCHESTRATOR_MODELS: TINY,
      MEDIAPLANE_ORCHESTRATOR_PRICE_PER_TOKEN: String(PRICE),
      MEDIAPLANE_ORCHESTRATOR_SECRET: SECRET,
    });
    const databaseUrl = (await databaseFor('postgres')) ?? '';
    // Before any process connects: each window the tests count in starts when they ask.
    clock = await installRateClock(databaseUrl);
    const settings = {
      rateWindowMs: WINDOW_MS,
      gatewayOrchestrators: [orch.url],
      orchestratorSecret: SECRET,
      gatewayPollMs: 60_000,
    };
    a = await startTestServer({ databaseUrl, roles: { api: true, worker: false, gateway: true }, settings });
    b = await startApiProcess({
      DATABASE_URL: databaseUrl,
      MEDIAPLANE_PORT: '0',
      MEDIAPLANE_HOST: '127.0.0.1',
      MEDIAPLANE_RATE_WINDOW_MS: String(WINDOW_MS),
      MEDIAPLANE_GATEWAY_ORCHESTRATORS: orch.url,
      MEDIAPLANE_ORCHESTRATOR_SECRET: SECRET,
      MEDIAPLANE_GATEWAY_POLL_MS: '60000',
      MEDIAPLANE_ALLOW_PRIVATE_URLS: 'true',
    });
    bases = [a.url, b.url];
  });
  after(async () => {
    await b?.stop();
    await a?.stop();
    await clock?.close();
    await orch?.kill('SIGKILL');
  });

  it('lets exactly 60 of 200 concurrent callers through, split over both processes and both APIs; the rest 429 with truthful headers', async () => {
    const k = await createKey('alice', { requestsPerMinute: 60 });
    await clock.freshWindow(WINDOW_MS, 7000);
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const llm = i % 4 >= 2;
        const r = await call(bases[i % 2] as string, 'GET', llm ? '/v1/models' : '/api/task', { key: k.key });
        return { ...r, llm };
      }),
    );
    assert.ok(Date.now() - started < 7000, 'the burst fits one window');
    const ok = answers.filter((x) => x.status === 200);
    assert.equal(ok.length, 60, JSON.stringify(answers.map((x) => x.status)));
    for (const x of answers.filter((y) => y.status !== 200)) {
      assert.equal(x.status, 429);
      const retryAfter = Number(x.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= WINDOW_MS / 1000, `retry-after ${retryAfter}`);
      if (!x.llm) {
        assert.match(x.body.errors[0], /^rate limit reached: this key may make 60 requests per 10 s/);
        continue;
      }
      assert.deepEqual(
        { type: x.body.error.type, code: x.body.error.code },
        { type: 'requests', code: 'rate_limit_exceeded' },
      );
      assert.equal(x.headers.get('x-ratelimit-limit-requests'), '60');
      assert.equal(x.headers.get('x-ratelimit-remaining-requests'), '0');
      const reset = x.headers.get('x-ratelimit-reset-requests') ?? '';
      assert.match(reset, /^(\d+ms|\d+s)$/);
      assert.ok(Number(x.headers.get('retry-after-ms')) <= WINDOW_MS);
    }
    // Each LLM success says how many were left, counted across both processes: never the same twice.
    const left = ok.filter((x) => x.llm).map((x) => Number(x.headers.get('x-ratelimit-remaining-requests')));
    assert.equal(new Set(left).size, left.length, `remaining ${left}`);
    assert.ok(left.every((n) => n >= 0 && n < 60));
    const [day] = await a.running.core.db.query<{ requests: string }>(
      'SELECT requests::text FROM api_key_days WHERE key_id = $1',
      [k.id],
    );
    assert.equal(day?.requests, '60', 'refused requests are not counted as usage');
  });

  it('holds a tokens limit within one request’s max_tokens across both processes', async () => {
    const k = await createKey('bob', { tokensPerMinute: 40 }, 1);
    const tooBig = await call(a.url, 'POST', '/v1/chat/completions', { key: k.key, body: chat(50) });
    assert.equal(tooBig.status, 400);
    assert.equal(tooBig.body.error.param, 'max_tokens');
    assert.match(tooBig.body.error.message, /more than this key's 40 tokens per 10 s/);
    await clock.freshWindow(WINDOW_MS, 8000);
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call(bases[i % 2] as string, 'POST', '/v1/chat/completions', { key: k.key, body: chat(16) }),
      ),
    );
    const ok = answers.filter((x) => x.status === 200);
    const tokens = ok.reduce((sum, x) => sum + x.body.usage.completion_tokens, 0);
    assert.ok(tokens <= 40 + 16, `${tokens} tokens in one window`);
    assert.equal(ok.length, 2, JSON.stringify(answers.map((x) => [x.status, x.body.error?.message])));
    for (const x of answers.filter((y) => y.status !== 200)) {
      assert.equal(x.status, 429);
      assert.equal(x.body.error.type, 'tokens');
      assert.equal(x.headers.get('x-ratelimit-limit-tokens'), '40');
      assert.ok(Number(x.headers.get('x-ratelimit-remaining-tokens')) < 16);
      assert.match(x.headers.get('x-ratelimit-reset-tokens') ?? '', /^(\d+ms|\d+s)$/);
      assert.ok(Number(x.headers.get('retry-after')) >= 1);
    }
    const success = ok[0];
    assert.equal(success?.headers.get('x-ratelimit-limit-tokens'), '40', 'successes carry the headers too');
  });

  it('stops a $0.01 budget at the request that would pass it: 402 on the LLM, 429 on the task API, naming the budget', async () => {
    const k = await createKey('carol', { budgetUsd: '0.01', budgetPeriod: 'day' }, 1);
    // 50 tokens x 0.0001 = 0.005 USD a request: two fit, from any process, however they race.
    const answers = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        call(bases[i % 2] as string, 'POST', '/v1/chat/completions', { key: k.key, body: chat(50) }),
      ),
    );
    assert.deepEqual(answers.map((x) => x.status).sort(), [200, 200, 402, 402]);
    const no = answers.find((x) => x.status === 402);
    assert.equal(no?.body.error.code, 'budget_exceeded');
    assert.match(no?.body.error.message, /would pass this key's budget of 0.01 USD per day \(0.01 USD spent\)/);
    const spent = await call(b.url, 'POST', '/api/transcode', { key: k.key, body: transcodeBody() });
    assert.equal(spent.status, 429);
    assert.match(spent.body.errors[0], /budget exceeded: this key's budget of 0.01 USD per day is used up/);
    const ledger = await call(a.url, 'GET', '/api/ledger', { key: k.key });
    assert.equal(ledger.body.balanceUsd, 0.99, 'the balance paid only for the two answers');
  });

  it('answers an expired key 401 and a model outside the allowlist 403 naming it, on both processes', async () => {
    const expired = await createKey('dave', { expiresAt: new Date(Date.now() - 1000) });
    for (const base of bases) {
      assert.equal((await call(base, 'GET', '/api/task', { key: expired.key })).status, 401);
      const llm = await call(base, 'POST', '/v1/chat/completions', { key: expired.key, body: chat(4) });
      assert.equal(llm.status, 401);
      assert.match(llm.body.error.message, /^API key expired at /);
    }
    const k = await createKey('erin', { models: ['someorg/other-model'] }, 1);
    for (const base of bases) {
      const no = await call(base, 'POST', '/v1/chat/completions', { key: k.key, body: chat(4) });
      assert.equal(no.status, 403);
      assert.deepEqual(
        { type: no.body.error.type, code: no.body.error.code, param: no.body.error.param },
        { type: 'permission_error', code: 'model_not_allowed', param: 'model' },
      );
      assert.match(no.body.error.message, new RegExp(`model ${TINY} is not allowed for this API key`));
    }
  });

  it('lets the openai SDK retry a 429 after the window, and the livepeer SDK surface it', async () => {
    const k = await createKey('frank', { requestsPerMinute: 1 }, 1);
    await clock.freshWindow(WINDOW_MS, 3000);
    assert.equal((await call(a.url, 'GET', '/api/task', { key: k.key })).status, 200);
    const lp = new Livepeer({ apiKey: k.key, serverURL: `${b.url}/api` });
    const err = await refused(lp.task.getAll());
    assert.equal(err.statusCode, 429);
    assert.match(err.body, /rate limit reached: this key may make 1 requests per 10 s/);
    const client = new OpenAI({ apiKey: k.key, baseURL: `${b.url}/v1`, maxRetries: 2 });
    const started = Date.now();
    const out = await client.chat.completions.create(chat(4) as OpenAI.ChatCompletionCreateParamsNonStreaming);
    assert.equal(out.choices[0]?.finish_reason, 'length');
    assert.ok(Date.now() - started >= 500, 'it waited for the next window');
  });

  it('counts bad keys per address across both processes, never refusing a good key', async () => {
    const good = await createKey('gina');
    await clock.freshWindow(WINDOW_MS, 6000);
    const bad = await Promise.all(
      Array.from({ length: 24 }, (_, i) => call(bases[i % 2] as string, 'GET', '/api/task', { key: `mp_bad-${i}` })),
    );
    const statuses = bad.map((x) => x.status);
    assert.equal(statuses.filter((s) => s === 401).length, 20, JSON.stringify(statuses));
    assert.equal(statuses.filter((s) => s === 429).length, 4);
    for (const base of bases) assert.equal((await call(base, 'GET', '/api/task', { key: good.key })).status, 200);
  });

  it('has nothing refused in the ledger', async () => {
    const rows = await a.running.core.db.query<{ status: string; n: number; usd: string }>(
      `SELECT status, count(*)::int AS n, sum(amount_usd)::text AS usd FROM llm_ledger
       WHERE kind = 'charge' AND key_id = ANY($1::uuid[]) GROUP BY status ORDER BY status`,
      [used],
    );
    // bob's 2 answers, carol's 2, frank's 1: settled; none reserved or released (a refusal writes nothing).
    assert.deepEqual(
      rows.map((r) => [r.status, r.n]),
      [['settled', 5]],
    );
    const [spend] = await a.running.core.db.query<{ spent: string }>(
      'SELECT spent_usd::text AS spent FROM key_spend WHERE key_id = $1',
      [used[2]],
    );
    assert.equal(Number(spend?.spent), 0.01);
  });
});
