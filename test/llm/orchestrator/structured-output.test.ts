// Structured output on llama.cpp from a random-weights model (issue #17): 200 JSON schemas drawn
// by fast-check (objects, arrays, enums, nested, optional fields, const, oneOf/anyOf, nullable,
// string formats, $defs/$ref), each generated from tiny-random-llama-2 under the grammar
// (engines/json-schema.ts) at temperature 1, and each output validated by ajv against the
// ORIGINAL schema. A random model closes nothing on its own, so this is the test of the bounds:
// every output must be a whole document that matches.
//
// The schemas come from FUZZ_SEED (default 17) and the model's seed from the schema's index, so a
// failure replays; its message carries the schema, max_tokens and the output.
// `generate` is the one function to swap for the orchestrator's HTTP route.
//
// The completions run on a few contexts at once (one sequence each, issue 41: the suite under
// 8 minutes): a completion's output depends only on its schema, max_tokens and seed, not on the
// context or what ran before on it, so the outputs and a failure's replay are the same as one at
// a time.

import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import fc from 'fast-check';
import {
  getLlama,
  LlamaChat,
  TokenBias,
  type GbnfJsonSchema,
  type Token,
  type Llama,
  type LlamaContext,
  type LlamaModel,
} from 'node-llama-cpp';
import { ValidationError } from '../../../src/lib/errors.ts';
import {
  createJsonGrammar,
  responseFormatSchema,
  tokensOutsideUtf8,
  toolCallSchema,
} from '../../../src/llm/orchestrator/engines/llamacpp/index.ts';
import type { ResponseFormat, ToolChoice, ToolDef } from '../../../src/llm/protocol/index.ts';
import { MODELS_DIR, TINY } from '../../helpers/llm.ts';

const SCHEMAS = 200;
// Completions per schema: more than one covers more of what the grammar allows.
const SEEDS_PER_SCHEMA = 2;
const SEED = Number(process.env.FUZZ_SEED ?? 17);

type Schema = Record<string, unknown>;

// ---- The schemas: small enough that the smallest document fits a max_tokens of 64-192.

const NAMES = ['id', 'name', 'tags', 'when', 'kind', 'n', 'ok', 'note', 'x', 'größe'];
const words = fc.uniqueArray(fc.constantFrom('a', 'b', 'red', 'green', 'ünï', 'x y', 'a"b', 'new\nline'), {
  minLength: 1,
  maxLength: 4,
});
const leaf: fc.Arbitrary<Schema> = fc.oneof(
  fc.record({ type: fc.constant('string') }),
  fc.record(
    {
      type: fc.constant('string'),
      minLength: fc.integer({ min: 0, max: 3 }),
      maxLength: fc.integer({ min: 3, max: 12 }),
    },
    { requiredKeys: ['type'] },
  ),
  fc.record({ type: fc.constant('string'), format: fc.constantFrom('date', 'time', 'date-time') }),
  fc.record({ type: fc.constantFrom('integer', 'number', 'boolean', 'null') }),
  fc.record({
    type: fc.constant('integer'),
    minimum: fc.constant(-9007199254740991),
    maximum: fc.constant(9007199254740991),
  }),
  fc.record({ enum: words }),
  fc.record({ type: fc.constant('string'), enum: words }),
  fc.record({
    enum: fc.uniqueArray(fc.oneof(fc.integer({ min: -5, max: 5 }), fc.boolean(), fc.constant(null)), {
      minLength: 1,
      maxLength: 3,
    }),
  }),
  fc.record({ const: fc.oneof(fc.constantFrom('v1', 'é'), fc.integer({ min: 0, max: 99 }), fc.boolean()) }),
);

/** Nullable as OpenAI's strict mode writes it: anyOf with null, or a type list. */
const nullable = (s: fc.Arbitrary<Schema>): fc.Arbitrary<Schema> =>
  fc.oneof(
    s.map((x) => ({ anyOf: [x, { type: 'null' }] })),
    fc.constantFrom('string', 'integer', 'boolean').map((t) => ({ type: [t, 'null'] })),
  );

