// Embeddings end to end (issue #17): the openai SDK against the gateway, the llama.cpp
// orchestrator's embedding context behind it, OpenAI's float and base64 forms, the fields
// refused by name, failover, and the charge on input tokens in the ledger.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type OpenAI from 'openai';
import { readGgufFileInfo } from 'node-llama-cpp';
import { startOrchestrator } from '../../../src/llm/orchestrator/index.ts';
import { Ledger } from '../../../src/llm/ledger.ts';
import {
  type LocalLlm,
  MODELS_DIR,
  quietLog,
  startGateway,
  startLocalLlm,
  testConfig,
  TINY,
  type TestGateway,
} from '../../helpers/llm.ts';
import { orchestratorOptions } from '../../../src/main.ts';

let llm: LocalLlm;
let gw: TestGateway;
let key: string;
let client: OpenAI;
/** tiny-random-llama-2's embedding size, from its GGUF header. */
let size: number;

before(async () => {
  const info = await readGgufFileInfo(join(MODELS_DIR, TINY, 'llama-2-tiny-random.gguf'));
  size = Number((info.metadata as any).llama.embedding_length);
  llm = await startLocalLlm({ models: [TINY] });
  ({ gw, key, client } = llm);
});
after(() => llm.close());

const post = (path: string, body: unknown, auth = key, base = gw.url): Promise<Response> =>
  fetch(base + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

const norm = (v: number[]) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

test("the openai SDK's embeddings.create: one vector of the model's size per input, scaled to length 1", async () => {
  assert.equal(size, 8);
  const res = await client.embeddings.create({ model: TINY, input: ['a', 'b'] });
  assert.equal(res.object, 'list');
  assert.equal(res.model, TINY);
  assert.deepEqual(
    res.data.map((d) => [d.object, d.index, d.embedding.length]),
    [
      ['embedding', 0, size],
      ['embedding', 1, size],
    ],
  );
  for (const d of res.data) assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5, `length ${norm(d.embedding)}`);
  assert.notDeepEqual(res.data[0]?.embedding, res.data[1]?.embedding);
  // Each input is its beginning-of-text token and one token of text.
  assert.deepEqual(res.usage, { prompt_tokens: 4, total_tokens: 4 });

  const again = await client.embeddings.create({ model: TINY, input: 'a', encoding_format: 'float' });
  assert.equal(again.data.length, 1);
  const f32 = (v: number[]) => [...new Float32Array(v)];
  assert.deepEqual(
    f32(again.data[0]?.embedding ?? []),
    f32(res.data[0]?.embedding ?? []),
    'the same text, the same vector',
  );
});

test('base64 is the little-endian float32 values of the float answer', async () => {
  const body = (encoding_format?: string) => ({ model: TINY, input: ['hello world', 'x'], encoding_format });
  const floats = (await (await post('/v1/embeddings', body('float'))).json()) as any;
  const encoded = (await (await post('/v1/embeddings', body('base64'))).json()) as any;
  for (const i of [0, 1]) {
    const b64 = encoded.data[i].embedding as string;
    assert.equal(typeof b64, 'string');
    const bytes = Buffer.from(b64, 'base64');
    assert.equal(bytes.length, size * 4);
    const decoded = Array.from({ length: size }, (_, k) => bytes.readFloatLE(k * 4));
    assert.deepEqual(decoded, [...new Float32Array(floats.data[i].embedding)]);
  }
  // Unset is float, as OpenAI's default.
  const plain = (await (await post('/v1/embeddings', { model: TINY, input: 'x' })).json()) as any;
  assert.ok(Array.isArray(plain.data[0].embedding));
});

test('dimensions, token arrays and empty input are refused naming the field; user and unknown fields are not', async () => {
  await assert.rejects(
    client.embeddings.create({ model: TINY, input: 'a', dimensions: 4 }),
    (err: any) => err.status === 400 && err.param === 'dimensions' && /model's own size/.test(err.message),
  );
  for (const input of [[1, 2, 3], [[1, 2]], [], '', ['a', '']]) {
    const res = await post('/v1/embeddings', { model: TINY, input });
    assert.equal(res.status, 400, JSON.stringify(input));
    const err = ((await res.json()) as any).error;
    assert.match(err.param, /^input/);
    assert.equal(err.type, 'invalid_request_error');
  }
  const tooMany = await post('/v1/embeddings', { model: TINY, input: Array.from({ length: 2049 }, () => 'a') });
  assert.equal(tooMany.status, 400);
  const ok = await post('/v1/embeddings', { model: TINY, input: 'a', user: 'u-1', store: true });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('x-mediaplane-ignored-fields'), 'store');
});

