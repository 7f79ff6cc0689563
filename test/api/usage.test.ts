// Usage through the routes (issue #32): one server with the task API, a worker, the LLM gateway
// and a priced local orchestrator (tiny-random-llama-2), where real requests of two keys of one
// owner (chat completions with the openai SDK; a 2 s transcode) show up in GET /api/usage per
// day, per model and per key, in /api/usage/keys/{id}, and in Livepeer's /api/data/usage/query
// through the `livepeer` SDK's metrics.getUsage; another key's limit never refuses a read of
// usage; per-key Prometheus counters only with MEDIAPLANE_METRICS_PER_KEY. The SQL's sums at
// day boundaries, on both databases, are in usage-report.test.ts.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import OpenAI from 'openai';
import { Ledger } from '../../src/llm/ledger.ts';
import { MODELS_DIR, TINY } from '../helpers/llm.ts';
import { startHttp, serveFile, type TestHttp } from '../helpers/http-input.ts';
import { makeClip } from '../helpers/media.ts';
import { refused } from '../helpers/sdk.ts';
import { startTestServer, waitFor, type TestServer } from '../helpers/server.ts';
import { freshWindow } from '../helpers/rate-window.ts';

const PRICE = 0.000001;
const today = () => new Date().toISOString().slice(0, 10);

