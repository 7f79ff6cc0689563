// The chat-completions surface of the gateway (issue #17) with the real `openai` and
// `@livepeer/ai` clients: the request policy (unknown fields ignored and named, off values
// dropped, what nobody can give refused by name), messages, the usage chunk only when asked,
// whole answers assembled from the chunks (n choices, tool calls, logprobs), routing on the
// features orchestrators advertise, and OpenAI's errors. Behind the gateway are fake
// orchestrators: plain HTTP servers that stream canned contract chunks (API.md section B,
// the orchestrator -> gateway wire) and record what they were sent, so these tests do not
// depend on what an engine can generate.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { Livepeer } from '@livepeer/ai';
import { textCompletion, textCompletionRewriter } from '../../../src/llm/gateway/assemble.ts';
import { readSse, startGateway, type TestGateway } from '../../helpers/llm.ts';

const MODEL = 'fake/model';
const PLAIN = 'fake/plain';
const BUSY = 'fake/busy';
const ALL_FEATURES = ['json_object', 'json_schema', 'tools', 'logprobs', 'n', 'logit_bias', 'completions'];

/** What an orchestrator was sent: the JSON body of each chat request, newest last. */
type Seen = Array<Record<string, any>>;

interface FakeOrchestrator {
  url: string;
  seen: Seen;
  close(): Promise<void>;
}

const sse = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;

/**
 * The chunks an orchestrator streams for `req`, as the contract says: per choice the role on
 * its first chunk, content or tool call pieces (id, type and name on the first piece only),
 * logprobs beside the delta when asked, finish_reason on its last chunk; choices interleaved;
 * then the usage chunk and [DONE].
 */
function script(req: Record<string, any>): string {
  const head = { id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: 1700000000, model: req.model };
  const n: number = req.n ?? 1;
  const forced = req.tools && (req.tool_choice === 'required' || typeof req.tool_choice === 'object');
  const steps: Array<Array<Record<string, any>>> = [];
  for (let i = 0; i < n; i++) steps.push(forced ? toolCallSteps(i, req.tools[0].function.name) : textSteps(i, req));
  let out = '';
  for (let s = 0; s < Math.max(...steps.map((x) => x.length)); s++)
    for (const choice of steps) if (choice[s]) out += sse({ ...head, choices: [choice[s]] });
  const tokens = n * 3;
  out += sse({
    ...head,
    choices: [],
    usage: { prompt_tokens: 5, completion_tokens: tokens, total_tokens: 5 + tokens },
  });
  return `${out}data: [DONE]\n\n`;
}

function textSteps(index: number, req: Record<string, any>): Array<Record<string, any>> {
  const words = ['Hello', ' world', ` ${index}`];
  return words.map((w, k) => ({
    index,
    delta: k === 0 ? { role: 'assistant', content: w } : { content: w },
    ...(req.logprobs
      ? {
          logprobs: {
            content: [
              {
                token: w,
                logprob: -0.5 - k,
                bytes: [...Buffer.from(w)],
                top_logprobs: Array.from({ length: req.top_logprobs ?? 0 }, (_, t) => ({
                  token: `${w}${t}`,
                  logprob: -0.5 - k - t,
                  bytes: null,
                })),
              },
            ],
          },
        }
      : {}),
    finish_reason: k === words.length - 1 ? 'stop' : null,
  }));
}

function toolCallSteps(index: number, name: string): Array<Record<string, any>> {
  const call = (piece: Record<string, any>) => ({ index, delta: { tool_calls: [{ index: 0, ...piece }] } });
  return [
    {
      index,
      delta: {
        role: 'assistant',
        tool_calls: [{ index: 0, id: `call_${index}abc`, type: 'function', function: { name, arguments: '' } }],
      },
      finish_reason: null,
    },
    { ...call({ function: { arguments: '{"city":' } }), finish_reason: null },
    { ...call({ function: { arguments: ' "Paris"}' } }), finish_reason: 'tool_calls' },
  ];
}

