// Issue #17's acceptance end to end with the real `openai` SDK (v6): a gateway with a real
// llama.cpp orchestrator behind it on the random-weights stas/tiny-random-llama-2. Structured
// output through `chat.completions.parse` and `zodResponseFormat`, forced tool calls (plain,
// streamed, and through the SDK's stream helper), a tool round trip, n choices, logprobs, random
// unseeded sampling and repeatable seeds, embeddings, the usage chunk only when asked, and the
// fields the SDK and frameworks send that the service does not know. A random model writes
// nothing sensible on its own, so everything here is what the engine guarantees: the grammar
// makes the shapes, the sampler the randomness. Seeded wherever the case allows, so a failure
// replays.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Ajv } from 'ajv';
import { readGgufFileInfo } from 'node-llama-cpp';
import type OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import type {
  ChatCompletionChunk,
  ChatCompletionMessageParam,
  ChatCompletionTool,
  ChatCompletionToolChoiceOption,
} from 'openai/resources/chat/completions';
import { z } from 'zod';
import { type LocalLlm, MODELS_DIR, startLocalLlm, TINY } from '../../helpers/llm.ts';

let llm: LocalLlm | undefined;
let client: OpenAI;
/** tiny-random-llama-2's embedding size (8), from its GGUF header. */
let embeddingSize: number;

before(async () => {
  const info = await readGgufFileInfo(join(MODELS_DIR, TINY, 'llama-2-tiny-random.gguf'));
  embeddingSize = Number((info.metadata as any).llama.embedding_length);
  // Every token its own chunk: streamed tool arguments then come in many pieces.
  llm = await startLocalLlm({ models: [TINY], config: { orchestratorStreamIntervalMs: 0, maxNumSeqs: 4 } });
  ({ client } = llm);
});
after(() => llm?.close());

const hello: ChatCompletionMessageParam[] = [{ role: 'user', content: 'Hello' }];

// ---- 1. Structured output: chat.completions.parse with zodResponseFormat

/** Schemas made of what the llama.cpp grammar enforces (zod's int sends the safe-integer bounds). */
const SCHEMAS = {
  person: z.object({
    name: z.string().max(12),
    age: z.number().int(),
    role: z.enum(['admin', 'editor', 'viewer']),
    active: z.boolean(),
  }),
  article: z.object({
    title: z.string().max(16),
    tags: z.array(z.string().max(6)).max(3),
    address: z.object({ city: z.string().max(10), zip: z.string().max(5).nullable() }),
  }),
  order: z.object({
    items: z.array(z.object({ id: z.number().int(), done: z.boolean(), kind: z.enum(['a', 'b']) })).max(2),
    note: z.string().max(8).optional().nullable(),
    total: z.number(),
  }),
};

for (const [name, schema] of Object.entries(SCHEMAS)) {
  test(`chat.completions.parse with zodResponseFormat returns a parsed object: ${name}`, async () => {
    const completion = await client.chat.completions.parse({
      model: TINY,
      messages: hello,
      response_format: zodResponseFormat(schema, name),
      max_tokens: 200,
      seed: 17,
    });
    const message = completion.choices[0]!.message;
    assert.equal(message.refusal ?? null, null);
    assert.ok(message.parsed, `parsed from ${JSON.stringify(message.content)}`);
    // parse() ran the schema already; again here so the assertion is ours.
    assert.deepEqual(schema.parse(message.parsed), message.parsed);
    assert.deepEqual(JSON.parse(message.content!), message.parsed);
  });
}

// ---- 2. Forced tool calls

const weatherParams = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 12 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer' },
  },
  required: ['city', 'unit', 'days'],
  additionalProperties: false,
};
const timeParams = {
  type: 'object',
  properties: { zone: { type: 'string', maxLength: 8 }, precise: { type: 'boolean' } },
  required: ['zone'],
};
const TOOLS: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather', parameters: weatherParams } },
  { type: 'function', function: { name: 'get_time', description: 'The time', parameters: timeParams } },
];
const ajv = new Ajv();
const validators: Record<string, ReturnType<Ajv['compile']>> = {
  get_weather: ajv.compile(weatherParams),
  get_time: ajv.compile(timeParams),
};

/** The arguments parse as JSON and match the named function's parameters. */
function assertArguments(name: string, args: string): void {
  const validate = validators[name];
  assert.ok(validate, `a function of the request: ${name}`);
  let parsed: unknown;
  assert.doesNotThrow(() => (parsed = JSON.parse(args)), `arguments parse: ${args}`);
  assert.ok(validate(parsed), `${name}(${args}): ${JSON.stringify(validate.errors)}`);
}

const forced: Array<[string, ChatCompletionToolChoiceOption, string | undefined]> = [
  ['named', { type: 'function', function: { name: 'get_weather' } }, 'get_weather'],
  ['required', 'required', undefined],
];

