// Two real orchestrator processes behind one gateway: priced requests, 402, the ledger,
// a client that disconnects, SIGKILL before a request and in the middle of a stream.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import {
  sampleSum,
  startGateway,
  startOrchestratorProcess,
  TINY,
  type OrchestratorProcess,
  type TestGateway,
} from '../../helpers/llm.ts';

const PRICE = 0.000001; // USD per output token
const SECRET = 'test-shared-secret-0123456789';
let gw: TestGateway;
let a: OrchestratorProcess;
let b: OrchestratorProcess;
let alice: string;
let bob: string;
const procEnv = {
  MEDIAPLANE_ORCHESTRATOR_MODELS: TINY,
  MEDIAPLANE_ORCHESTRATOR_PRICE_PER_TOKEN: String(PRICE),
  MEDIAPLANE_ORCHESTRATOR_SECRET: SECRET,
};

before(async () => {
  [a, b] = await Promise.all([startOrchestratorProcess(procEnv), startOrchestratorProcess(procEnv)]);
  gw = await startGateway({ orchestrators: [a.url, b.url], config: { orchestratorSecret: SECRET } });
  alice = await gw.owner('alice', 1);
  bob = await gw.owner('bob');
});
after(async () => {
  await gw.close();
  await Promise.all([a.kill('SIGKILL'), b.kill('SIGKILL')]);
});

// Seeded: the same answers every run, ones that reach max_tokens, which the tests count on
// (unseeded, the random test model now and then ends with EOS before it).
const ask = (key: string, body: object, signal?: AbortSignal): Promise<Response> =>
  fetch(`${gw.url}/llm`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: TINY, messages: [{ role: 'user', content: 'Hello' }], seed: 1, ...body }),
    ...(signal ? { signal } : {}),
  });

async function ledger(key: string): Promise<{
  owner: string;
  balanceUsd: number;
  entries: Array<{
    kind: string;
    amountUsd: number;
    requestId: string | null;
    status: string;
    maxTokens: number | null;
  }>;
}> {
  const res = await fetch(`${gw.url}/api/ledger`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as any;
}

const charges = async (key: string) => (await ledger(key)).entries.filter((e) => e.kind === 'charge');
const caps = async (o: OrchestratorProcess) =>
  (await (await fetch(`${o.url}/capabilities`, { headers: { authorization: `Bearer ${SECRET}` } })).json()) as {
    stats: { active: number; tokensComputed: number };
  };

test('orchestrators refuse callers without the shared secret', async () => {
  const res = await fetch(`${a.url}/capabilities`);
  assert.equal(res.status, 401);
});

test('a priced request is charged max_tokens x price; 402 when the balance is short; owners see only their ledger', async () => {
  const res = await ask(alice, { max_tokens: 10 });
  assert.equal(res.status, 200);
  const list = await charges(alice);
  assert.equal(list.length, 1);
  assert.ok(Math.abs((list[0]?.amountUsd ?? 0) - 10 * PRICE) < 1e-15);
  assert.equal(list[0]?.status, 'settled');
  assert.ok(Math.abs((await ledger(alice)).balanceUsd - (1 - 10 * PRICE)) < 1e-12);

  const poor = await ask(bob, { max_tokens: 10 });
  assert.equal(poor.status, 402);
  const err = ((await poor.json()) as any).error;
  assert.match(err.message, /balance too low/);
  const bobs = await ledger(bob);
  assert.equal(bobs.owner, 'bob');
  assert.deepEqual(bobs.entries, [], "bob sees none of alice's charges, and a 402 charges nothing");
});

test('a client that disconnects stops its generation', async () => {
  const before = (await caps(a)).stats.tokensComputed + (await caps(b)).stats.tokensComputed;
  const ctrl = new AbortController();
  const res = await ask(alice, { max_tokens: 3500, stream: true }, ctrl.signal);
  const reader = res.body!.getReader();
  await reader.read();
  ctrl.abort();
  // A slot is released once its generation has settled: from then on nothing may be computed.
  await waitFor(async () => (await caps(a)).stats.active + (await caps(b)).stats.active === 0, 30_000);
  const mid = (await caps(a)).stats.tokensComputed + (await caps(b)).stats.tokensComputed;
  await new Promise((r) => setTimeout(r, 300));
  const late = (await caps(a)).stats.tokensComputed + (await caps(b)).stats.tokensComputed;
  assert.equal(late, mid, 'no tokens computed after the client left');
  assert.ok(mid - before < 3000, `stopped early: ${mid - before} of 3500 tokens`);
});

test('SIGKILL one orchestrator before a request: the other answers, one charge only', async () => {
  await a.kill('SIGKILL');
  const beforeCount = (await charges(alice)).length;
  for (let i = 0; i < 2; i++) {
    const res = await ask(alice, { max_tokens: 6 });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as any).usage.completion_tokens, 6);
  }
  const list = await charges(alice);
  assert.equal(list.length, beforeCount + 2, 'one charge per successful request, none for the failed attempt');
  assert.equal(new Set(list.map((e) => e.requestId)).size, list.length, 'one entry per request');
  assert.ok(list.every((e) => e.status === 'settled'));
});

