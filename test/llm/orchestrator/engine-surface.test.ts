// The llama.cpp engine's whole chat-completions surface (issue #17), through a real orchestrator
// on the random-weights tiny-random-llama-2: sampling defaults and seeds, the context rule,
// usage, n choices, logprobs, logit_bias, structured output, forced and auto tool calls, raw
// prompts, each checked on the wire the gateway reads (the orchestrator always streams).
// Auto tool calls need a tool-capable chat template: a copy of the model with one is made at
// test time (test/helpers/gguf.ts).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Ajv } from 'ajv';
import { startOrchestrator } from '../../../src/llm/orchestrator/index.ts';
import { CALL_TOKEN, modelWithChatTemplate, ONE_TOKEN_CALL_TEMPLATE, type TemplateModel } from '../../helpers/gguf.ts';
import { MODELS_DIR, quietLog, readSse, testConfig, TINY } from '../../helpers/llm.ts';
import { orchestratorOptions } from '../../../src/main.ts';

interface Orchestrator {
  url?: string | undefined;
  close(): Promise<void>;
}

let plain: Orchestrator;
let tools: Orchestrator;
let templated: TemplateModel;
/** Qwen 2.5's template: the model sees the tools, and calls as Qwen writes them. */
const TOOLS_MODEL = 'test/tiny-tools';
/** Calls start with one token, which logit_bias can force (test/helpers/gguf.ts). */
const CALLS_MODEL = 'test/tiny-calls';

before(async () => {
  const source = `${MODELS_DIR}/${TINY}/llama-2-tiny-random.gguf`;
  templated = await modelWithChatTemplate({ source, id: TOOLS_MODEL });
  await modelWithChatTemplate({ source, id: CALLS_MODEL, template: ONE_TOKEN_CALL_TEMPLATE, dir: templated.dir });
  const config = { orchestratorStreamIntervalMs: 0, maxNumSeqs: 4 };
  [plain, tools] = await Promise.all([
    startOrchestrator({
      options: orchestratorOptions(testConfig({ ...config, orchestratorModels: [TINY] })),
      log: quietLog,
    }),
    startOrchestrator({
      options: orchestratorOptions(
        testConfig({ ...config, modelsDir: templated.dir, orchestratorModels: [TOOLS_MODEL, CALLS_MODEL] }),
      ),
      log: quietLog,
    }),
  ]);
});

after(async () => {
  await Promise.all([plain?.close(), tools?.close()]);
  await templated?.remove();
});

interface Choice {
  role?: string;
  content: string;
  /** Whether any chunk of the choice had content (a tool call's choice has none). */
  hadContent: boolean;
  toolCalls: Array<{ id: string; type: string; name: string; arguments: string; pieces: number }>;
  logprobs: any[] | undefined;
  finish?: string;
  chunks: number;
}

interface Answer {
  status: number;
  error?: any;
  choices: Choice[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  done: boolean;
}

/** POSTs a chat request to an orchestrator and assembles its stream per choice, as a gateway would. */
async function ask(o: Orchestrator, extra: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${o.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: o === tools ? TOOLS_MODEL : TINY,
      messages: [{ role: 'user', content: 'Hello' }],
      max_tokens: 8,
      stream: true,
      ...extra,
    }),
  });
  if (res.status !== 200)
    return { status: res.status, error: ((await res.json()) as any).error, choices: [], done: false };
  const answer: Answer = { status: 200, choices: [], done: false };
  for (const event of await readSse(res)) {
    if (event.data === '[DONE]') {
      answer.done = true;
      continue;
    }
    const chunk = JSON.parse(event.data);
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) {
      assert.equal(answer.usage, undefined, 'one usage chunk');
      assert.deepEqual(chunk.choices, []);
      answer.usage = chunk.usage;
      continue;
    }
    assert.equal(answer.usage, undefined, 'nothing after the usage chunk but [DONE]');
    assert.equal(chunk.choices.length, 1);
    addChunk(answer, chunk.choices[0]);
  }
  return answer;
}

function addChunk(answer: Answer, c: any): void {
  let choice = answer.choices[c.index];
  if (!choice) {
    assert.equal(c.delta.role, 'assistant', "the role is on each choice's first chunk");
    choice = { role: c.delta.role, content: '', hadContent: false, toolCalls: [], logprobs: undefined, chunks: 0 };
    answer.choices[c.index] = choice;
  } else assert.equal(c.delta.role, undefined, 'the role only on the first chunk');
  assert.equal(choice.finish, undefined, 'nothing after a choice finished');
  choice.chunks++;
  if (typeof c.delta.content === 'string') {
    choice.content += c.delta.content;
    choice.hadContent ||= c.delta.content.length > 0;
  }
  for (const t of c.delta.tool_calls ?? []) {
    const call = choice.toolCalls[t.index];
    if (!call) {
      assert.match(t.id, /^call_[A-Za-z0-9]{24}$/);
      assert.equal(t.type, 'function');
      choice.toolCalls[t.index] = {
        id: t.id,
        type: t.type,
        name: t.function.name,
        arguments: t.function.arguments,
        pieces: 1,
      };
    } else {
      assert.equal(t.id, undefined, 'the id only on the first piece of a call');
      call.arguments += t.function.arguments;
      call.pieces++;
    }
  }
  if (c.logprobs) choice.logprobs = [...(choice.logprobs ?? []), ...c.logprobs.content];
  if (c.finish_reason) choice.finish = c.finish_reason;
}