/** Answers that are not a stream, by the last message's text. */
function refusal(req: Record<string, any>): { status: number; body: unknown } | undefined {
  const last = String(req.messages?.at(-1)?.content ?? '');
  if (last === 'TOO LONG')
    return {
      status: 400,
      body: {
        error: {
          message: 'messages: the prompt is 5000 tokens, the context is 4096',
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      },
    };
  if (last === 'BAD SCHEMA')
    return {
      status: 400,
      body: {
        error: {
          message: 'response_format.json_schema.schema.properties.age.minimum: not enforceable by this engine',
          type: 'invalid_request_error',
          param: 'response_format.json_schema.schema.properties.age.minimum',
          code: 'unsupported_parameter',
        },
      },
    };
  return undefined;
}

/** A fake orchestrator: its capabilities, and the canned stream (or `status`) for each chat request. */
async function fakeOrchestrator(caps: Record<string, unknown>, status = 200): Promise<FakeOrchestrator> {
  const seen: Seen = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/capabilities') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(caps));
      return;
    }
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (text += c));
    req.on('end', () => {
      const body = JSON.parse(text) as Record<string, any>;
      seen.push(body);
      const refused = status === 200 ? refusal(body) : { status, body: { error: { message: 'busy' } } };
      if (refused) {
        res.writeHead(refused.status, { 'content-type': 'application/json' }).end(JSON.stringify(refused.body));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' }).end(script(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const model = (id: string) => ({ id, warm: true, free: 8, total: 8, queued: 0, contextLength: 4096 });

let full: FakeOrchestrator;
let plain: FakeOrchestrator;
let busy: FakeOrchestrator;
let gw: TestGateway;
let key: string;
let client: OpenAI;

before(async () => {
  full = await fakeOrchestrator({ engine: 'fake', features: ALL_FEATURES, pricePerToken: 0, models: [model(MODEL)] });
  // An orchestrator from before issue #17: no `features` field, so none.
  plain = await fakeOrchestrator({ engine: 'fake', pricePerToken: 0, models: [model(PLAIN)] });
  busy = await fakeOrchestrator(
    { engine: 'fake', features: ALL_FEATURES, pricePerToken: 0, models: [model(BUSY)] },
    503,
  );
  gw = await startGateway({ orchestrators: [full.url, plain.url, busy.url] });
  key = await gw.owner('surface');
  client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
});
after(async () => {
  await gw.close();
  await Promise.all([full.close(), plain.close(), busy.close()]);
});

const user = (content: string) => [{ role: 'user' as const, content }];
const lastSent = (o: FakeOrchestrator = full) => o.seen.at(-1) ?? {};

describe('the request policy', () => {
  test('unknown fields are ignored, never forwarded, and named in x-mediaplane-ignored-fields; streamed too', async () => {
    const params = { model: MODEL, messages: user('Hi'), max_tokens: 3, store: true, metadata: { app: 'x' } };
    const { data, response } = await client.chat.completions.create(params as any).withResponse();
    assert.equal(data.choices[0]?.message.content, 'Hello world 0');
    assert.equal(response.headers.get('x-mediaplane-ignored-fields'), 'store, metadata');
    assert.equal(lastSent().store, undefined);
    assert.equal(lastSent().metadata, undefined);

    const streamed = await client.chat.completions
      .create({ ...params, stream: true, reasoning_effort: 'low' } as any)
      .withResponse();
    assert.equal(streamed.response.headers.get('x-mediaplane-ignored-fields'), 'store, metadata, reasoning_effort');
    for await (const _ of streamed.data as any);
    const none = await client.chat.completions.create({ model: MODEL, messages: user('Hi') }).withResponse();
    assert.equal(none.response.headers.get('x-mediaplane-ignored-fields'), null);
  });

  test('ignored names a header cannot carry are percent-encoded, and at most 32 are named', async () => {
    const extra = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`f${i}`, i]));
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ 'naïve,\u0001 %': 1, ...extra, model: MODEL, messages: user('Hi') }),
    });
    assert.equal(res.status, 200);
    const named = res.headers.get('x-mediaplane-ignored-fields')?.split(', ') ?? [];
    assert.equal(named[0], 'na%C3%AFve%2C%01%20%25');
    assert.equal(named.length, 33);
    assert.equal(named.at(-1), '...');
  });

  test('off and empty values are fine and not forwarded: logprobs false, tools [], tool_choice none, text format, n 1', async () => {
    await client.chat.completions.create({
      model: PLAIN,
      messages: user('Hi'),
      logprobs: false,
      tools: [],
      tool_choice: 'none',
      response_format: { type: 'text' },
      n: 1,
      parallel_tool_calls: true,
      top_k: -1,
    } as any);
    const sent = lastSent(plain);
    for (const field of ['logprobs', 'tools', 'tool_choice', 'response_format', 'n', 'parallel_tool_calls', 'top_k'])
      assert.equal(sent[field], undefined, field);
    // tool_choice "none" drops the tools, so an orchestrator without the feature can answer.
    await client.chat.completions.create({
      model: PLAIN,
      messages: user('Hi'),
      tools: [{ type: 'function', function: { name: 'f' } }],
      tool_choice: 'none',
    });
    assert.equal(lastSent(plain).tools, undefined);
  });

  test('developer becomes system, text parts are joined with "\\n", name and a tool round trip are forwarded', async () => {
    await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'developer', content: 'Be brief.' },
        {
          role: 'user',
          name: 'ann',
          content: [
            { type: 'text', text: 'Weather in' },
            { type: 'text', text: 'Paris?' },
          ],
        },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'Sunny' },
      ],
      tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }],
    });
    assert.deepEqual(lastSent().messages, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather in\nParis?', name: 'ann' },
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }],
      },
      { role: 'tool', content: 'Sunny', tool_call_id: 'call_1' },
    ]);
  });

  test('an image part is a 400 naming messages[i].content[j]: the model takes no images', async () => {
    const err = await client.chat.completions
      .create({
        model: MODEL,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is this?' },
              { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
            ],
          },
        ],
      })
      .catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.param, 'messages[0].content[1]');
    assert.equal(err.code, 'invalid_request');
    assert.match(err.message, /messages\[0\]\.content\[1\]: this model takes no images/);
  });

  test('fields nobody here can give are refused by name; the rules between fields name their field', async () => {
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ audio: { voice: 'alloy', format: 'mp3' } }, 'audio', /audio: not supported/],
      [{ modalities: ['text', 'audio'] }, 'modalities', /only \["text"\]/],
      [{ functions: [{ name: 'f' }] }, 'functions', /send tools instead/],
      [{ top_logprobs: 2 }, 'top_logprobs', /needs logprobs: true/],
      [{ tool_choice: 'required' }, 'tool_choice', /needs tools/],
      [
        {
          tools: [{ type: 'function', function: { name: 'f' } }],
          tool_choice: { type: 'function', function: { name: 'g' } },
        },
        'tool_choice',
        /"g", which is none of the tools/,
      ],
      [{ n: 9 }, 'n', /n: must be between 1 and 8/],
      [
        { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: 'nope' } } },
        'response_format.json_schema.schema',
        /must be a JSON Schema object/,
      ],
    ];
    for (const [extra, param, re] of cases) {
      const before = full.seen.length;
      const err = await client.chat.completions
        .create({ model: MODEL, messages: user('Hi'), ...extra } as any)
        .catch((e: unknown) => e);
      assert.ok(err instanceof OpenAI.BadRequestError, `${JSON.stringify(extra)}: ${String(err)}`);
      assert.equal(err.param, param, JSON.stringify(extra));
      assert.match(err.message, re);
      assert.equal(full.seen.length, before, 'never forwarded');
    }
  });
});

