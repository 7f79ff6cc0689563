// Hostile JSON schemas (issue #25, hole 1) against both LLM routes (/llm and
// /v1/chat/completions) on one server running the API, gateway and orchestrator roles, as
// `mediaplane start` runs them: the worst request of the issue at 1 MiB leaves /healthz
// answering, and generated deep and wide schemas (enum, const, oneOf, anyOf, $refs, nesting),
// sent as response_format.json_schema and as a tool's parameters, never get a 5xx. A failure
// prints fast-check's seed and the shrunk counterexample, which replays with `FUZZ_SEED=<seed>`.
// The worst stall itself is measured by bench/stall.ts, not asserted here.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { MODELS_DIR, TINY } from '../helpers/llm.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 120);
const TIME_LIMIT_MS = 30_000;
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const ROUTES = ['/llm', '/v1/chat/completions'] as const;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Schema = { [k: string]: Json };

const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

const chat = (extra: Record<string, Json>, maxTokens = 16): Record<string, Json> => ({
  model: TINY,
  messages: [{ role: 'user', content: 'Answer.' }],
  max_tokens: maxTokens,
  temperature: 1,
  seed: 1,
  ...extra,
});
const asFormat = (schema: Json): Json => ({ type: 'json_schema', json_schema: { name: 'fuzz', schema } });
const asTool = (parameters: Json): Json => [{ type: 'function', function: { name: 'f', parameters } }];

// ---- Generated schemas: wide (long enums, many branches and properties) and deep (nesting,
// values nested inside const, chains of $refs).

const scalar = fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constantFrom('a', 'b', 'é', '', 'x y'), fc.boolean());
const literal: fc.Arbitrary<Json> = fc.oneof(
  { weight: 3, arbitrary: scalar },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json> },
);

/** A value nested `depth` deep, as arrays or objects. */
const nestedValue = fc
  .record({ depth: fc.integer({ min: 1, max: 300 }), inObject: fc.boolean() })
  .map(({ depth, inObject }) => {
    let v: Json = 1;
    for (let i = 0; i < depth; i++) v = inObject ? { k: v } : [v];
    return v;
  });

const wideEnum: fc.Arbitrary<Schema> = fc
  .record({
    n: fc.oneof(
      fc.integer({ min: 1, max: 50 }),
      fc.integer({ min: 1900, max: 2100 }),
      fc.integer({ min: 4990, max: 9000 }),
    ),
    strings: fc.boolean(),
    width: fc.constantFrom(1, 30, 200),
  })
  .map(({ n, strings, width }) => ({
    enum: range(0, n).map((i) => (strings ? `${i}`.padEnd(width, 'v') : i)),
  }));

const leaf: fc.Arbitrary<Schema> = fc.oneof(
  fc.record({ type: fc.constantFrom('string', 'integer', 'number', 'boolean', 'null') }),
  fc.record({ type: fc.constant('string'), maxLength: fc.integer({ min: 0, max: 40 }) }),
  fc.record({ enum: fc.uniqueArray(scalar, { minLength: 1, maxLength: 6 }) as fc.Arbitrary<Json[]> }),
  fc.record({ const: literal }),
  fc.record({ const: nestedValue }),
  wideEnum,
);

const { schema: tree } = fc.letrec<{ schema: Schema }>((tie) => ({
  schema: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.record({ oneOf: fc.array(tie('schema'), { minLength: 1, maxLength: 5 }) }),
    fc.record({ anyOf: fc.array(tie('schema'), { minLength: 1, maxLength: 5 }) }),
    fc.record({ type: fc.constant('array'), items: tie('schema'), maxItems: fc.integer({ min: 0, max: 4 }) }),
    fc
      .dictionary(fc.constantFrom('a', 'b', 'c', 'name', 'ü'), tie('schema'), { maxKeys: 4 })
      .map((properties): Schema => ({ type: 'object', properties, required: Object.keys(properties) })),
  ),
}));

/** One schema wrapped `depth` times: nesting far past any limit. */
const deepChain: fc.Arbitrary<Schema> = fc
  .record({
    depth: fc.integer({ min: 1, max: 400 }),
    wrap: fc.constantFrom('items', 'anyOf', 'oneOf', 'properties'),
    inner: leaf,
  })
  .map(({ depth, wrap, inner }) => {
    let s: Schema = inner;
    for (let i = 0; i < depth; i++)
      if (wrap === 'items') s = { type: 'array', items: s, maxItems: 1 };
      else if (wrap === 'properties') s = { type: 'object', properties: { p: s }, required: ['p'] };
      else s = { [wrap]: [s] };
    return s;
  });

/** Many branches or properties at one level. */
const wide: fc.Arbitrary<Schema> = fc
  .record({ n: fc.integer({ min: 1, max: 3000 }), kind: fc.constantFrom('oneOf', 'anyOf', 'tagged', 'properties') })
  .map(({ n, kind }): Schema => {
    if (kind === 'properties')
      return { type: 'object', properties: Object.fromEntries(range(0, n).map((i) => [`p${i}`, { type: 'boolean' }])) };
    if (kind === 'tagged')
      return { oneOf: range(0, n).map((i) => ({ type: 'object', properties: { t: { const: i } }, required: ['t'] })) };
    return { [kind]: range(0, n).map((i) => ({ const: i })) };
  });

