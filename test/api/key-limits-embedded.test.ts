// Key limits on the embedded database, one process (issue #32): the requests limit exact under
// concurrent callers of both APIs with each API's error shape and headers, usage counted for
// limited keys per request and for the others in batches, the owner reading its keys, expiry,
// concurrent transcodes, a spent budget on the task API, the CLI's flags and owner defaults,
// bad keys per address, and a spent requests window answered before the model is looked up.
// The two-process PostgreSQL acceptance is key-limits.test.ts.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Accounts, KeyLimiter } from '../../src/accounts/index.ts';
import { parseCommandLine } from '../../src/cli/args.ts';
import { KEYS_FLAGS, keysCommand } from '../../src/cli/keys.ts';
import { openDb } from '../../src/db/index.ts';
import { Billing } from '../../src/llm/gateway/index.ts';
import { Ledger } from '../../src/llm/ledger.ts';
import { startTestServer, transcodeBody, type TestServer } from '../helpers/server.ts';
import { installRateClockOn, type TestRateClock } from '../helpers/rate-window.ts';

const WINDOW_MS = 20_000;

describe('key limits (embedded database, one process)', () => {
  let server: TestServer;
  let clock: TestRateClock;
  const create = async (owner: string, argv: string[] = []) => {
    const k = await server.running.core.accounts.createKey(owner);
    if (argv.length > 0) await cli(['update', k.id, ...argv]);
    return { id: k.id, key: k.key };
  };
  /** Runs `mediaplane keys ...` against the server's database; its exit code. */
  const cli = async (argv: string[]) => {
    const write = process.stderr.write;
    const out = process.stdout.write;
    process.stderr.write = () => true;
    process.stdout.write = () => true;
    try {
      return await keysCommand(parseCommandLine(argv, KEYS_FLAGS), server.running.core.db);
    } finally {
      process.stderr.write = write;
      process.stdout.write = out;
    }
  };

  before(async () => {
    server = await startTestServer({
      roles: { api: true, worker: false, gateway: true },
      // No auth cache: a setting changed by the CLI holds at the next request.
      settings: { rateWindowMs: WINDOW_MS, authCacheMs: 0, gatewayPollMs: 60_000 },
    });
    clock = await installRateClockOn(server.running.core.db);
  });
  after(() => server?.stop());

  it('lets exactly 10 of 30 concurrent requests of a 10-per-window key through, on both APIs, each refusal in its shape', async () => {
    const k = await create('alice', ['--rpm', '10']);
    await clock.freshWindow(WINDOW_MS, 8000);
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        server
          .call('GET', i % 2 ? '/api/task' : '/v1/models', { key: k.key })
          .then((r) => ({ ...r, llm: i % 2 === 0 })),
      ),
    );
    const ok = answers.filter((a) => a.status === 200);
    assert.equal(ok.length, 10, JSON.stringify(answers.map((a) => a.status)));
    for (const a of answers.filter((x) => x.status !== 200)) {
      assert.equal(a.status, 429);
      const retryAfter = Number(a.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= WINDOW_MS / 1000, `retry-after ${retryAfter}`);
      if (a.llm) {
        assert.equal(a.body.error.code, 'rate_limit_exceeded');
        assert.equal(a.body.error.type, 'requests');
        assert.equal(a.headers.get('x-ratelimit-limit-requests'), '10');
        assert.equal(a.headers.get('x-ratelimit-remaining-requests'), '0');
        assert.match(a.headers.get('x-ratelimit-reset-requests') ?? '', /^(\d+ms|\d+s)$/);
      } else {
        assert.match(a.body.errors[0], /rate limit reached: this key may make 10 requests per 20 s/);
        assert.equal(a.headers.get('x-ratelimit-limit-requests'), null, 'OpenAI headers on the LLM routes only');
      }
    }
    // The LLM routes' successes say how many were left, each a different count.
    const remaining = ok.filter((a) => a.llm).map((a) => Number(a.headers.get('x-ratelimit-remaining-requests')));
    assert.equal(new Set(remaining).size, remaining.length);
    assert.ok(remaining.every((r) => r >= 0 && r < 10));
    // Counted once each, refusals not at all.
    const [day] = await server.running.core.db.query<{ requests: string }>(
      'SELECT requests::text FROM api_key_days WHERE key_id = $1',
      [k.id],
    );
    assert.equal(day?.requests, '10');
  });

  it('answers a key past its requests window 429 before it looks up the model: an unknown one, or one outside its allowlist', async () => {
    // No orchestrator here: every model is unknown (404) while the window lasts.
    const k = await create('ivy', ['--rpm', '3', '--models', 'tiny/allowed,tiny/other']);
    await clock.freshWindow(WINDOW_MS, 8000);
    const chat = (model: string) =>
      server.call('POST', '/v1/chat/completions', {
        key: k.key,
        body: { model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 },
      });
    for (let i = 0; i < 3; i++) {
      const within = await chat('tiny/allowed');
      assert.equal(within.status, 404, JSON.stringify(within.body));
      assert.equal(within.headers.get('x-ratelimit-remaining-requests'), String(2 - i));
    }
    const past = [
      await chat('tiny/allowed'),
      await chat('tiny/not-allowed'),
      await server.call('POST', '/v1/completions', {
        key: k.key,
        body: { model: 'tiny/other', prompt: ['a', 'b'], max_tokens: 4 },
      }),
      await server.call('POST', '/v1/embeddings', { key: k.key, body: { model: 'tiny/allowed', input: 'a' } }),
      await server.call('POST', '/llm', {
        key: k.key,
        body: { model: 'tiny/allowed', messages: [{ role: 'user', content: 'Hello' }] },
      }),
    ];
    for (const a of past) {
      assert.equal(a.status, 429, JSON.stringify(a.body));
      assert.equal(a.body.error.code, 'rate_limit_exceeded');
      assert.match(a.body.error.message, /this key may make 3 requests per 20 s/);
      const retryAfter = Number(a.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= WINDOW_MS / 1000, `retry-after ${retryAfter}`);
      assert.equal(a.headers.get('x-ratelimit-remaining-requests'), '0');
    }
    // The three within the window are counted, the refusals not at all.
    const [day] = await server.running.core.db.query<{ requests: string }>(
      'SELECT requests::text FROM api_key_days WHERE key_id = $1',
      [k.id],
    );
    assert.equal(day?.requests, '3');
  });

  it("counts an unlimited key's requests in batches, touching no window", async () => {
    const k = await create('bob');
    for (let i = 0; i < 3; i++) assert.equal((await server.call('GET', '/api/task', { key: k.key })).status, 200);
    await server.running.core.accounts.limiter?.flush();
    const db = server.running.core.db;
    const [day] = await db.query<{ requests: string }>('SELECT requests::text FROM api_key_days WHERE key_id = $1', [
      k.id,
    ]);
    assert.equal(day?.requests, '3');
    assert.equal((await db.query('SELECT 1 FROM key_windows WHERE key_id = $1', [k.id])).length, 0);
  });

  it('shows the owner its keys and their limits, key over owner default; never another owner’s', async () => {
    assert.equal(
      await cli(['owner-limits', '--owner', 'carol', '--rpm', '100', '--models', 'a/x,a/y']),
      1,
      'no owner yet',
    );
    const k = await create('carol', ['--tpm', '500', '--budget', '0.25', '--budget-period', 'month']);
    const other = await create('carol', ['--rpm', 'none', '--models', '*']);
    assert.equal(await cli(['owner-limits', '--owner', 'carol', '--rpm', '100', '--models', 'a/x,a/y']), 0);
    const self = await server.call('GET', '/api/key/self', { key: k.key });
    assert.equal(self.status, 200, JSON.stringify(self.body));
    assert.equal(self.body.id, k.id);
    assert.equal(self.body.current, true);
    assert.deepEqual(self.body.limits, {
      requestsPerMinute: 100,
      tokensPerMinute: 500,
      concurrentTranscodes: null,
      budget: { usd: 0.25, period: 'month' },
      models: ['a/x', 'a/y'],
    });
    assert.equal(self.body.settings.requestsPerMinute, null, 'not set on the key: the owner default');
    assert.equal(self.body.ownerDefaults.requestsPerMinute, 100);
    assert.equal(self.body.windowMs, WINDOW_MS);
    const second = await server.call('GET', `/api/key/${other.id}`, { key: k.key });
    assert.equal(second.body.limits.requestsPerMinute, null, '"none" on the key lifts the owner default');
    assert.equal(second.body.limits.models, null, '"*": every model');
    const list = await server.call('GET', '/api/key', { key: k.key });
    assert.deepEqual(list.body.map((x: { id: string }) => x.id).sort(), [k.id, other.id].sort());
    assert.ok(!JSON.stringify(list.body).includes(k.key), 'never the key itself');
    // `keys create` takes the same flags.
    assert.equal(await cli(['create', '--owner', 'carol', '--concurrent-transcodes', '2', '--expires', '30d']), 0);
    const made = (await server.call('GET', '/api/key', { key: k.key })).body.find(
      (x: { settings: { concurrentTranscodes: number | null } }) => x.settings.concurrentTranscodes === 2,
    );
    assert.ok(made && made.expiresAt > Date.now() + 29 * 86_400_000, JSON.stringify(made));
    const foreign = await create('dave');
    assert.equal((await server.call('GET', `/api/key/${foreign.id}`, { key: k.key })).status, 404);
    // Bad flags name themselves and change nothing.
    assert.equal(
      await cli(['update', k.id, '--rpm', 'lots']).catch((e: Error) => e.message),
      '--rpm: a whole number, none or default (got lots)',
    );
    await assert.rejects(cli(['update', k.id, '--budget', '-1']), /budgetUsd: must be a decimal number/);
  });

  it('answers an expired key 401 on both APIs', async () => {
    const k = await create('erin', ['--expires', '2020-01-01']);
    const tasks = await server.call('GET', '/api/task', { key: k.key });
    assert.equal(tasks.status, 401);
    assert.deepEqual(tasks.body, { errors: ['API key expired at 2020-01-01T00:00:00.000Z'] });
    const llm = await server.call('GET', '/v1/models', { key: k.key });
    assert.equal(llm.status, 401);
    assert.equal(llm.body.error.type, 'authentication_error');
    assert.equal(await cli(['update', k.id, '--expires', '1d']), 0);
    assert.equal((await server.call('GET', '/api/task', { key: k.key })).status, 200);
  });

  it('holds a key to its concurrent transcodes, and refuses new work once its budget is spent, naming it', async () => {
    const k = await create('frank', ['--concurrent-transcodes', '1', '--budget', '0.01', '--budget-period', 'day']);
    const answers = await Promise.all(
      Array.from({ length: 4 }, () => server.call('POST', '/api/transcode', { key: k.key, body: transcodeBody() })),
    );
    assert.deepEqual(answers.map((a) => a.status).sort(), [200, 429, 429, 429]);
    const no = answers.find((a) => a.status === 429);
    assert.match(no?.body.errors[0], /too many concurrent transcodes: this key may have at most 1/);
    assert.ok(Number(no?.headers.get('retry-after')) >= 1);
    // The first one is cancelled: there is room again.
    const first = answers.find((a) => a.status === 200);
    assert.equal((await server.call('POST', `/api/task/${first?.body.id}/cancel`, { key: k.key })).status, 200);
    // The key's budget for today is spent (as LLM charges leave it): new work is a 429 naming the budget.
    await server.running.core.db.query(
      `INSERT INTO key_spend (key_id, period_start, spent_usd) VALUES ($1, (now() AT TIME ZONE 'UTC')::date, 0.01)`,
      [k.id],
    );
    const spent = await server.call('POST', '/api/transcode', { key: k.key, body: transcodeBody() });
    assert.equal(spent.status, 429);
    assert.match(spent.body.errors[0], /budget exceeded: this key's budget of 0.01 USD per day is used up/);
    const retryAfter = Number(spent.headers.get('retry-after'));
    assert.ok(retryAfter >= 1 && retryAfter <= 86_400, `until the day ends: ${retryAfter}`);
  });

  it('answers bad keys from one address 401 twenty times a window, then 429; a good key from there still works', async () => {
    await clock.freshWindow(WINDOW_MS, 8000);
    const good = await create('gina');
    const bad = await Promise.all(
      Array.from({ length: 25 }, (_, i) => server.call('GET', '/api/task', { key: `mp_not-a-key-${i}` })),
    );
    const statuses = bad.map((b) => b.status);
    assert.equal(statuses.filter((s) => s === 401).length, 20, JSON.stringify(statuses));
    assert.equal(statuses.filter((s) => s === 429).length, 5);
    const slowed = bad.find((b) => b.status === 429);
    assert.match(slowed?.body.errors[0], /too many requests with a bad API key from this address/);
    assert.ok(Number(slowed?.headers.get('retry-after')) >= 1);
    assert.equal((await server.call('GET', '/api/task', { key: good.key })).status, 200);
    // No key at all is no guess: still the 401 that says how to send one.
    assert.deepEqual((await server.call('GET', '/api/task')).body, {
      errors: ['missing API key: send Authorization: Bearer <key>'],
    });
  });
});