const one = (a: Answer): Choice => {
  assert.equal(a.status, 200, JSON.stringify(a.error));
  assert.equal(a.choices.length, 1);
  assert.ok(a.done && a.usage, 'usage, then [DONE]');
  return a.choices[0]!;
};

test('capabilities advertise every feature of the llama.cpp engine', async () => {
  const caps = (await (await fetch(`${plain.url}/capabilities`)).json()) as any;
  assert.deepEqual(
    new Set(caps.features),
    new Set(['json_object', 'json_schema', 'tools', 'logprobs', 'n', 'logit_bias', 'completions', 'embeddings']),
  );
});

test('unseeded requests differ; a seeded request repeats; top_k -1 is off', async () => {
  const unseeded = await Promise.all([ask(plain, {}), ask(plain, {}), ask(plain, {})]);
  const texts = unseeded.map((a) => one(a).content);
  assert.equal(new Set(texts).size, 3, `three unseeded requests, three texts: ${JSON.stringify(texts)}`);
  const seeded = [await ask(plain, { seed: 1234, top_k: -1 }), await ask(plain, { seed: 1234 })];
  assert.equal(one(seeded[0]!).content, one(seeded[1]!).content);
  assert.ok(one(seeded[0]!).content.length > 0);
});

test('prompt tokens + max_tokens over the context: 400 context_length_exceeded naming max_tokens', async () => {
  const a = await ask(plain, { max_tokens: 4090 });
  assert.equal(a.status, 400);
  assert.equal(a.error.code, 'context_length_exceeded');
  assert.equal(a.error.param, 'max_tokens');
  assert.match(a.error.message, /the prompt is \d+ tokens and max_tokens 4090, .*4096 tokens/);
  // What the message says fits does.
  const fits = Number(/at most (\d+)/.exec(a.error.message)?.[1]);
  const b = await ask(plain, { max_tokens: fits, stop: ['e'] });
  assert.equal(b.status, 200);
});

test('completion_tokens counts every generated token, those that matched a stop string too', async () => {
  for (let seed = 1; seed < 10; seed++) {
    const full = one(await ask(plain, { seed, max_tokens: 20, logprobs: true }));
    const tokens = (full.logprobs ?? []).map((l: any) => l.token as string);
    assert.equal(tokens.length, 20);
    // A token whose text first appears where it starts: a stop string that ends with it.
    const k = tokens.findIndex((t, i) => {
      if (i < 3 || t.trim().length < 2 || tokens.slice(i).join('').includes('\uFFFD')) return false;
      return full.content.indexOf(t) === full.content.length - tokens.slice(i).join('').length;
    });
    if (k === -1) continue;
    const stop = tokens[k]!;
    const stopped = await ask(plain, { seed, max_tokens: 20, stop: [stop] });
    const c = one(stopped);
    assert.equal(c.content, full.content.slice(0, full.content.indexOf(stop)), 'the same text up to the stop string');
    assert.equal(c.finish, 'stop');
    assert.equal(stopped.usage?.completion_tokens, k + 1, `tokens before ${JSON.stringify(stop)} and its own`);
    return;
  }
  assert.fail('no seed gave a usable stop string');
});

test('n: 3 choices decoded together, each with its index, role and finish_reason; usage summed', async () => {
  const a = await ask(plain, { n: 3, max_tokens: 5, logprobs: true });
  assert.equal(a.status, 200, JSON.stringify(a.error));
  assert.equal(a.choices.length, 3);
  let tokens = 0;
  for (const c of a.choices) {
    assert.ok(c.finish === 'length' || c.finish === 'stop');
    // A choice cut by max_tokens generated that many; one that ended on its own, a token per
    // logprobs entry and its end token.
    tokens += c.finish === 'length' ? 5 : (c.logprobs?.length ?? 0) + 1;
  }
  assert.equal(a.usage?.completion_tokens, tokens);
  assert.equal(a.usage?.total_tokens, (a.usage?.prompt_tokens ?? 0) + tokens);
  const seeded = [await ask(plain, { n: 2, seed: 7 }), await ask(plain, { n: 2, seed: 7 })];
  assert.deepEqual(
    seeded[0]!.choices.map((c) => c.content),
    seeded[1]!.choices.map((c) => c.content),
    'seeded: repeatable, choice i with seed + i',
  );
  assert.notEqual(seeded[0]!.choices[0]!.content, seeded[0]!.choices[1]!.content);
  const tooMany = await ask(plain, { n: 5 });
  assert.equal(tooMany.status, 400);
  assert.equal(tooMany.error.param, 'n');
});