for (const [label, toolChoice, expected] of forced) {
  test(`forced tool call (${label}), not streamed: one call whose arguments parse and match`, async () => {
    const completion = await client.chat.completions.create({
      model: TINY,
      messages: hello,
      tools: TOOLS,
      tool_choice: toolChoice,
      max_tokens: 160,
      seed: 3,
    });
    const choice = completion.choices[0]!;
    assert.equal(choice.finish_reason, 'tool_calls');
    const calls = choice.message.tool_calls ?? [];
    assert.equal(calls.length, 1);
    const call = calls[0]!;
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    if (call.type !== 'function') return;
    if (expected) assert.equal(call.function.name, expected);
    assertArguments(call.function.name, call.function.arguments);
  });

  test(`forced tool call (${label}), streamed: arguments in pieces, assembled as OpenAI clients do`, async () => {
    const stream = await client.chat.completions.create({
      model: TINY,
      messages: hello,
      tools: TOOLS,
      tool_choice: toolChoice,
      max_tokens: 160,
      seed: 4,
      stream: true,
    });
    const calls: Array<{ id: string; name: string; arguments: string; pieces: number }> = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0]!;
      for (const piece of choice.delta.tool_calls ?? []) {
        const call = calls[piece.index];
        if (!call) {
          assert.ok(piece.id, 'the id on the first piece of a call');
          assert.equal(piece.type, 'function');
          assert.ok(piece.function?.name, 'the name on the first piece of a call');
          calls[piece.index] = {
            id: piece.id,
            name: piece.function.name,
            arguments: piece.function.arguments ?? '',
            pieces: 1,
          };
        } else {
          call.arguments += piece.function?.arguments ?? '';
          call.pieces++;
        }
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    assert.equal(finish, 'tool_calls');
    assert.equal(calls.length, 1);
    const call = calls[0]!;
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    if (expected) assert.equal(call.name, expected);
    assert.ok(call.pieces > 1, `arguments streamed in pieces (${call.pieces})`);
    assertArguments(call.name, call.arguments);
  });
}

test("forced tool call through the SDK's stream helper: finalChatCompletion() has the call", async () => {
  const stream = client.chat.completions.stream({
    model: TINY,
    messages: hello,
    tools: TOOLS,
    tool_choice: { type: 'function', function: { name: 'get_time' } },
    max_tokens: 120,
    seed: 5,
  });
  let argumentEvents = 0;
  stream.on('tool_calls.function.arguments.delta', () => argumentEvents++);
  const completion = await stream.finalChatCompletion();
  const choice = completion.choices[0]!;
  assert.equal(choice.finish_reason, 'tool_calls');
  const call = choice.message.tool_calls?.[0];
  assert.ok(call && call.type === 'function', JSON.stringify(choice.message));
  assert.equal(call.function.name, 'get_time');
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  assertArguments('get_time', call.function.arguments);
  assert.ok(argumentEvents > 0, 'the helper saw the arguments stream');
});

// ---- 3. A tool round trip

test('tool round trip: assistant tool_calls (content null), then the tool message, gets a new answer', async () => {
  const messages: ChatCompletionMessageParam[] = [
    { role: 'user', content: 'What is the weather in Paris?' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: 'call_abcdefghijklmnopqrstuvwx',
          type: 'function',
          function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius","days":1}' },
        },
      ],
    },
    { role: 'tool', tool_call_id: 'call_abcdefghijklmnopqrstuvwx', content: '{"temperature":21}' },
  ];
  // As a framework sends it (the tools again), and without them.
  for (const extra of [{ tools: TOOLS }, {}]) {
    const { data, response } = await client.chat.completions
      .create({ model: TINY, messages, max_tokens: 8, seed: 6, ...extra })
      .withResponse();
    assert.equal(response.status, 200);
    assert.equal(data.choices.length, 1);
    const choice = data.choices[0]!;
    assert.equal(choice.message.role, 'assistant');
    assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason), choice.finish_reason);
  }
});

// ---- 4. n choices

test('n: 3 gives 3 choices with indices 0, 1, 2, each sampled on its own', async () => {
  const completion = await client.chat.completions.create({ model: TINY, messages: hello, n: 3, max_tokens: 8 });
  assert.deepEqual(
    completion.choices.map((c) => c.index),
    [0, 1, 2],
  );
  for (const c of completion.choices) {
    assert.equal(c.message.role, 'assistant');
    assert.equal(typeof c.message.content, 'string');
  }
  const texts = completion.choices.map((c) => c.message.content);
  assert.equal(new Set(texts).size, 3, `three choices, three texts: ${JSON.stringify(texts)}`);
  assert.equal(completion.usage?.completion_tokens, completion.usage!.total_tokens - completion.usage!.prompt_tokens);
});

// ---- 5. logprobs