describe('answers', () => {
  test('streaming: the usage chunk only with stream_options.include_usage; chunk.choices[0].delta never throws', async () => {
    const plainStream = await client.chat.completions.create({ model: MODEL, messages: user('Hi'), stream: true });
    let text = '';
    for await (const chunk of plainStream) {
      text += chunk.choices[0]?.delta.content ?? '';
      assert.ok(chunk.choices[0], 'every chunk has a choice');
      assert.equal(chunk.usage ?? undefined, undefined);
    }
    assert.equal(text, 'Hello world 0');
    assert.equal(lastSent().include_usage, undefined, "include_usage is the gateway's, not forwarded");
    assert.equal(lastSent().stream_options, undefined);

    const withUsage = await client.chat.completions.create({
      model: MODEL,
      messages: user('Hi'),
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of withUsage) chunks.push(chunk);
    assert.deepEqual(chunks.at(-1)?.choices, []);
    assert.equal(chunks.at(-1)?.usage?.completion_tokens, 3);
    assert.ok(chunks.slice(0, -1).every((c) => c.usage === undefined || c.usage === null));
  });

  test('n: 3 gives three choices, each assembled from its own chunks', async () => {
    const done = await client.chat.completions.create({ model: MODEL, messages: user('Hi'), n: 3, max_tokens: 3 });
    assert.deepEqual(
      done.choices.map((c) => [c.index, c.message.content, c.finish_reason, c.logprobs]),
      [
        [0, 'Hello world 0', 'stop', null],
        [1, 'Hello world 1', 'stop', null],
        [2, 'Hello world 2', 'stop', null],
      ],
    );
    assert.equal(done.usage?.completion_tokens, 9);
    assert.equal(lastSent().n, 3);
  });

  test('n: 3 streamed: every choice index reaches the client', async () => {
    const stream = await client.chat.completions.create({ model: MODEL, messages: user('Hi'), n: 3, stream: true });
    const texts = ['', '', ''];
    for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.delta.content ?? '';
    assert.deepEqual(texts, ['Hello world 0', 'Hello world 1', 'Hello world 2']);
  });

  test('a forced tool call: message.tool_calls with the pieces joined, content null, finish_reason tool_calls', async () => {
    const tools = [
      {
        type: 'function' as const,
        function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
      },
    ];
    const done = await client.chat.completions.create({
      model: MODEL,
      messages: user('Weather?'),
      tools,
      tool_choice: 'required',
      parallel_tool_calls: false,
    });
    const choice = done.choices[0];
    assert.equal(choice?.finish_reason, 'tool_calls');
    assert.equal(choice?.message.content, null);
    assert.deepEqual(choice?.message.tool_calls, [
      { id: 'call_0abc', type: 'function', function: { name: 'weather', arguments: '{"city": "Paris"}' } },
    ]);
    assert.deepEqual(JSON.parse((choice?.message.tool_calls?.[0] as any)?.function.arguments ?? ''), { city: 'Paris' });
    assert.deepEqual(lastSent().tools, tools);
    assert.equal(lastSent().tool_choice, 'required');
    assert.equal(lastSent().parallel_tool_calls, false);

    // Streamed as OpenAI streams them: the SDK's helper joins the pieces.
    const stream = client.chat.completions.stream({
      model: MODEL,
      messages: user('Weather?'),
      tools,
      tool_choice: { type: 'function', function: { name: 'weather' } },
    });
    const final = await stream.finalChatCompletion();
    assert.equal((final.choices[0]?.message.tool_calls?.[0] as any)?.function.arguments, '{"city": "Paris"}');
  });

  test('logprobs with top_logprobs: per token, with their alternatives; null when not asked', async () => {
    const done = await client.chat.completions.create({
      model: MODEL,
      messages: user('Hi'),
      logprobs: true,
      top_logprobs: 2,
    });
    const content = done.choices[0]?.logprobs?.content ?? [];
    assert.deepEqual(
      content.map((t) => t.token),
      ['Hello', ' world', ' 0'],
    );
    assert.deepEqual(content[0]?.bytes, [...Buffer.from('Hello')]);
    assert.deepEqual(
      content.map((t) => t.top_logprobs.length),
      [2, 2, 2],
    );
    assert.ok(content.every((t) => typeof t.logprob === 'number' && t.logprob < 0));
    assert.equal(lastSent().logprobs, true);
    assert.equal(lastSent().top_logprobs, 2);
  });

  test('POST /llm with @livepeer/ai still parses (top_k -1 is off, not forwarded)', async () => {
    const lp = new Livepeer({ httpBearer: key, serverURL: gw.url });
    const out = await lp.generate.llm({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], maxTokens: 3 });
    assert.equal(out.llmResponse?.choices[0]?.message?.content, 'Hello world 0');
    assert.equal(lastSent().top_k, undefined);
  });

  test('the text_completion shape of POST /v1/completions: chunks rewritten, logprobs in the legacy form', () => {
    const rewrite = textCompletionRewriter();
    const lp = (token: string, logprob: number) => ({
      token,
      logprob,
      bytes: null,
      top_logprobs: [{ token, logprob }],
    });
    const chunk = (content: string, finish: string | null) =>
      JSON.stringify({
        id: 'cmpl-1',
        object: 'chat.completion.chunk',
        created: 5,
        model: MODEL,
        choices: [{ index: 1, delta: { content }, logprobs: { content: [lp(content, -1)] }, finish_reason: finish }],
      });
    assert.deepEqual(JSON.parse(rewrite(chunk('Once', null))), {
      id: 'cmpl-1',
      object: 'text_completion',
      created: 5,
      model: MODEL,
      choices: [
        {
          index: 1,
          text: 'Once',
          logprobs: { tokens: ['Once'], token_logprobs: [-1], top_logprobs: [{ Once: -1 }], text_offset: [0] },
          finish_reason: null,
        },
      ],
    });
    const second = JSON.parse(rewrite(chunk(' upon', 'length'))).choices[0];
    assert.deepEqual(second.logprobs.text_offset, [4], "the offset runs on across the choice's chunks");
    assert.equal(second.finish_reason, 'length');
    const usage = { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 };
    const last = JSON.parse(rewrite(JSON.stringify({ id: 'cmpl-1', created: 5, model: MODEL, choices: [], usage })));
    assert.deepEqual([last.object, last.choices, last.usage], ['text_completion', [], usage]);
    const whole = textCompletion(
      { id: 'cmpl-1', created: 5, model: MODEL, usage },
      [{ index: 0, content: 'Once upon', toolCalls: [], logprobs: [], finish: 'length' }],
      false,
    ) as any;
    assert.equal(whole.object, 'text_completion');
    assert.deepEqual(whole.choices, [{ index: 0, text: 'Once upon', logprobs: null, finish_reason: 'length' }]);
  });
});