test('logprobs with top_logprobs 2: one entry per token, log probabilities that sum to at most 1', async () => {
  const c = one(await ask(plain, { max_tokens: 6, logprobs: true, top_logprobs: 2 }));
  // One entry per token of the content: six, or five when the last token was the first byte of
  // a character that max_tokens cut (neither its text nor its entry is sent).
  assert.ok(c.logprobs?.length === 6 || c.logprobs?.length === 5, `${c.logprobs?.length}`);
  assert.equal(c.logprobs?.map((l) => l.token).join(''), c.content);
  for (const l of c.logprobs ?? []) {
    assert.ok(l.logprob <= 0, `${l.logprob}`);
    assert.deepEqual(l.bytes, [...Buffer.from(l.token)]);
    assert.equal(l.top_logprobs.length, 2);
    const [a, b] = l.top_logprobs;
    assert.ok(a.logprob >= b.logprob && b.logprob <= 0);
    assert.ok(Math.exp(a.logprob) + Math.exp(b.logprob) <= 1 + 1e-6);
    assert.ok(l.logprob <= a.logprob + 1e-9, 'no token is more likely than the most likely');
  }
  const plainText = one(await ask(plain, {}));
  assert.equal(plainText.logprobs, undefined, 'no logprobs key unless asked for');
});

test('logit_bias 100 makes the output that one token; a token id past the vocabulary is a 400', async () => {
  // 1234 is "▁answer" in Llama 2's vocabulary.
  const c = one(await ask(plain, { max_tokens: 5, logit_bias: { '1234': 100 } }));
  assert.deepEqual(c.content.trim().split(' '), ['answer', 'answer', 'answer', 'answer', 'answer']);
  const bad = await ask(plain, { logit_bias: { '32000': 5 } });
  assert.equal(bad.status, 400);
  assert.equal(bad.error.param, 'logit_bias');
});

const WEATHER = {
  type: 'object',
  properties: {
    city: { type: 'string' },
    days: { type: 'integer' },
    unit: { enum: ['celsius', 'fahrenheit'] },
    tags: { type: 'array', items: { type: 'string' } },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const weatherTool = {
  type: 'function',
  function: { name: 'get_weather', description: 'The weather', parameters: WEATHER },
};
const timeTool = {
  type: 'function',
  function: {
    name: 'get_time',
    parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 8 } } },
  },
};

test('response_format json_schema: the output parses and matches the schema, from a random model', async () => {
  const ajv = new Ajv();
  for (let i = 0; i < 3; i++) {
    const c = one(
      await ask(plain, {
        max_tokens: 300,
        response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: WEATHER, strict: true } },
      }),
    );
    const doc = JSON.parse(c.content);
    assert.ok(ajv.validate(WEATHER, doc), `${c.content}: ${ajv.errorsText()}`);
    assert.equal(c.finish, 'stop');
  }
  const obj = one(await ask(plain, { max_tokens: 100, response_format: { type: 'json_object' } }));
  assert.equal(typeof JSON.parse(obj.content), 'object');
  const refused = await ask(plain, {
    max_tokens: 100,
    response_format: {
      type: 'json_schema',
      json_schema: { name: 'x', schema: { type: 'object', properties: { code: { type: 'string', pattern: '^a' } } } },
    },
  });
  assert.equal(refused.status, 400);
  assert.equal(refused.error.param, 'response_format.json_schema.schema.properties.code.pattern');
});

for (const [name, toolChoice] of [
  ['named', { type: 'function', function: { name: 'get_weather' } }],
  ['required', 'required'],
] as const) {
  test(`a forced tool call (${name}): one call streamed in pieces, arguments that match the parameters`, async () => {
    const ajv = new Ajv();
    for (const o of [plain, tools]) {
      const a = await ask(o, { tools: [weatherTool, timeTool], tool_choice: toolChoice, max_tokens: 300 });
      const c = one(a);
      assert.equal(c.finish, 'tool_calls');
      assert.equal(c.hadContent, false, 'no content beside the call');
      assert.equal(c.toolCalls.length, 1);
      const call = c.toolCalls[0]!;
      if (name === 'named') assert.equal(call.name, 'get_weather');
      const schema = call.name === 'get_weather' ? WEATHER : timeTool.function.parameters;
      assert.ok(ajv.validate(schema, JSON.parse(call.arguments)), `${call.arguments}: ${ajv.errorsText()}`);
      assert.ok(call.pieces > 1, 'the arguments in pieces as they are generated');
    }
  });
}