/** $refs two ways to the next def, `depth` deep (2^depth alternatives as llama.cpp expands them). */
const refChain: fc.Arbitrary<Schema> = fc.integer({ min: 1, max: 40 }).map((depth) => {
  const defs: Record<string, Json> = {};
  for (let i = 0; i < depth; i++)
    defs[`a${i}`] = { anyOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
  defs[`a${depth}`] = { type: 'integer' };
  return { oneOf: [{ $ref: '#/$defs/a0' }, { const: 'x' }], $defs: defs };
});

const anySchema = fc.oneof(tree, deepChain, wide, refChain, wideEnum);

/** The schema as a response_format, or as the parameters of a forced or optional tool call. */
const body = fc
  .record({
    schema: anySchema,
    as: fc.constantFrom('response_format', 'forced_tool', 'auto_tool'),
    maxTokens: fc.constantFrom(8, 64, 512),
  })
  .map(({ schema, as, maxTokens }) => {
    if (as === 'response_format') return chat({ response_format: asFormat(schema) }, maxTokens);
    // Tool parameters describe an object; $defs stay at the root, where the $refs point.
    const { $defs, ...v } = schema;
    const parameters: Json = { type: 'object', properties: { v }, required: ['v'], ...($defs ? { $defs } : {}) };
    return chat({ tools: asTool(parameters), tool_choice: as === 'forced_tool' ? 'required' : 'auto' }, maxTokens);
  });

describe('hostile JSON schemas against both LLM routes (issue #25)', () => {
  let server: TestServer;
  let key: string;

  before(async () => {
    server = await startTestServer({
      roles: { api: true, worker: false, gateway: true, orchestrator: true },
      settings: {
        modelsDir: MODELS_DIR,
        orchestratorModels: [TINY],
        gatewayPollMs: 60_000,
        maxQueuedPerOwner: 100_000,
      },
    });
    key = await server.key('schemas');
  });
  after(() => server.stop());

  async function send(path: string, payload: Json): Promise<{ status: number; text: string }> {
    const res = await fetch(server.url + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(payload),
    });
    return { status: res.status, text: await res.text() };
  }

  /** No 5xx, and an error in its route's own shape, a client's error typed as one. */
  function checkAnswer(path: string, payload: Json, r: { status: number; text: string }): void {
    const where = `${path} ${JSON.stringify(payload).slice(0, 400)} -> ${r.status} ${r.text.slice(0, 400)}`;
    assert.ok(r.status < 500, `5xx: ${where}`);
    if (r.status < 400) return;
    const parsed = JSON.parse(r.text) as Record<string, unknown>;
    assert.deepEqual(Object.keys(parsed).sort(), path === '/llm' ? ['detail', 'error'] : ['error'], where);
    const e = parsed.error as Record<string, unknown>;
    assert.ok(typeof e.message === 'string' && typeof e.type === 'string', where);
    assert.notEqual(e.type, 'server_error', `a client error typed as the server's: ${where}`);
  }

  it("the issue's oneOf of two enums at 1 MiB: /healthz keeps answering, the request gets a 400 naming the field", async () => {
    // About 1 MiB (the default body limit): two enums of 80,000 integers each.
    const schema = { oneOf: [{ enum: range(0, 80_000) }, { enum: range(80_000, 80_000) }] };
    for (const path of ROUTES) {
      const payload = chat({ response_format: asFormat(schema) });
      assert.ok(JSON.stringify(payload).length > 1_000_000);
      let polling = true;
      let worst = 0;
      let polls = 0;
      const poller = (async () => {
        while (polling) {
          const t = performance.now();
          const res = await fetch(`${server.url}/healthz`);
          assert.equal(res.status, 200);
          await res.arrayBuffer();
          worst = Math.max(worst, performance.now() - t);
          polls++;
          await sleep(10);
        }
      })();
      await sleep(50);
      const r = await send(path, payload);
      await sleep(50);
      polling = false;
      await poller;
      checkAnswer(path, payload, r);
      assert.equal(r.status, 400, r.text.slice(0, 300));
      assert.match(r.text, /response_format\.json_schema\.schema\.oneOf\[0\]\.enum: the schema is too large/);
      assert.ok(polls >= 3, `only ${polls} polls`);
      // Generous: today's build held the loop for many seconds (3.9 s at 73 KB, growing with the square).
      assert.ok(worst < 1000, `/healthz took ${worst.toFixed(0)} ms during the request`);
    }
  });

  it('generated deep and wide schemas, as response_format and as tool parameters: no 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ROUTES), body, async (path, payload) => {
        checkAnswer(path, payload, await send(path, payload));
      }),
      { numRuns: RUNS, interruptAfterTimeLimit: TIME_LIMIT_MS, ...(SEED === undefined ? {} : { seed: SEED }) },
    );
  });

  it('the server stays healthy', async () => {
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    const r = await send('/v1/chat/completions', chat({ response_format: asFormat({ enum: ['a', 'b'] }) }));
    assert.equal(r.status, 200, r.text);
    const answer = JSON.parse(r.text) as { choices: Array<{ message: { content: string } }> };
    assert.ok(['"a"', '"b"'].includes(answer.choices[0]?.message.content ?? ''), r.text);
  });
});