test('logprobs with top_logprobs: 2: log probabilities <= 0 whose top two sum to at most 1', async () => {
  const completion = await client.chat.completions.create({
    model: TINY,
    messages: hello,
    logprobs: true,
    top_logprobs: 2,
    max_tokens: 6,
    seed: 8,
  });
  const content = completion.choices[0]!.logprobs?.content;
  assert.ok(content && content.length > 0, 'logprobs.content');
  for (const entry of content) {
    assert.equal(typeof entry.token, 'string');
    assert.ok(entry.logprob <= 0, `logprob ${entry.logprob}`);
    assert.equal(entry.top_logprobs.length, 2);
    const sum = entry.top_logprobs.reduce((s, t) => s + Math.exp(t.logprob), 0);
    assert.ok(sum <= 1 + 1e-6, `top two sum to ${sum}`);
    for (const t of entry.top_logprobs) assert.ok(t.logprob <= 0, `top logprob ${t.logprob}`);
  }
});

// ---- 6. Randomness and seeds

test('three unseeded identical requests differ; with the same seed they repeat', async () => {
  const ask = async (seed?: number): Promise<string> => {
    const c = await client.chat.completions.create({
      model: TINY,
      messages: hello,
      max_tokens: 20,
      ...(seed === undefined ? {} : { seed }),
    });
    return c.choices[0]!.message.content ?? '';
  };
  // Concurrent: within the same second, the case the issue found repeating.
  const unseeded = await Promise.all([ask(), ask(), ask()]);
  assert.equal(new Set(unseeded).size, 3, `three unseeded texts: ${JSON.stringify(unseeded)}`);
  const seeded = [await ask(1234), await ask(1234), await ask(1234)];
  assert.equal(new Set(seeded).size, 1, `three seeded texts: ${JSON.stringify(seeded)}`);
  assert.ok(seeded[0]!.length > 0);
});

// ---- 7. Embeddings

test("embeddings.create returns one vector of the model's embedding size per input", async () => {
  assert.equal(embeddingSize, 8);
  const res = await client.embeddings.create({ model: TINY, input: ['hello', 'world'] });
  assert.equal(res.object, 'list');
  assert.equal(res.data.length, 2);
  for (const [i, d] of res.data.entries()) {
    assert.equal(d.index, i);
    assert.equal(d.embedding.length, embeddingSize);
    assert.ok(d.embedding.every((v) => Number.isFinite(v)));
  }
  assert.notDeepEqual(res.data[0]!.embedding, res.data[1]!.embedding);
  assert.ok(res.usage.prompt_tokens > 0);
});

// ---- 8. The usage chunk only when asked

test('streaming without stream_options: every chunk has a choice (no usage chunk)', async () => {
  const stream = await client.chat.completions.create({
    model: TINY,
    messages: hello,
    max_tokens: 6,
    seed: 9,
    stream: true,
  });
  let text = '';
  let chunks = 0;
  for await (const chunk of stream) {
    text += chunk.choices[0]!.delta.content ?? ''; // what client code does: it must never throw
    assert.equal(chunk.usage ?? null, null);
    chunks++;
  }
  assert.ok(chunks > 0 && text.length > 0);
});

test('streaming with include_usage: the last chunk has the usage and no choices', async () => {
  const stream = await client.chat.completions.create({
    model: TINY,
    messages: hello,
    max_tokens: 6,
    seed: 9,
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks: ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  const last = chunks.at(-1)!;
  assert.deepEqual(last.choices, []);
  assert.ok(last.usage, 'usage on the last chunk');
  assert.equal(last.usage.completion_tokens, 6);
  assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + 6);
  for (const chunk of chunks.slice(0, -1)) assert.equal(chunk.choices.length, 1);
});

// ---- 9. Fields the SDK and frameworks send

test('fields the SDK and frameworks send are accepted; the unknown ones are named in a header', async () => {
  const { data, response } = await client.chat.completions
    .create({
      model: TINY,
      messages: hello,
      max_tokens: 4,
      seed: 10,
      store: false,
      metadata: {},
      service_tier: 'auto',
      logprobs: false,
      tools: [],
    })
    .withResponse();
  assert.equal(response.status, 200);
  assert.equal(data.choices.length, 1);
  assert.equal(data.choices[0]!.logprobs ?? null, null);
  const named = (response.headers.get('x-mediaplane-ignored-fields') ?? '').split(',').map((s) => s.trim());
  assert.deepEqual(new Set(named), new Set(['store', 'metadata', 'service_tier']));

  // parallel_tool_calls is known (honoured with tools); store is not.
  const raw = await client.chat.completions
    .create({
      model: TINY,
      messages: hello,
      max_tokens: 160,
      seed: 11,
      store: false,
      tools: TOOLS,
      tool_choice: 'required',
      parallel_tool_calls: true,
    })
    .asResponse();
  assert.equal(raw.status, 200);
  assert.equal(raw.headers.get('x-mediaplane-ignored-fields'), 'store');
  const body = (await raw.json()) as any;
  assert.equal(body.choices[0].finish_reason, 'tool_calls');
});
