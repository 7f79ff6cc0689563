// The vLLM engine passes the whole chat surface through to vLLM's OpenAI server (issue #17,
// point 9) and turns its stream back into the engine's events. The fake vLLM
// (fixtures/fake-vllm.ts) records each request and checks it as vLLM does; its answers are
// streamed as vLLM streams them (n choices interleaved, tool_calls pieces, logprobs).

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { ContextLengthExceededError, UpstreamFailedError, ValidationError } from '../../../src/lib/errors.ts';
import type { Engine, GenerateEvent, GenerateParams } from '../../../src/llm/orchestrator/engine.ts';
import { createEngine } from '../../../src/llm/orchestrator/engines/index.ts';
import { startOrchestrator } from '../../../src/llm/orchestrator/index.ts';
import { quietLog, startGateway, testConfig, TINY, type TestGateway } from '../../helpers/llm.ts';
import { orchestratorOptions } from '../../../src/main.ts';

const FAKE = fileURLToPath(new URL('../fixtures/fake-vllm.ts', import.meta.url));

let dir: string;
let engine: Engine;

/** A vLLM engine on the fake; `env` is the fake's (read when it starts), `flags` lead vLLM's own. */
async function startEngine(record: string, env: Record<string, string> = {}, flags: string[] = []): Promise<Engine> {
  const saved = { ...process.env };
  Object.assign(process.env, { FAKE_VLLM_RECORD: record, ...env });
  try {
    const e = createEngine(
      orchestratorOptions(
        testConfig({
          orchestratorEngine: 'vllm',
          orchestratorModels: [TINY],
          vllmCommand: [process.execPath, FAKE, ...flags],
          maxModelLen: 1024,
        }),
      ).engine,
      quietLog,
    );
    await e.start();
    return e;
  } finally {
    for (const k of Object.keys(env)) if (saved[k] === undefined) delete process.env[k];
    process.env.FAKE_VLLM_RECORD = saved.FAKE_VLLM_RECORD;
    if (saved.FAKE_VLLM_RECORD === undefined) delete process.env.FAKE_VLLM_RECORD;
  }
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mp-vllm-surface-'));
  engine = await startEngine(join(dir, 'record.txt'));
});
after(async () => {
  await engine.close();
  await rm(dir, { recursive: true, force: true });
});

/** The last request body the fake received. */
async function lastSent(record = join(dir, 'record.txt')): Promise<any> {
  const lines = (await readFile(record, 'utf8')).trim().split('\n');
  return JSON.parse(lines.at(-1) ?? '{}');
}

const params = (extra: Partial<GenerateParams> = {}): GenerateParams => ({
  messages: [{ role: 'user', content: 'Hello' }],
  maxTokens: 8,
  n: 1,
  ...extra,
});

async function run(p: GenerateParams, e = engine): Promise<GenerateEvent[]> {
  const out: GenerateEvent[] = [];
  for await (const ev of e.generate(TINY, p, new AbortController().signal)) out.push(ev);
  return out;
}

/** Each choice's text, tool calls (pieces joined), finish reason and logprobs, from the events. */
function choices(events: GenerateEvent[]) {
  const out = new Map<
    number,
    {
      text: string;
      calls: Array<{ id?: string | undefined; name?: string | undefined; arguments: string }>;
      finish?: string;
      logprobs: any[];
    }
  >();
  const of = (i: number) => {
    let c = out.get(i);
    if (!c) {
      c = { text: '', calls: [], logprobs: [] };
      out.set(i, c);
    }
    return c;
  };
  for (const ev of events) {
    if (ev.type === 'usage') continue;
    const c = of(ev.index);
    assert.equal(c.finish, undefined, `choice ${ev.index}: nothing after its end`);
    if (ev.type === 'tool_call') {
      const call = c.calls[ev.piece.call];
      if (call) call.arguments += ev.piece.arguments;
      else {
        assert.equal(ev.piece.call, c.calls.length, 'calls are numbered from 0 in order');
        c.calls.push({ id: ev.piece.id, name: ev.piece.name, arguments: ev.piece.arguments });
      }
      continue;
    }
    c.text += ev.text;
    c.logprobs.push(...(ev.logprobs ?? []));
    if (ev.type === 'end') c.finish = ev.finishReason;
  }
  return [...out].sort(([a], [b]) => a - b).map(([, c]) => c);
}

test('features: all but embeddings; embed is refused naming input', async () => {
  assert.deepEqual([...engine.features].sort(), [
    'completions',
    'json_object',
    'json_schema',
    'logit_bias',
    'logprobs',
    'n',
    'tools',
  ]);
  await assert.rejects(engine.embed(TINY, ['a'], new AbortController().signal), (err: unknown) => {
    assert.ok(err instanceof ValidationError);
    assert.equal(err.param, 'input');
    assert.match(err.message, /serves no embeddings/);
    return true;
  });
});

