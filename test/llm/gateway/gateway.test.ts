// The gateway with the local orchestrator on the same app and port, as `mediaplane start`
// runs them: the wire shapes of API.md section B through curl-style fetch, the official
// `openai` client and `@livepeer/ai`, validation, auth and the free-price default.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Livepeer } from '@livepeer/ai';
import { startOrchestrator } from '../../../src/llm/orchestrator/index.ts';
import { quietLog, readSse, startGateway, testConfig, STORIES, TINY, type TestGateway } from '../../helpers/llm.ts';
import { orchestratorOptions } from '../../../src/main.ts';

let gw: TestGateway;
let orch: { close(): Promise<void> };
let key: string;
// A mounted orchestrator always asks its gateway for a secret (issue #15).
const SECRET = 'gateway-test-orchestrator-secret';

before(async () => {
  let url = '';
  gw = await startGateway({
    orchestrators: ['/orchestrator'],
    config: { orchestratorSecret: SECRET },
    mount: async (app) => {
      const o = await startOrchestrator({
        options: orchestratorOptions(testConfig({ orchestratorModels: [TINY], orchestratorSecret: SECRET })),
        log: quietLog,
        app,
      });
      orch = o;
      url = o.url ?? '';
    },
  });
  assert.equal(url, '/orchestrator');
  key = await gw.owner('alice');
});
after(async () => {
  await gw.close();
  await orch.close();
});

const post = (path: string, body: unknown, auth = key): Promise<Response> =>
  fetch(gw.url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

test('POST /llm answers a chat.completion with usage counted by the tokenizer; finish_reason length when cut', async () => {
  const res = await post('/llm', {
    model: TINY,
    messages: [{ role: 'user', content: 'Hello' }],
    max_tokens: 7,
    seed: 1,
  });
  assert.equal(res.status, 200);
  const body = (await res.json()) as Record<string, any>;
  assert.match(body.id, /^chatcmpl-/);
  assert.equal(body.object, 'chat.completion');
  assert.equal(body.model, TINY);
  assert.equal(typeof body.created, 'number');
  assert.equal(body.choices[0].message.role, 'assistant');
  assert.ok(body.choices[0].message.content.length > 0);
  assert.equal(body.choices[0].finish_reason, 'length');
  assert.equal(body.usage.completion_tokens, 7);
  assert.ok(body.usage.prompt_tokens > 1);
  assert.equal(body.usage.total_tokens, body.usage.prompt_tokens + 7);
});

test('streaming: SSE chunks, finish_reason, the usage chunk asked for, then data: [DONE]', async () => {
  // Seeded: the same answer every run, one that reaches max_tokens (unseeded, the random test
  // model now and then ends with EOS before it).
  const res = await post('/llm', {
    model: TINY,
    messages: [{ role: 'user', content: 'Hello' }],
    max_tokens: 5,
    seed: 1,
    stream: true,
    stream_options: { include_usage: true },
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  const events = await readSse(res);
  assert.equal(events.at(-1)?.data, '[DONE]');
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data) as Record<string, any>);
  assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0]?.id && c.model === TINY));
  assert.equal(chunks[0]?.choices[0].delta.role, 'assistant');
  const usage = chunks.at(-1);
  assert.deepEqual(usage?.choices, []);
  assert.equal(usage?.usage.completion_tokens, 5);
  // API.md: the last content chunk carries finish_reason; no chunk with an empty delta.
  const content = chunks.slice(0, -1);
  assert.ok(
    content.every((c) => typeof c.choices[0].delta.content === 'string'),
    'every chunk before the usage chunk has content',
  );
  assert.ok(content.at(-1)?.choices[0].delta.content, "the last content chunk has the last token's text");
  assert.equal(content.at(-1)?.choices[0].finish_reason, 'length');
  assert.ok(content.slice(0, -1).every((c) => c.choices[0].finish_reason === null));
});