test('an input longer than the context is 400 context_length_exceeded naming input; an unknown model 404', async () => {
  const res = await post('/v1/embeddings', { model: TINY, input: ['a', 'hello '.repeat(5000)] });
  assert.equal(res.status, 400);
  const err = ((await res.json()) as any).error;
  assert.equal(err.code, 'context_length_exceeded');
  assert.equal(err.param, 'input');
  assert.match(err.message, /input\[1\]: \d+ tokens/);

  const missing = await post('/v1/embeddings', { model: 'acme/nothing', input: 'a' });
  assert.equal(missing.status, 404);
  assert.equal(((await missing.json()) as any).error.code, 'model_not_found');
  const noKey = await post('/v1/embeddings', { model: TINY, input: 'a' }, 'wrong');
  assert.equal(noKey.status, 401);
});

test('a free orchestrator: the request is recorded as a zero charge of its input tokens', async () => {
  const owner = 'free-embedder';
  const k = await gw.owner(owner);
  const res = await post('/v1/embeddings', { model: TINY, input: ['a', 'b', 'c'] }, k);
  assert.equal(res.status, 200);
  const entries = await new Ledger(gw.db).entries(owner, 10);
  assert.equal(entries.length, 1);
  assert.equal(entries[0]?.amountUsd, 0);
  assert.equal(entries[0]?.completionTokens, 6);
  assert.equal(entries[0]?.model, TINY);
});

test('the orchestrator route itself: floats, gateways only', async () => {
  const base = `${gw.url}/orchestrator`;
  const res = await post('/v1/embeddings', { model: TINY, input: ['a'] }, llm.secret, base);
  assert.equal(res.status, 200);
  const body = (await res.json()) as any;
  assert.equal(body.data[0].embedding.length, size);
  assert.deepEqual(body.usage, { prompt_tokens: 2, total_tokens: 2 });
  assert.equal((await post('/v1/embeddings', { model: TINY, input: ['a'] }, 'not-the-secret', base)).status, 401);
  const bad = await post('/v1/embeddings', { model: TINY, input: 'a' }, llm.secret, base);
  assert.equal(bad.status, 400, 'a gateway always sends a list');
});

/** An orchestrator that advertises embeddings for TINY and fails every request with `status`. */
async function failingOrchestrator(
  status: number,
): Promise<{ url: string; hits: () => number; close(): Promise<void> }> {
  let hits = 0;
  const server: Server = createServer((req, res) => {
    if (req.url === '/capabilities') {
      res.setHeader('content-type', 'application/json');
      return void res.end(
        JSON.stringify({
          engine: 'fake',
          features: ['embeddings'],
          pricePerToken: 0,
          models: [{ id: TINY, warm: true, contextLength: 4096, free: 4, total: 4, queued: 0 }],
        }),
      );
    }
    hits++;
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'engine on fire', type: 'server_error', code: 'internal' } }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits: () => hits,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

test('a failing orchestrator is passed over for the next; a priced one charges input tokens x its price', async () => {
  const broken = await failingOrchestrator(500);
  const price = 1e-6;
  let priced: { url?: string; close(): Promise<void> } | undefined;
  let second: TestGateway | undefined;
  try {
    priced = await startOrchestrator({
      options: orchestratorOptions(testConfig({ orchestratorModels: [TINY], orchestratorPricePerToken: price })),
      log: quietLog,
    });
    second = await startGateway({ orchestrators: [broken.url, priced.url ?? ''] });
    const rich = await second.owner('rich', 1);
    const res = await post('/v1/embeddings', { model: TINY, input: ['a', 'hello world'] }, rich, second.url);
    assert.equal(res.status, 200);
    assert.equal(broken.hits(), 1, 'the broken one was asked first');
    const body = (await res.json()) as any;
    assert.equal(body.usage.prompt_tokens, 5);
    const ledger = new Ledger(second.db);
    const [charge] = (await ledger.entries('rich', 10)).filter((e) => e.kind === 'charge');
    assert.equal(charge?.status, 'settled');
    assert.equal(charge?.completionTokens, 5);
    assert.ok(Math.abs((charge?.amountUsd ?? 0) - 5 * price) < 1e-12, `charged ${charge?.amountUsd}`);
    assert.ok(Math.abs(Number(await ledger.balance('rich')) - (1 - 5 * price)) < 1e-12);

    // The reservation is a bound of the tokens (bytes + 3 per input): no balance, no request.
    const poor = await second.owner('poor');
    const refused = await post('/v1/embeddings', { model: TINY, input: 'a' }, poor, second.url);
    assert.equal(refused.status, 402);
    assert.match(((await refused.json()) as any).error.message, /balance too low for up to 4 input tokens/);
  } finally {
    await second?.close();
    await priced?.close();
    await broken.close();
  }
});