const { schema } = fc.letrec<{ schema: Schema; object: Schema; array: Schema; union: Schema }>((tie) => ({
  schema: fc.oneof(
    { maxDepth: 3, depthSize: 'small', withCrossShrink: true },
    leaf,
    tie('object'),
    tie('array'),
    nullable(leaf),
    tie('union'),
  ),
  object: fc
    .uniqueArray(fc.tuple(fc.constantFrom(...NAMES), tie('schema'), fc.boolean()), {
      minLength: 0,
      maxLength: 3,
      selector: ([k]) => k,
    })
    .chain((props) =>
      fc.record(
        {
          type: fc.constant('object'),
          properties: fc.constant(Object.fromEntries(props.map(([k, s]) => [k, s]))),
          // Optional fields: those not required.
          required: fc.constant(props.filter(([, , req]) => req).map(([k]) => k)),
          additionalProperties: fc.constant(false),
          description: fc.constant('generated'),
        },
        { requiredKeys: ['type', 'properties', 'required'] },
      ),
    ),
  array: fc.oneof(
    fc.record(
      {
        type: fc.constant('array'),
        items: tie('schema'),
        minItems: fc.integer({ min: 0, max: 1 }),
        maxItems: fc.integer({ min: 1, max: 4 }),
      },
      { requiredKeys: ['type', 'items'] },
    ),
    fc.record({
      type: fc.constant('array'),
      prefixItems: fc.array(leaf, { minLength: 1, maxLength: 2 }),
      items: fc.constant(false),
    }),
  ),
  union: fc.oneof(
    // oneOf with branches told apart by type.
    fc
      .shuffledSubarray(
        [
          { type: 'string', maxLength: 5 },
          { type: 'integer' },
          { type: 'boolean' },
          { type: 'array', items: { type: 'null' } },
        ],
        { minLength: 2 },
      )
      .map((of) => ({ oneOf: of })),
    fc.array(tie('schema'), { minLength: 1, maxLength: 3 }).map((of) => ({ anyOf: of })),
  ),
}));

/** Sometimes the top level moves a property's schema into $defs (or zod's definitions) behind a $ref. */
const document: fc.Arbitrary<Schema> = fc
  .tuple(schema, fc.constantFrom('none', '$defs', 'definitions'))
  .map(([s, where]) => {
    const props = s.properties as Record<string, Schema> | undefined;
    const first = props ? Object.keys(props)[0] : undefined;
    if (where === 'none' || !props || first === undefined) return s;
    return {
      ...s,
      properties: { ...props, [first]: { $ref: `#/${where}/shared` } },
      [where]: { shared: props[first] },
    };
  });

// ---- Generation: tiny-random-llama-2 directly, as the llama.cpp engine runs it.

// One context per core (at least 2, at most 4), each generating one completion at a time.
const CONTEXTS = Math.min(4, Math.max(2, availableParallelism()));

let llama: Llama;
let model: LlamaModel;
let contexts: LlamaContext[] = [];
before(async () => {
  llama = await getLlama({ gpu: false, build: 'never' });
  model = await llama.loadModel({ modelPath: join(MODELS_DIR, TINY, 'llama-2-tiny-random.gguf') });
  contexts = await Promise.all(
    Array.from({ length: CONTEXTS }, () => model.createContext({ contextSize: 4096, sequences: 1, threads: 1 })),
  );
});
after(async () => {
  for (const context of contexts) await context.dispose();
  await model?.dispose();
  await llama?.dispose();
});

/**
 * Runs `work` on every item, as many at once as there are contexts, each on a context of its
 * own. After a failure no lane takes a new item, and every lane ends before the first failure
 * is thrown (the contexts are disposed after the test).
 */