describe('usage routes (embedded database)', () => {
  let server: TestServer;
  let input: TestHttp;
  /** alice's keys: `chat` talks to the LLM, `media` transcodes, `reader` reads usage. */
  const alice = { chat: { id: '', key: '' }, media: { id: '', key: '' }, reader: { id: '', key: '' } };
  let bob: { id: string; key: string };
  let taskId = '';
  let completionTokens = 0;
  let duration = 0;

  const createKey = async (owner: string) => {
    const k = await server.running.core.accounts.createKey(owner);
    return { id: k.id, key: k.key };
  };
  const usage = async (key: string, path = '/api/usage') => {
    const res = await server.call('GET', path, { key });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  };
  type Figures = { requests: number; tokens: number; tasks: number; transcodedMinutes: number; usd: number };
  const keyOf = (u: { keys: Array<Figures & { id: string }> }, id: string) => u.keys.find((k) => k.id === id);

  before(async () => {
    const clip = await makeClip({ width: 256, height: 144, seconds: 2 });
    input = await startHttp({ '/in.mp4': serveFile(clip) });
    server = await startTestServer({
      roles: { api: true, worker: true, gateway: true, orchestrator: true },
      settings: {
        modelsDir: MODELS_DIR,
        llmGpu: 'cpu',
        orchestratorModels: [TINY],
        orchestratorPricePerToken: PRICE,
        gatewayPollMs: 60_000,
        metricsPerKey: true,
      },
    });
    alice.chat = await createKey('alice');
    alice.media = await createKey('alice');
    alice.reader = await createKey('alice');
    bob = await createKey('bob');
    await new Ledger(server.running.core.db).credit({ owner: 'alice', usd: 1 });

    const openai = new OpenAI({ apiKey: alice.chat.key, baseURL: `${server.url}/v1`, maxRetries: 0 });
    for (const seed of [1, 2]) {
      const r = await openai.chat.completions.create({
        model: TINY,
        messages: [{ role: 'user', content: 'Count to three.' }],
        max_tokens: 8,
        seed,
      });
      completionTokens += r.usage?.completion_tokens ?? 0;
    }
    const created = await server.call('POST', '/api/transcode', {
      key: alice.media.key,
      body: {
        input: { url: input.url('/in.mp4') },
        outputs: { hls: { path: '/hls' } },
        profiles: [{ name: '144p', width: 256, height: 144, bitrate: 200_000 }],
        creatorId: 'carol',
      },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    taskId = created.body.id;
    // Polled through the store, not the API, so the media key makes exactly two requests.
    const done = await waitFor(
      async () => {
        const t = await server.running.core.tasks.get('alice', taskId);
        if (t.phase === 'failed') throw new Error(`the transcode failed: ${t.error_message}`);
        return t.phase === 'completed' && t;
      },
      60_000,
      'the transcode',
    );
    duration = (done.output as { input_video: { duration: number } }).input_video.duration;
    assert.equal((await server.call('GET', `/api/task/${taskId}`, { key: alice.media.key })).status, 200);
  });
  after(async () => {
    await server?.stop();
    await input?.close();
  });

  it("shows each key's requests, tokens, tasks, minutes and USD, per day and per model", async () => {
    // Keys without a limit are counted in batches (src/accounts/limiter.ts): wait for them.
    const u = await waitFor(
      async () => {
        const u = await usage(alice.reader.key);
        const chat = keyOf(u, alice.chat.id);
        const media = keyOf(u, alice.media.id);
        return chat?.requests === 2 && media?.requests === 2 && u;
      },
      15_000,
      'the day counts',
    );
    const charged = (await server.call('GET', '/api/ledger?limit=100', { key: alice.reader.key })).body.entries.filter(
      (e: { kind: string }) => e.kind === 'charge',
    );
    const usd = charged.reduce((s: number, e: { amountUsd: number }) => s + e.amountUsd, 0);
    assert.equal(charged.length, 2);
    assert.ok(usd > 0);

    const chat = keyOf(u, alice.chat.id);
    assert.deepEqual(
      { tokens: chat?.tokens, tasks: chat?.tasks, usd: chat?.usd },
      { tokens: completionTokens, tasks: 0, usd: Number(usd.toFixed(12)) },
    );
    const media = keyOf(u, alice.media.id);
    assert.equal(media?.tasks, 1);
    assert.equal(media?.tokens, 0);
    assert.ok(Math.abs((media?.transcodedMinutes ?? 0) - duration / 60) < 1e-3, `${media?.transcodedMinutes}`);
    assert.ok(duration > 1.9 && duration < 2.2, `input duration ${duration}`);

    assert.equal(u.owner, 'alice');
    assert.equal(u.to, today());
    assert.deepEqual(
      u.days.map((d: { day: string }) => d.day),
      [today()],
    );
    assert.deepEqual(u.models, [{ model: TINY, requests: 2, tokens: completionTokens, usd: Number(usd.toFixed(12)) }]);
    assert.deepEqual(u.days[0].models, u.models);
    assert.equal(u.total.tasks, 1);
    assert.equal(u.total.usd, Number(usd.toFixed(12)));
    // The reader's own reads are requests too.
    assert.ok(u.total.requests >= 4 + 1, `${u.total.requests}`);
    assert.deepEqual(
      u.keys.map((k: { id: string }) => k.id).sort(),
      [alice.chat.id, alice.media.id, alice.reader.id].sort(),
    );
  });

  it("one key's usage, by path or query; another owner's key is a 404", async () => {
    const one = await usage(alice.reader.key, `/api/usage/keys/${alice.media.id}`);
    assert.equal(one.key, alice.media.id);
    assert.deepEqual(
      one.keys.map((k: { id: string }) => k.id),
      [alice.media.id],
    );
    assert.equal(one.total.requests, 2);
    assert.equal(one.total.tasks, 1);
    assert.deepEqual(one.models, []);
    const byQuery = await usage(alice.reader.key, `/api/usage?key=${alice.media.id}`);
    assert.deepEqual(byQuery.total, one.total);
    const self = await usage(alice.media.key, '/api/usage/keys/self');
    assert.equal(self.key, alice.media.id);
    // Its own read is a request of its own, counted at once or in the next batch.
    assert.ok(self.total.requests >= 2 && self.total.tasks === 1);
    for (const path of [`/api/usage/keys/${bob.id}`, `/api/usage?key=${bob.id}`, '/api/usage/keys/nope']) {
      const res = await server.call('GET', path, { key: alice.reader.key });
      assert.equal(res.status, 404, path);
      assert.deepEqual(res.body, { errors: ['not found'] });
    }
    // Bob sees none of alice's.
    const b = await usage(bob.key);
    assert.deepEqual(
      b.keys.map((k: { id: string }) => k.id),
      [bob.id],
    );
    assert.equal(b.total.tasks, 0);
    assert.equal(b.total.usd, 0);
    assert.deepEqual(b.models, []);
  });

  it('ranges: days outside hold nothing; a bad range is a 422 naming the field', async () => {
    const old = await usage(alice.reader.key, '/api/usage?from=2020-01-01&to=2020-01-31');
    assert.deepEqual(old.days, []);
    assert.deepEqual(old.total, { requests: 0, tokens: 0, tasks: 0, transcodedMinutes: 0, usd: 0 });
    const cases: Array<[string, RegExp]> = [
      ['from=2026-02-31', /^querystring\.from: must be a real day/],
      ['from=2026-03-02&to=2026-03-01', /^querystring\.from: must be on or before querystring\.to/],
      ['from=2024-01-01&to=2026-01-01', /^querystring\.to: a range is at most 366 days/],
      ['from=yesterday', /^querystring\.from: must match pattern/],
      ['limit=3', /limit/],
    ];
    for (const [query, message] of cases) {
      const res = await server.call('GET', `/api/usage?${query}`, { key: alice.reader.key });
      assert.equal(res.status, 422, query);
      assert.match(res.body.errors[0], message, query);
    }
    assert.equal((await server.call('GET', '/api/usage')).status, 401);
  });

  it("the livepeer SDK's metrics.getUsage reads minutes transcoded and kept", async () => {
    const sdk = new Livepeer({ apiKey: alice.reader.key, serverURL: `${server.url}/api` });
    const all = (await sdk.metrics.getUsage({})).usageMetric;
    assert.equal(all?.userID, 'alice');
    assert.ok(Math.abs((all?.totalUsageMins ?? 0) - duration / 60) < 1e-3, `${all?.totalUsageMins}`);
    assert.equal(all?.storageUsageMins, 0, 'a transcode to a folder keeps no asset');
    const carol = (await sdk.metrics.getUsage({ creatorId: 'carol', from: Date.now() - 3_600_000, to: Date.now() }))
      .usageMetric;
    assert.equal(carol?.creatorID, 'carol');
    assert.equal(carol?.totalUsageMins, all?.totalUsageMins);
    const nobody = (await sdk.metrics.getUsage({ creatorId: 'nobody' })).usageMetric;
    assert.equal(nobody?.totalUsageMins, 0);
    const before = (await sdk.metrics.getUsage({ to: Date.now() - 3_600_000 })).usageMetric;
    assert.equal(before?.totalUsageMins, 0);
    const breakdown = await refused(sdk.metrics.getUsage({ breakdownBy: ['creatorId' as never] }));
    assert.equal(breakdown.statusCode, 422);
    assert.match(breakdown.body, /querystring\.breakdownBy\[\]: not supported/);
  });

  it('the OpenAPI document lists the usage routes with their queries', async () => {
    const doc = (await server.call('GET', '/api/openapi.json')).body;
    const params = (path: string) =>
      (doc.paths[path]?.get?.parameters ?? []).map((p: { name: string; in: string }) => `${p.in}:${p.name}`);
    assert.deepEqual(params('/api/usage'), ['query:from', 'query:to', 'query:key']);
    assert.deepEqual(params('/api/usage/keys/{id}'), ['path:id', 'query:from', 'query:to']);
    assert.deepEqual(params('/api/data/usage/query'), [
      'query:from',
      'query:to',
      'query:timeStep',
      'query:creatorId',
      'query:breakdownBy[]',
    ]);
    assert.ok(doc.paths['/api/usage'].get.responses['200'].content['application/json'].schema.properties.days);
  });

  it("per-key counters on /metrics, no key's secret in them", async () => {
    // The chat key made its two completions and nothing since: its count is final.
    const text = await waitFor(async () => {
      const t = await (await fetch(`${server.url}/metrics`)).text();
      return t.includes(`mediaplane_key_requests_total{key_id="${alice.chat.id}",owner="alice"} 2\n`) && t;
    });
    const media = new RegExp(`mediaplane_key_requests_total\\{key_id="${alice.media.id}",owner="alice"\\} (\\d+)`);
    assert.ok(Number(media.exec(text)?.[1]) >= 2);
    assert.match(
      text,
      new RegExp(`mediaplane_key_tokens_total\\{key_id="${alice.chat.id}",owner="alice"\\} ${completionTokens}\\n`),
    );
    for (const k of [alice.chat.key, alice.media.key, alice.reader.key, bob.key]) assert.ok(!text.includes(k));
  });

  it('a key at its request limit does not stop another key of the owner reading usage', async () => {
    // The owner's default: 3 requests a minute for each of its keys (src/accounts/limits.ts).
    await server.running.core.db.query(
      `INSERT INTO owner_limits (owner, requests_per_minute) VALUES ('alice', 3)
       ON CONFLICT (owner) DO UPDATE SET requests_per_minute = 3`,
    );
    const fresh = await createKey('alice');
    // A checked key is reused for MEDIAPLANE_AUTH_CACHE_MS (2 s by default), its limits with it;
    // and the windows are a minute long, aligned on the epoch: start well inside one.
    await new Promise((r) => setTimeout(r, 2100));
    await freshWindow(60_000, 10_000);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await server.call('GET', '/api/usage', { key: alice.chat.key })).status);
    assert.deepEqual(statuses, [200, 200, 200, 429, 429], 'usage counts against its own key');
    const res = await server.call('GET', '/api/usage', { key: fresh.key });
    assert.equal(res.status, 200, 'another key of the owner still reads usage');
    // The refused requests are not counted: the 2 chats and the 3 reads let through.
    assert.equal(keyOf(res.body, alice.chat.id)?.requests, 5);
  });
});

describe('per-key counters are off unless asked', () => {
  it('GET /metrics has no mediaplane_key_ series by default', async () => {
    const server = await startTestServer({ roles: { api: true, worker: false } });
    try {
      const key = await server.key('carl');
      assert.equal((await server.call('GET', '/api/usage', { key })).status, 200);
      const text = await (await fetch(`${server.url}/metrics`)).text();
      assert.ok(text.includes('mediaplane_http_request_duration_seconds'));
      assert.ok(!text.includes('mediaplane_key_'));
    } finally {
      await server.stop();
    }
  });
});