test('the official openai client: non-streaming and streaming with baseURL /v1', async () => {
  const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1` });
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id).sort(), [STORIES, TINY]);
  const done = await client.chat.completions.create({
    model: STORIES,
    messages: [{ role: 'user', content: 'Once upon a time' }],
    max_tokens: 12,
    seed: 7,
    temperature: 0.5,
  });
  assert.equal(
    done.usage?.completion_tokens,
    done.choices[0]?.finish_reason === 'length' ? 12 : done.usage?.completion_tokens,
  );
  assert.ok(done.choices[0]?.message.content);
  const stream = await client.chat.completions.create({
    model: STORIES,
    messages: [{ role: 'user', content: 'Once upon a time' }],
    max_tokens: 12,
    seed: 7,
    temperature: 0.5,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: OpenAI.CompletionUsage | undefined | null;
  const finishes: Array<string | null | undefined> = [];
  for await (const c of stream) {
    text += c.choices[0]?.delta.content ?? '';
    if (c.choices[0]) finishes.push(c.choices[0].finish_reason);
    if (c.usage) usage = c.usage;
  }
  assert.equal(text, done.choices[0]?.message.content, 'the same seed streams the same text');
  assert.equal(finishes.at(-1), done.choices[0]?.finish_reason, 'the last content chunk carries finish_reason');
  assert.ok(finishes.slice(0, -1).every((f) => f === null));
  assert.ok(usage && usage.completion_tokens >= 1 && usage.completion_tokens <= 12);
});

test('the @livepeer/ai client parses generate.llm (it needs id and usage)', async () => {
  const lp = new Livepeer({ httpBearer: key, serverURL: gw.url });
  const out = await lp.generate.llm({ model: TINY, messages: [{ role: 'user', content: 'Hi' }], maxTokens: 4 });
  const llm = out.llmResponse;
  assert.ok(llm, 'llmResponse parsed');
  assert.match(llm.id, /^chatcmpl-/);
  assert.equal(llm.usage.completionTokens, 4);
  assert.equal(llm.choices[0]?.finishReason, 'length');
});

test('seed makes answers repeatable and stop cuts the text', async () => {
  const ask = async (extra: object): Promise<string> => {
    const r = await post('/llm', {
      model: STORIES,
      messages: [{ role: 'user', content: 'Once upon a time' }],
      max_tokens: 40,
      temperature: 1,
      seed: 42,
      ...extra,
    });
    return ((await r.json()) as any).choices[0].message.content as string;
  };
  const a = await ask({});
  assert.equal(await ask({}), a, 'same seed, same text');
  const word = a.trim().split(/\s+/)[2] ?? '';
  assert.ok(word, `needs a third word in ${JSON.stringify(a)}`);
  const cut = await ask({ stop: [word] });
  assert.ok(
    !cut.includes(word) && a.startsWith(cut.trimEnd().slice(0, 5)),
    `stop ${JSON.stringify(word)} cut ${JSON.stringify(cut)}`,
  );
});

test('bad requests get 400 naming the field, never reaching an orchestrator; no key is 401', async () => {
  const cases: Array<[unknown, RegExp]> = [
    [{ messages: [{ role: 'user', content: 'x' }] }, /model: required/],
    [{ model: TINY, messages: [] }, /messages: required, must be a non-empty array/],
    [{ model: TINY, messages: [{ role: 'robot', content: 'x' }] }, /messages\[0\]\.role: must be one of/],
    [
      { model: TINY, messages: [{ role: 'user', content: 'x' }], temperature: 3 },
      /temperature: must be between 0 and 2/,
    ],
    [{ model: TINY, messages: [{ role: 'user', content: 'x' }], max_tokens: 0 }, /max_tokens: must be between 1/],
    [{ model: TINY, messages: [{ role: 'user', content: 'x' }], audio: { voice: 'alloy' } }, /audio: not supported/],
  ];
  for (const [body, re] of cases) {
    const res = await post('/llm', body);
    assert.equal(res.status, 400, JSON.stringify(body));
    const err = ((await res.json()) as any).error;
    assert.match(err.message, re);
    assert.equal(err.type, 'invalid_request_error');
  }
  const broken = await fetch(`${gw.url}/llm`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: '{"model":',
  });
  assert.equal(broken.status, 400);
  assert.ok(((await broken.json()) as any).error.message);
  const anon = await post('/llm', { model: TINY, messages: [{ role: 'user', content: 'x' }] }, 'mp_not_a_key');
  assert.equal(anon.status, 401);
  assert.equal(((await anon.json()) as any).error.type, 'authentication_error');
  const unknown = await post('/v1/chat/completions', {
    model: 'nobody/nothing',
    messages: [{ role: 'user', content: 'x' }],
  });
  assert.equal(unknown.status, 404);
  assert.equal(((await unknown.json()) as any).error.code, 'model_not_found');
});

test('price 0 (the local default) answers without credits and records a zero charge', async () => {
  const bob = await gw.owner('bob');
  const res = await post('/llm', { model: TINY, messages: [{ role: 'user', content: 'x' }], max_tokens: 2 }, bob);
  assert.equal(res.status, 200);
  const ledger = (await (
    await fetch(`${gw.url}/api/ledger`, { headers: { authorization: `bearer ${bob}` } })
  ).json()) as any;
  assert.equal(ledger.owner, 'bob');
  assert.equal(ledger.entries.length, 1);
  assert.equal(ledger.entries[0].amountUsd, 0);
});

test('unknown routes under /v1 and /llm answer 404 in the LLM error shape', async () => {
  for (const [method, path] of [
    ['GET', '/v1/embeddings'],
    ['POST', '/v1/images/generations'],
    ['GET', '/llm'],
  ] as const) {
    const res = await fetch(gw.url + path, { method, headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 404, `${method} ${path}`);
    const body = (await res.json()) as { error?: { message?: string; type?: string } };
    assert.match(body.error?.message ?? '', /no such route/);
    assert.equal(typeof body.error?.type, 'string');
  }
});