async function onContexts<T>(items: readonly T[], work: (item: T, context: LlamaContext) => Promise<void>) {
  let next = 0;
  let failed = false;
  const lanes = contexts.map(async (context) => {
    while (!failed && next < items.length) {
      const item = items[next++] as T;
      try {
        await work(item, context);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  });
  const first = (await Promise.allSettled(lanes)).find((r) => r.status === 'rejected');
  if (first) throw first.reason;
}

/** A completion under `schema`'s grammar, as the llama.cpp engine runs one: the text and its tokens. */
async function generateUnder(
  context: LlamaContext,
  schema: GbnfJsonSchema,
  maxTokens: number,
  seed: number,
  bias?: (b: TokenBias) => void,
): Promise<{ text: string; tokens: number }> {
  const grammar = await createJsonGrammar(llama, schema);
  // As the engine does while a grammar is on: no token that is not whole UTF-8.
  const tokenBias = new TokenBias(model.tokenizer).set([...tokensOutsideUtf8(model)], 'never');
  bias?.(tokenBias);
  const sequence = context.getSequence();
  const chat = new LlamaChat({ contextSequence: sequence, autoDisposeSequence: false });
  let tokens = 0;
  try {
    const r = await chat.generateResponse(
      [
        { type: 'user', text: 'Reply with JSON.' },
        { type: 'model', response: [] },
      ],
      { grammar, tokenBias, temperature: 1, seed, maxTokens, onToken: (t) => (tokens += t.length) },
    );
    return { text: r.response, tokens };
  } finally {
    chat.dispose({ disposeSequence: false });
    sequence.dispose();
  }
}

/** The content of one completion with `format`. Swap this for the orchestrator's route (response_format). */
const generate = (context: LlamaContext, format: ResponseFormat, maxTokens: number, seed: number) =>
  generateUnder(context, responseFormatSchema(format, maxTokens), maxTokens, seed);

/** One forced tool call: its name and arguments text. Swap this for the route (message.tool_calls[0].function). */
async function generateToolCall(
  context: LlamaContext,
  tools: ToolDef[],
  choice: Exclude<ToolChoice, 'auto'>,
  maxTokens: number,
  seed: number,
): Promise<{ name: string; arguments: string; tokens: number }> {
  const out = await generateUnder(context, toolCallSchema(tools, choice, maxTokens), maxTokens, seed);
  const call = JSON.parse(out.text) as { name: string; arguments: unknown };
  return { name: call.name, arguments: JSON.stringify(call.arguments), tokens: out.tokens };
}

/** The max_tokens for a schema: the drawn one, or the least the engine asks for (its 400 says it). */
function budgetFor(format: ResponseFormat, drawn: number): number {
  try {
    responseFormatSchema(format, drawn);
    return drawn;
  } catch (err) {
    if (!(err instanceof ValidationError) || err.param !== 'max_tokens') throw err;
    return Number(/at least (\d+)/.exec(err.message)?.[1]);
  }
}

/** What the drawn schemas cover: each kind must be there, or the test no longer tests it. */
function kinds(s: unknown, out = new Set<string>(), depth = 0): Set<string> {
  if (typeof s !== 'object' || s === null) return out;
  const o = s as Schema;
  if (o.type === 'object') out.add(depth > 0 ? 'nested object' : 'object');
  if (o.type === 'object' && (o.required as string[]).length < Object.keys(o.properties as object).length)
    out.add('optional field');
  if (o.type === 'array') out.add('array');
  if (o.prefixItems) out.add('prefixItems');
  if (o.enum) out.add('enum');
  if (o.const !== undefined) out.add('const');
  if (o.oneOf) out.add('oneOf');
  if (o.anyOf) out.add('anyOf');
  if (Array.isArray(o.type) || (Array.isArray(o.anyOf) && o.anyOf.some((b: Schema) => b.type === 'null')))
    out.add('nullable');
  if (o.format) out.add(`format ${String(o.format)}`);
  if (o.$ref) out.add('$ref');
  for (const v of Object.values(o)) kinds(v, out, depth + 1);
  return out;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
// strictTuples off: a prefixItems tuple without maxItems is what the drawn schemas mean to test.
const ajv = addFormats(new Ajv2020({ allErrors: true, strictTypes: false, strictTuples: false }));

/** Asserts that `text` parses and matches `schema` (ajv); `where` says which case it was. */
function assertMatches(text: string, schema: Schema, where: string): void {
  let value: unknown;
  assert.doesNotThrow(
    () => {
      value = JSON.parse(text);
    },
    `${where}\noutput: ${JSON.stringify(text)}`,
  );
  const validate = ajv.compile(schema);
  assert.ok(validate(value), `${where}\noutput: ${JSON.stringify(text)}\najv: ${ajv.errorsText(validate.errors)}`);
}

it(`${SCHEMAS} generated schemas, ${SEEDS_PER_SCHEMA} seeds each: every output of the random model parses and matches (ajv)`, async (t) => {
  const drawn = fc.sample(fc.tuple(document, fc.integer({ min: 64, max: 192 })), { seed: SEED, numRuns: SCHEMAS });
  const covered = new Set<string>();
  for (const [s] of drawn) kinds(s, covered);
  for (const kind of [
    'object',
    'nested object',
    'optional field',
    'array',
    'prefixItems',
    'enum',
    'const',
    'oneOf',
    'anyOf',
    'nullable',
    'format date',
    'format time',
    'format date-time',
    '$ref',
  ])
    assert.ok(covered.has(kind), `the drawn schemas include ${kind}`);

  const started = performance.now();
  let tokens = 0;
  let fullest = 0;
  await onContexts([...drawn.entries()], async ([i, [s, drawnMax]], context) => {
    const format: ResponseFormat = { type: 'json_schema', json_schema: { name: `s${i}`, schema: s, strict: true } };
    const maxTokens = budgetFor(format, drawnMax);
    for (let k = 0; k < SEEDS_PER_SCHEMA; k++) {
      const seed = SEED * 10_000 + i * SEEDS_PER_SCHEMA + k;
      const out = await generate(context, format, maxTokens, seed);
      tokens += out.tokens;
      fullest = Math.max(fullest, out.tokens / maxTokens);
      const where = `schema ${i} (FUZZ_SEED=${SEED}, model seed ${seed}), max_tokens ${maxTokens}: ${JSON.stringify(s)}`;
      assert.ok(out.tokens <= maxTokens, where);
      assertMatches(out.text, s, where);
    }
  });
  const ms = performance.now() - started;
  t.diagnostic(
    `${SCHEMAS * SEEDS_PER_SCHEMA} completions, ${tokens} tokens in ${(ms / 1000).toFixed(1)} s on ${CONTEXTS} contexts (${((ms * CONTEXTS) / tokens).toFixed(2)} context-ms a token, grammar set-up and prompt included); the longest took ${(100 * fullest).toFixed(0)}% of its max_tokens`,
  );
});

it('json_object: an object that parses, at budgets from 8 tokens up', async () => {
  const runs = [8, 24, 64, 200, 600].flatMap((maxTokens) => [1, 2, 3].map((seed) => [maxTokens, seed] as const));
  await onContexts(runs, async ([maxTokens, seed], context) => {
    const out = await generate(context, { type: 'json_object' }, maxTokens, seed);
    assertMatches(out.text, { type: 'object' }, `json_object, max_tokens ${maxTokens}, seed ${seed}`);
  });
});

it('forced tool calls: a named function and "required", arguments that match the parameters', async () => {
  const tools: ToolDef[] = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        parameters: {
          type: 'object',
          properties: { city: { type: 'string' }, unit: { enum: ['c', 'f'] }, days: { type: ['integer', 'null'] } },
          required: ['city', 'unit', 'days'],
          additionalProperties: false,
        },
      },
    },
    { type: 'function', function: { name: 'now' } },
    {
      type: 'function',
      function: {
        name: 'search',
        parameters: { type: 'object', properties: { q: { type: 'string', maxLength: 20 } } },
      },
    },
  ];
  const params = (name: string): Schema =>
    (tools.find((x) => x.function.name === name)?.function.parameters as Schema | undefined) ?? {
      type: 'object',
      additionalProperties: false,
    };
  await onContexts([1, 2, 3, 4, 5, 6], async (seed, context) => {
    const fn = { type: 'function', function: { name: 'get_weather' } } as const;
    const named = await generateToolCall(context, tools, fn, 128, seed);
    assert.equal(named.name, 'get_weather');
    assertMatches(named.arguments, params('get_weather'), `get_weather, seed ${seed}`);
    const any = await generateToolCall(context, tools, 'required', 160, seed);
    assert.ok(['get_weather', 'now', 'search'].includes(any.name), any.name);
    assertMatches(any.arguments, params(any.name), `required (${any.name}), seed ${seed}`);
  });
});