test('every field reaches vLLM under its OpenAI name; n choices, logprobs and the usage come back per choice', async () => {
  const events = await run(
    params({
      messages: [
        { role: 'system', content: 'Be brief', name: 'rules' },
        { role: 'user', content: 'Weather?' },
        {
          role: 'assistant',
          content: '',
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
        },
        { role: 'tool', content: '{"temp": 3}', tool_call_id: 'call_1' },
      ],
      n: 3,
      topLogprobs: 2,
      seed: 42,
      logitBias: { '15': -100, '42': 5 },
      temperature: 0.5,
      topP: 0.9,
      topK: 7,
      stop: ['\n\n'],
      presencePenalty: 0.5,
      frequencyPenalty: 0.25,
    }),
  );
  const sent = await lastSent();
  assert.equal(sent.n, 3);
  assert.equal(sent.logprobs, true);
  assert.equal(sent.top_logprobs, 2);
  assert.equal(sent.seed, 42);
  assert.deepEqual(sent.logit_bias, { '15': -100, '42': 5 });
  assert.deepEqual(
    [sent.temperature, sent.top_p, sent.top_k, sent.presence_penalty, sent.frequency_penalty],
    [0.5, 0.9, 7, 0.5, 0.25],
  );
  assert.deepEqual(sent.stop, ['\n\n']);
  assert.deepEqual(sent.stream_options, { include_usage: true });
  assert.equal(sent.messages[0].name, 'rules');
  assert.equal(sent.messages[2].content, null, 'an assistant message that only called tools has content null');
  assert.equal(sent.messages[2].tool_calls[0].function.arguments, '{"city":"Oslo"}');
  assert.equal(sent.messages[3].tool_call_id, 'call_1');

  const got = choices(events);
  assert.equal(got.length, 3);
  assert.deepEqual(
    got.map((c) => c.text),
    ['fake tokens from vllm é🦙', 'fake1 tokens from vllm é🦙', 'fake2 tokens from vllm é🦙'],
  );
  for (const c of got) {
    assert.equal(c.finish, 'stop');
    assert.equal(c.logprobs.length, 5, 'one entry per token');
    for (const lp of c.logprobs) {
      assert.equal(lp.top_logprobs.length, 2);
      assert.ok(lp.logprob < 0);
      assert.deepEqual(lp.bytes, [...Buffer.from(lp.token)]);
    }
  }
  const last = events.at(-1);
  assert.equal(last?.type, 'usage');
  assert.deepEqual(last?.type === 'usage' && last.usage, { prompt_tokens: 3, completion_tokens: 15, total_tokens: 18 });
  assert.equal(events.filter((e) => e.type === 'usage').length, 1);
});

test('unset options stay unset, but temperature is OpenAI 1, never the model default', async () => {
  await run(params());
  const sent = await lastSent();
  assert.equal(sent.temperature, 1);
  for (const k of [
    'n',
    'logprobs',
    'top_logprobs',
    'seed',
    'logit_bias',
    'tools',
    'tool_choice',
    'response_format',
    'top_p',
    'top_k',
  ])
    assert.equal(k in sent, false, k);
});

test('max_tokens cuts a choice with finish_reason length', async () => {
  const [c] = choices(await run(params({ maxTokens: 2 })));
  assert.equal(c?.text, 'fake tokens');
  assert.equal(c?.finish, 'length');
});

test('response_format json_schema goes to vLLM guided decoding and the text parses', async () => {
  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string' },
      age: { type: 'integer' },
      tags: { type: 'array', items: { type: 'string' } },
    },
    required: ['name', 'age'],
  };
  const responseFormat = { type: 'json_schema' as const, json_schema: { name: 'person', schema, strict: true } };
  const events = await run(params({ maxTokens: 100, responseFormat }));
  assert.deepEqual((await lastSent()).response_format, responseFormat);
  const [c] = choices(events);
  assert.deepEqual(JSON.parse(c?.text ?? ''), { name: 'xxxx', age: 7, tags: ['xxxx'] });
  assert.equal(c?.finish, 'stop');

  const obj = choices(await run(params({ maxTokens: 100, responseFormat: { type: 'json_object' } })));
  assert.deepEqual(JSON.parse(obj[0]?.text ?? ''), { fake: 'vllm', choice: 0 });
});