describe('a limited key’s charge (billing with the limiter, embedded database)', () => {
  it('holds tokens and budget with the reservation, gives back what was not used, and leaves nothing of a refusal', async () => {
    const db = await openDb({});
    const limiter = new KeyLimiter(db, { windowMs: 60_000, authFailuresPerWindow: 20 });
    try {
      await (await installRateClockOn(db)).freshWindow(60_000, 8000);
      const accounts = new Accounts(db, { limiter });
      const made = await accounts.createKey('hana', {
        tokensPerMinute: 100,
        budgetUsd: '0.5',
        budgetPeriod: 'month',
      });
      await new Ledger(db).credit({ owner: 'hana', usd: 0.3 });
      const key = await accounts.admit(`Bearer ${made.key}`, { address: '127.0.0.1' });
      const billing = new Billing(new Ledger(db), { usageBased: true, limiter });
      const charge = (maxTokens: number) =>
        billing.open({
          owner: 'hana',
          key,
          maxTokens,
          pricePerToken: 0.001,
          model: 'a/b',
          orchestrator: 'o',
          requestId: `r${maxTokens}`,
        });
      const state = async () => {
        const [w] = await db.query<{ used: string }>(
          `SELECT used::text FROM key_windows WHERE key_id = $1 AND kind = 'tokens'`,
          [made.id],
        );
        const [s] = await db.query<{ spent: string }>(
          'SELECT spent_usd::text AS spent FROM key_spend WHERE key_id = $1',
          [made.id],
        );
        const [d] = await db.query<{ tokens: string }>('SELECT tokens::text FROM api_key_days WHERE key_id = $1', [
          made.id,
        ]);
        return { window: Number(w?.used ?? 0), spent: Number(s?.spent ?? 0), tokens: Number(d?.tokens ?? 0) };
      };
      const first = await charge(80);
      assert.ok(!(first instanceof Error), String(first));
      assert.deepEqual(await state(), { window: 80, spent: 0.08, tokens: 0 });
      // 80 + 30 tokens pass the window: refused, and nothing of it stays.
      const second = await charge(30);
      assert.ok(second instanceof Error && /has 20 left; this request may take 30/.test(second.message));
      assert.deepEqual(await state(), { window: 80, spent: 0.08, tokens: 0 });
      await first.settle(50);
      assert.deepEqual(await state(), { window: 50, spent: 0.05, tokens: 50 }, 'settled on use');
      // The balance (0.3 - 0.05 = 0.25) cannot cover 0.3 USD: a 402, and the window and budget as they were.
      const poor = await billing.open({
        owner: 'hana',
        key: { ...key, limits: key.limits && { ...key.limits, tokensPerMinute: 1000 } },
        maxTokens: 300,
        pricePerToken: 0.001,
        model: 'a/b',
        orchestrator: 'o',
        requestId: 'poor',
      });
      assert.ok(poor instanceof Error && /balance too low/.test(poor.message));
      assert.deepEqual(await state(), { window: 50, spent: 0.05, tokens: 50 });
      const third = await charge(40);
      assert.ok(!(third instanceof Error));
      await third.release();
      assert.deepEqual(await state(), { window: 50, spent: 0.05, tokens: 50 }, 'a release gives everything back');
      const entries = await new Ledger(db).entries('hana', 10);
      assert.deepEqual(
        entries.filter((e) => e.kind === 'charge').map((e) => [e.status, e.amountUsd]),
        [['settled', 0.05]],
      );
    } finally {
      await limiter.close();
      await db.close();
    }
  });
});