test('an orchestrator registers itself; SIGKILL mid-stream gives the client event: error', async () => {
  const port = await freePort();
  a = await startOrchestratorProcess({
    ...procEnv,
    MEDIAPLANE_PORT: String(port),
    MEDIAPLANE_ORCHESTRATOR_REGISTER_WITH: gw.url,
    MEDIAPLANE_ORCHESTRATOR_PUBLIC_URL: `http://127.0.0.1:${port}`,
  });
  for (let i = 0; i < 50 && !gw.app.hasRoute({ method: 'GET', url: '/v1/models' }); i++)
    await new Promise((r) => setTimeout(r, 50));
  await waitFor(async () => (await caps(a)).stats !== undefined);
  const wrong = await fetch(`${gw.url}/llm/orchestrators`, {
    method: 'POST',
    headers: { authorization: 'Bearer nope', 'content-type': 'application/json' },
    body: JSON.stringify({ url: a.url }),
  });
  assert.equal(wrong.status, 401);

  const res = await ask(alice, { max_tokens: 3500, stream: true });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read();
  const serving = (await caps(b).catch(() => ({ stats: { active: 0 } }))).stats.active > 0 ? b : a;
  await serving.kill('SIGKILL');
  let text = '';
  const dec = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
  }
  assert.match(
    text,
    /event: error\ndata: \{"error":\{"message":"[^"]+","type":"server_error","code":"upstream_failed"\}\}\n\n$/,
  );
  assert.ok(!text.includes('[DONE]'));
});

test('every orchestrator down before the first token: 503 and nothing charged', async () => {
  await Promise.all([a.kill('SIGKILL'), b.kill('SIGKILL')]);
  const before = await ledger(alice);
  const res = await ask(alice, { max_tokens: 5 });
  assert.equal(res.status, 503);
  assert.equal(((await res.json()) as any).error.type, 'service_unavailable');
  const stream = await ask(alice, { max_tokens: 5, stream: true });
  assert.equal(stream.status, 503);
  const after = await ledger(alice);
  assert.equal(after.entries.length, before.entries.length);
  assert.equal(after.balanceUsd, before.balanceUsd);
});

// Runs last: it counts what the tests above did.
test("the gateway's metrics count completions by outcome, their tokens, first tokens and failovers", async () => {
  const text = await gw.metrics.metrics();
  const completions = (outcome: string): number =>
    sampleSum(text, 'mediaplane_llm_completions_total', { model: TINY, outcome });
  assert.equal(completions('completed'), 3, "alice's first request and the two after the SIGKILL");
  assert.equal(completions('refused'), 1, "bob's 402");
  assert.equal(completions('cancelled'), 1, 'the client that disconnected');
  assert.equal(completions('failed'), 3, 'SIGKILL mid-stream, and the two requests with every orchestrator down');
  assert.equal(sampleSum(text, 'mediaplane_llm_tokens_total', { model: TINY, kind: 'completion' }), 10 + 6 + 6);
  assert.equal(
    sampleSum(text, 'mediaplane_llm_time_to_first_token_seconds_count', { model: TINY }),
    5,
    'every request that got a first token',
  );
  assert.ok(
    sampleSum(text, 'mediaplane_llm_failovers_total', { model: TINY }) >= 4,
    'each of the last two requests tried both orchestrators',
  );
  assert.equal(sampleSum(text, 'mediaplane_llm_orchestrators', { state: 'up' }), 0);
  assert.ok(!text.includes(SECRET));
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const port = (srv.address() as AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  for (let i = 0; i < timeoutMs / 50; i++) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`condition not met in ${timeoutMs / 1000} s`);
}