const weather = {
  type: 'function' as const,
  function: {
    name: 'weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
const time = {
  type: 'function' as const,
  function: { name: 'time', parameters: { type: 'object', properties: { zone: { type: 'string', enum: ['UTC'] } } } },
};

test('a named tool_choice streams one call per choice: id and name first, arguments in pieces, finish tool_calls', async () => {
  const events = await run(
    params({
      n: 2,
      maxTokens: 50,
      tools: [weather, time],
      toolChoice: { type: 'function', function: { name: 'weather' } },
      parallelToolCalls: false,
    }),
  );
  const sent = await lastSent();
  assert.deepEqual(sent.tools, [weather, time]);
  assert.deepEqual(sent.tool_choice, { type: 'function', function: { name: 'weather' } });
  assert.equal(sent.parallel_tool_calls, false);
  const got = choices(events);
  assert.equal(got.length, 2);
  for (const c of got) {
    assert.equal(c.text, '');
    // vLLM numbers a named call by the choice's index: here every choice has its call 0.
    assert.equal(c.calls.length, 1);
    assert.equal(c.calls[0]?.name, 'weather');
    assert.match(c.calls[0]?.id ?? '', /\S/);
    assert.deepEqual(JSON.parse(c.calls[0]?.arguments ?? ''), { city: 'xxxx' });
    assert.equal(c.finish, 'tool_calls', "vLLM's stop after a named call is reported as tool_calls");
  }
  const pieces = events.filter((e) => e.type === 'tool_call');
  assert.ok(pieces.length > 2, 'arguments arrive in pieces');
  assert.ok(
    pieces.every((e) => e.type === 'tool_call' && (e.piece.id !== undefined) === (e.piece.name !== undefined)),
    'id and name ride together on the first piece only',
  );
});

test('tool_choice required with parallel calls: two calls numbered 0 and 1', async () => {
  const [c] = choices(await run(params({ maxTokens: 50, tools: [weather, time], toolChoice: 'required' })));
  assert.deepEqual(
    c?.calls.map((k) => [k.name, JSON.parse(k.arguments)]),
    [
      ['weather', { city: 'xxxx' }],
      ['time', { zone: 'UTC' }],
    ],
  );
  assert.notEqual(c?.calls[0]?.id, c?.calls[1]?.id);
  assert.equal(c?.finish, 'tool_calls');
});

test('a prompt goes to /v1/completions, its logprobs come back in the chat form', async () => {
  const events = await run(params({ messages: [], prompt: 'Once upon a time', n: 2, topLogprobs: 3, maxTokens: 3 }));
  const sent = await lastSent();
  assert.equal(sent.prompt, 'Once upon a time');
  assert.equal('messages' in sent, false);
  assert.equal(sent.logprobs, 3, "the completions API's logprobs is the number of alternatives");
  assert.equal('top_logprobs' in sent, false);
  const got = choices(events);
  assert.deepEqual(
    got.map((c) => [c.text, c.finish]),
    [
      ['fake tokens from', 'length'],
      ['fake1 tokens from', 'length'],
    ],
  );
  const lp = got[0]?.logprobs[1];
  assert.equal(lp.token, ' tokens');
  assert.equal(lp.logprob, -0.5);
  assert.deepEqual(
    lp.top_logprobs.map((a: any) => a.token),
    [' tokens', 'alt1', 'alt2'],
    'alternatives, most likely first',
  );
  const usage = events.at(-1);
  assert.equal(usage?.type === 'usage' && usage.usage.completion_tokens, 6);
});

test("vLLM's 400 passes on with its message; a context overflow keeps its code and names max_tokens", async () => {
  await assert.rejects(run(params({ logitBias: { '99999': 1 } })), (err: unknown) => {
    assert.ok(err instanceof ValidationError, String(err));
    assert.match(err.message, /out-of-vocab token ids/);
    return true;
  });
  // vLLM's rule: tools without a tool call parser take no "auto".
  await assert.rejects(run(params({ tools: [weather], toolChoice: 'auto' })), (err: unknown) => {
    assert.ok(err instanceof ValidationError);
    assert.match(err.message, /"auto" tool choice requires --enable-auto-tool-choice/);
    return true;
  });
  // The fake counts 3 prompt tokens: 1022 + 3 > MAX_MODEL_LEN 1024.
  await assert.rejects(run(params({ maxTokens: 1022 })), (err: unknown) => {
    assert.ok(err instanceof ContextLengthExceededError, String(err));
    assert.equal(err.param, 'max_tokens');
    assert.match(err.message, /maximum context length is 1024 tokens/);
    return true;
  });
});

test('tool_choice auto on a vLLM started with a tool call parser (MEDIAPLANE_VLLM_COMMAND) streams its call', async () => {
  const record = join(dir, 'auto.txt');
  const auto = await startEngine(record, {}, ['--enable-auto-tool-choice', '--tool-call-parser', 'hermes']);
  try {
    const [c] = choices(await run(params({ maxTokens: 50, tools: [weather] }), auto));
    assert.equal(c?.calls[0]?.name, 'weather');
    assert.equal(c?.finish, 'tool_calls');
    assert.equal((await lastSent(record)).tool_choice, undefined, 'unset stays unset: vLLM defaults to auto');
  } finally {
    await auto.close();
  }
});

test('a failure in the middle of the stream is an error after the first events, not an end', async () => {
  const failing = await startEngine(join(dir, 'failing.txt'), { FAKE_VLLM_MIDSTREAM_ERROR: '1' });
  try {
    const seen: GenerateEvent[] = [];
    await assert.rejects(
      (async () => {
        for await (const ev of failing.generate(TINY, params(), new AbortController().signal)) seen.push(ev);
      })(),
      (err: unknown) => {
        assert.ok(err instanceof UpstreamFailedError);
        assert.match(err.message, /fake vLLM engine died/);
        return true;
      },
    );
    assert.deepEqual(seen, [{ type: 'text', index: 0, text: 'fake' }]);
  } finally {
    await failing.close();
  }
});

test('through the gateway with the openai SDK: the assembled answer of what vLLM streamed', async () => {
  const record = join(dir, 'gateway.txt');
  process.env.FAKE_VLLM_RECORD = record;
  let orch: { url?: string; close(): Promise<void> } | undefined;
  let gw: TestGateway | undefined;
  try {
    orch = await startOrchestrator({
      options: orchestratorOptions(
        testConfig({
          orchestratorEngine: 'vllm',
          orchestratorModels: [TINY],
          vllmCommand: [process.execPath, FAKE],
          maxModelLen: 1024,
        }),
      ),
      log: quietLog,
    });
    gw = await startGateway({ orchestrators: [orch.url ?? ''] });
    const client = new OpenAI({ apiKey: await gw.owner('vllm-user'), baseURL: `${gw.url}/v1`, maxRetries: 0 });

    const chat = await client.chat.completions.create({
      model: TINY,
      messages: [{ role: 'user', content: 'Hi' }],
      n: 2,
      logprobs: true,
      top_logprobs: 2,
      seed: 5,
      logit_bias: { '42': 3 },
      max_tokens: 8,
    });
    const sent = await lastSent(record);
    assert.deepEqual([sent.n, sent.logprobs, sent.top_logprobs, sent.seed], [2, true, 2, 5]);
    assert.deepEqual(sent.logit_bias, { '42': 3 });
    assert.deepEqual(
      chat.choices.map((c) => [c.index, c.message.content, c.finish_reason]),
      [
        [0, 'fake tokens from vllm é🦙', 'stop'],
        [1, 'fake1 tokens from vllm é🦙', 'stop'],
      ],
    );
    assert.equal(chat.choices[0]?.logprobs?.content?.length, 5);
    assert.equal(chat.usage?.completion_tokens, 10);

    const called = await client.chat.completions.create({
      model: TINY,
      messages: [{ role: 'user', content: 'Weather in Oslo?' }],
      tools: [weather],
      tool_choice: { type: 'function', function: { name: 'weather' } },
      max_tokens: 50,
    });
    const call = called.choices[0]?.message.tool_calls?.[0];
    assert.equal(called.choices[0]?.finish_reason, 'tool_calls');
    assert.equal(call?.type === 'function' && call.function.name, 'weather');
    assert.deepEqual(JSON.parse(call?.type === 'function' ? call.function.arguments : ''), { city: 'xxxx' });

    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };
    const json = await client.chat.completions.create({
      model: TINY,
      messages: [{ role: 'user', content: 'JSON please' }],
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
      max_tokens: 50,
    });
    assert.deepEqual(JSON.parse(json.choices[0]?.message.content ?? ''), { ok: true });
    assert.deepEqual((await lastSent(record)).response_format.json_schema.schema, schema);

    const text = await client.completions.create({ model: TINY, prompt: 'Once', max_tokens: 3 });
    assert.equal((await lastSent(record)).prompt, 'Once');
    assert.equal(text.choices[0]?.text, 'fake tokens from');
    assert.equal(text.choices[0]?.finish_reason, 'length');

    // vLLM's refusal reaches the client as a 400 with its message.
    await assert.rejects(
      client.chat.completions.create({
        model: TINY,
        messages: [{ role: 'user', content: 'Hi' }],
        logit_bias: { '99999': 1 },
        max_tokens: 4,
      }),
      (err: any) => err.status === 400 && /out-of-vocab/.test(err.message),
    );
    // No vLLM orchestrator computes embeddings: the gateway says so by the model.
    await assert.rejects(
      client.embeddings.create({ model: TINY, input: 'a' }),
      (err: any) => err.status === 400 && err.param === 'model',
    );
    // Nor does it take one when asked directly: a 400 naming input.
    const direct = await fetch(`${orch.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: TINY, input: ['a'] }),
    });
    assert.equal(direct.status, 400);
    assert.equal(((await direct.json()) as any).error.param, 'input');
  } finally {
    delete process.env.FAKE_VLLM_RECORD;
    await gw?.close();
    await orch?.close();
  }
});