describe('routing and errors', () => {
  test('a feature no orchestrator serving the model advertises is a 400 naming its field; a plain request goes through', async () => {
    for (const [extra, param] of [
      [{ logprobs: true }, 'logprobs'],
      [{ n: 2 }, 'n'],
      [{ response_format: { type: 'json_object' } }, 'response_format'],
      [{ tools: [{ type: 'function', function: { name: 'f' } }] }, 'tools'],
      [{ logit_bias: { '5': 10 } }, 'logit_bias'],
    ] as const) {
      const before = plain.seen.length;
      const err = await client.chat.completions
        .create({ model: PLAIN, messages: user('Hi'), ...extra } as any)
        .catch((e: unknown) => e);
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.param, param);
      assert.equal(err.message, `400 ${param}: not supported by any orchestrator serving ${PLAIN}`);
      assert.equal(plain.seen.length, before, 'not forwarded');
    }
    const ok = await client.chat.completions.create({ model: PLAIN, messages: user('Hi') });
    assert.equal(ok.choices[0]?.message.content, 'Hello world 0');
  });

  test("an orchestrator's 400 comes through with its code and param", async () => {
    for (const [text, code, param] of [
      ['TOO LONG', 'context_length_exceeded', 'messages'],
      ['BAD SCHEMA', 'unsupported_parameter', 'response_format.json_schema.schema.properties.age.minimum'],
    ]) {
      const err = await client.chat.completions
        .create({ model: MODEL, messages: user(text ?? '') })
        .catch((e: unknown) => e);
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.code, code);
      assert.equal(err.param, param);
      assert.equal(err.type, 'invalid_request_error');
    }
  });

  test('a model id without an org, or unknown, is a 404 model_not_found', async () => {
    for (const id of ['gpt-4o', 'nobody/nothing', 'a/b/c']) {
      const err = await client.chat.completions.create({ model: id, messages: user('Hi') }).catch((e: unknown) => e);
      assert.ok(err instanceof OpenAI.NotFoundError, `${id}: ${String(err)}`);
      assert.equal(err.code, 'model_not_found');
      assert.equal(err.param, 'model');
    }
  });

  test('GET /v1/models/{id}: models.retrieve("org/name") (sent as org%2Fname), curl\'s org/name, 404 otherwise', async () => {
    const m = await client.models.retrieve(MODEL);
    assert.equal(m.id, MODEL);
    assert.equal(m.object, 'model');
    assert.equal(m.owned_by, 'fake');
    const curl = await fetch(`${gw.url}/v1/models/${MODEL}`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(curl.status, 200);
    assert.equal(((await curl.json()) as { id: string }).id, MODEL);
    const err = await client.models.retrieve('nobody/nothing').catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.NotFoundError, String(err));
    assert.equal(err.code, 'model_not_found');
    const anon = await fetch(`${gw.url}/v1/models/${encodeURIComponent(MODEL)}`);
    assert.equal(anon.status, 401);
  });

  test('a 503 carries Retry-After, streamed or not', async () => {
    for (const stream of [false, true]) {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: BUSY, messages: user('Hi'), stream }),
      });
      assert.equal(res.status, 503, `stream ${stream}`);
      assert.equal(res.headers.get('retry-after'), '1');
      const body = (await res.json()) as { error: { type: string } };
      assert.equal(body.error.type, 'service_unavailable');
    }
  });

  test("@livepeer/ai's error parser gets its `detail` on /llm: a 400 and a 401 throw with our message", async () => {
    const lp = new Livepeer({ httpBearer: key, serverURL: gw.url });
    const bad = await lp.generate
      .llm({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], temperature: 3 })
      .catch((e: unknown) => e);
    assert.ok(bad instanceof Error);
    assert.match(bad.message, /temperature: must be between 0 and 2 \(got 3\)/);
    assert.doesNotMatch(bad.message, /Response validation failed/);
    const anon = new Livepeer({ httpBearer: 'mp_not_a_key', serverURL: gw.url });
    const denied = await anon.generate
      .llm({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }] })
      .catch((e: unknown) => e);
    assert.ok(denied instanceof Error);
    assert.match(denied.message, /invalid API key/);

    // /llm answers OpenAI's error with `detail` beside it; /v1 keeps OpenAI's exact shape.
    const post = (path: string) =>
      fetch(gw.url + path, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: [] }),
      }).then((r) => r.json() as Promise<Record<string, any>>);
    const llm = await post('/llm');
    assert.deepEqual(Object.keys(llm).sort(), ['detail', 'error']);
    assert.equal(llm.detail.msg, llm.error.message);
    assert.deepEqual(Object.keys(await post('/v1/chat/completions')), ['error']);
  });

  test("the streamed error before the first chunk is in the route's shape too", async () => {
    const res = await fetch(`${gw.url}/llm`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'nobody/nothing', messages: user('Hi'), stream: true }),
    });
    assert.equal(res.status, 404);
    const body = (await res.json()) as Record<string, any>;
    assert.equal(body.error.code, 'model_not_found');
    assert.equal(body.detail.msg, body.error.message);
    const events = await readSse(
      await fetch(`${gw.url}/llm`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: user('Hi'), stream: true }),
      }),
    );
    assert.equal(events.at(-1)?.data, '[DONE]');
  });
});