test('auto tools with a tool-capable template: content or tool calls, finish_reason to match; a round trip is accepted', async () => {
  for (const extra of [{}, { parallel_tool_calls: false }, { n: 2 }]) {
    const a = await ask(tools, { tools: [weatherTool, timeTool], tool_choice: 'auto', max_tokens: 200, ...extra });
    assert.equal(a.status, 200, JSON.stringify(a.error));
    for (const c of a.choices) {
      if (c.toolCalls.length > 0) {
        assert.equal(c.finish, 'tool_calls');
        for (const call of c.toolCalls) JSON.parse(call.arguments);
      } else assert.ok(c.finish === 'stop' || c.finish === 'length');
    }
  }
  const roundTrip = await ask(tools, {
    tools: [weatherTool],
    max_tokens: 10,
    messages: [
      { role: 'system', content: 'You tell the weather.' },
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_abc',
            type: 'function',
            function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'call_abc', content: '{"temperature": 21}' },
    ],
  });
  assert.equal(roundTrip.status, 200, JSON.stringify(roundTrip.error));
  assert.ok(roundTrip.usage && roundTrip.usage.prompt_tokens > 0);
  const orphan = await ask(tools, {
    messages: [
      { role: 'user', content: 'Hi' },
      { role: 'tool', tool_call_id: 'call_nowhere', content: '1' },
    ],
  });
  assert.equal(orphan.status, 400);
  assert.equal(orphan.error.param, 'messages[1].tool_call_id');
  const unsupported = await ask(tools, {
    tools: [
      {
        type: 'function',
        function: { name: 'f', parameters: { type: 'object', properties: { n: { type: 'number', multipleOf: 3 } } } },
      },
    ],
  });
  assert.equal(unsupported.status, 400, 'a keyword the grammar cannot enforce is refused for auto too');
  assert.match(unsupported.error.param, /^tools\[0\]\.function\.parameters\./);
});

test('prompt (POST /v1/completions, forwarded): raw text generated without a chat template', async () => {
  const a = await ask(plain, { messages: [], prompt: 'Once upon a time', max_tokens: 6 });
  const c = one(a);
  assert.ok(c.content.length > 0);
  assert.equal(c.finish, 'length');
  // BOS and the prompt's own tokens: far fewer than the chat template around "Hello" would add.
  assert.ok(a.usage && a.usage.prompt_tokens >= 2 && a.usage.prompt_tokens <= 8, `${a.usage?.prompt_tokens}`);
  const json = one(
    await ask(plain, { messages: [], prompt: 'JSON:', max_tokens: 80, response_format: { type: 'json_object' } }),
  );
  assert.equal(typeof JSON.parse(json.content), 'object');
});

test('auto tools: a call the model makes is a tool call, streamed in pieces; finish_reason tool_calls, or length when cut', async () => {
  const ajv = new Ajv();
  const pick = {
    type: 'function',
    function: {
      name: 'pick',
      parameters: {
        type: 'object',
        properties: { color: { enum: ['red', 'blue'] }, note: { type: 'string', maxLength: 6 } },
        required: ['color'],
      },
    },
  };
  const force = { model: CALLS_MODEL, logit_bias: { [CALL_TOKEN]: 100 }, tools: [pick, timeTool] };
  for (const extra of [{ parallel_tool_calls: false }, { parallel_tool_calls: false, logprobs: true, n: 2 }]) {
    const a = await ask(tools, { ...force, ...extra, max_tokens: 200 });
    assert.equal(a.status, 200, JSON.stringify(a.error));
    for (const c of a.choices) {
      assert.equal(c.finish, 'tool_calls');
      assert.equal(c.toolCalls.length, 1, 'parallel_tool_calls false: one call');
      const call = c.toolCalls[0]!;
      const schema = call.name === 'pick' ? pick.function.parameters : timeTool.function.parameters;
      assert.ok(ajv.validate(schema, JSON.parse(call.arguments)), `${call.arguments}: ${ajv.errorsText()}`);
      assert.ok(call.pieces > 1, 'the arguments in pieces as they are generated');
    }
  }
  // Parallel calls: the forced token starts call after call until max_tokens cuts one.
  const cut = await ask(tools, { ...force, max_tokens: 150 });
  const c = one(cut);
  assert.equal(c.finish, 'length');
  assert.ok(c.toolCalls.length >= 2, `${c.toolCalls.length} calls`);
  assert.deepEqual(
    c.toolCalls.map((t) => t.id).filter((id, i, all) => all.indexOf(id) === i).length,
    c.toolCalls.length,
    'an id each',
  );
  assert.equal(cut.usage?.completion_tokens, 150);
});