/**
 * A sampler that ends nothing and spends the most tokens it can: tokens that close a string,
 * array or object are pushed far down; one-character tokens up, a backslash and a `u` most
 * (`\uXXXX` is the longest character, 6 bytes). Strings, arrays and open objects then grow to
 * their caps about a byte a token, toward the longest document the grammar allows.
 */
function stubborn(b: TokenBias): void {
  // The logits are read from the vocabulary once (32,000 detokenizes), not once a completion.
  stubbornLogits ??= [...model.iterateAllTokens()].flatMap((token): Array<[Token, number]> => {
    const text = model.detokenize([token]);
    if (/["\]}]/.test(text)) return [[token, -30]];
    if (text === '\\' || text === 'u') return [[token, 20]];
    return text.length === 1 ? [[token, 12]] : [];
  });
  for (const [token, logit] of stubbornLogits) b.set(token, { logit });
}
let stubbornLogits: Array<[Token, number]> | undefined;

it('a sampler that ends nothing fills the bounds, and every document still fits max_tokens and matches', async (t) => {
  const cases: Array<[ResponseFormat, number]> = [
    [{ type: 'json_object' }, 64],
    [{ type: 'json_object' }, 400],
    ...[
      { type: 'string' },
      { type: 'array', items: { type: 'string' } },
      { type: 'object', additionalProperties: { type: 'array', items: { type: 'number' } } },
      { type: 'object', properties: { a: { type: 'string' }, b: { type: 'array', items: { type: 'integer' } } } },
      {},
    ].flatMap(
      (s): Array<[ResponseFormat, number]> =>
        [48, 160, 400].map((m) => [{ type: 'json_schema', json_schema: { name: 's', schema: s } }, m]),
    ),
  ];
  let fullest = 0;
  const runs = cases.flatMap(([format, maxTokens]) => [1, 2].map((seed) => [format, maxTokens, seed] as const));
  await onContexts(runs, async ([format, maxTokens, seed], context) => {
    const out = await generateUnder(context, responseFormatSchema(format, maxTokens), maxTokens, seed, stubborn);
    const schema = format.type === 'json_object' ? { type: 'object' } : (format.json_schema.schema ?? {});
    const where = `${JSON.stringify(format)} at max_tokens ${maxTokens}, seed ${seed}: ${out.tokens} tokens`;
    assert.ok(out.tokens <= maxTokens, where);
    assertMatches(out.text, schema, where);
    fullest = Math.max(fullest, out.tokens / maxTokens);
  });
  // Below 100%: the caps are set for every character a \\uXXXX escape of six one-byte tokens.
  t.diagnostic(`the longest took ${(100 * fullest).toFixed(0)}% of its max_tokens`);
});
