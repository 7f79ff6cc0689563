// Structured output on llama.cpp, the schema side (engines/json-schema.ts): every keyword the
// grammar cannot enforce is a 400 naming its path; what it can enforce passes, strict-mode and
// zod schemas included; refs are rewritten for node-llama-cpp and recursive ones refused; and
// the bound holds: the longest document node-llama-cpp's real (patched) grammar allows, measured
// on the GBNF text itself, fits max_tokens.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { getLlama, type GbnfJsonSchema, type Llama } from 'node-llama-cpp';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { ValidationError } from '../../../src/lib/errors.ts';
import {
  createJsonGrammar,
  patchGrammar,
  responseFormatSchema,
  toolCallSchema,
  toolCallSchemas,
} from '../../../src/llm/orchestrator/engines/llamacpp/index.ts';
import type { ResponseFormat, ToolDef } from '../../../src/llm/protocol/index.ts';

const fmt = (schema: object): ResponseFormat => ({
  type: 'json_schema',
  json_schema: { name: 't', schema: schema as Record<string, unknown> },
});
const P = 'response_format.json_schema.schema';

/** zodResponseFormat's result as the contract's ResponseFormat (the SDK's type carries its parser too). */
const zodFormat = (f: { json_schema: { name: string; schema?: Record<string, unknown> } }): ResponseFormat => ({
  type: 'json_schema',
  json_schema: { name: f.json_schema.name, schema: f.json_schema.schema ?? {}, strict: true },
});

/** The ValidationError `fn` throws. */
function refusal(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ValidationError, `expected a ValidationError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected a ValidationError, nothing was thrown');
}

// ---- The longest text a GBNF grammar allows, in UTF-8 bytes (so tokens: each has at least one byte).

type Node =
  | { t: 'bytes'; n: number }
  | { t: 'ref'; name: string }
  | { t: 'seq'; of: Node[] }
  | { t: 'alt'; of: Node[] }
  | { t: 'rep'; of: Node; max: number };

/** A parser for the GBNF node-llama-cpp writes: literals, classes, rule names, groups, * + ? {m,n}. */
function parseGbnf(text: string): Map<string, Node> {
  const rules = new Map<string, Node>();
  for (const line of text.split('\n')) {
    const sep = line.indexOf(' ::= ');
    const src = line.slice(sep + 5);
    let i = 0;
    const ws = (): void => {
      while (src[i] === ' ') i++;
    };
    const escaped = (): string => {
      const c = src[i + 1] ?? '';
      if (c === 'x') {
        i += 4;
        return String.fromCharCode(Number.parseInt(src.slice(i - 2, i), 16));
      }
      i += 2;
      return ({ n: '\n', t: '\t', r: '\r' } as Record<string, string>)[c] ?? c;
    };
    const alt = (): Node => {
      const of = [seq()];
      while (src[i] === '|') {
        i++;
        of.push(seq());
      }
      return of.length === 1 ? of[0]! : { t: 'alt', of };
    };
    const seq = (): Node => {
      const of: Node[] = [];
      ws();
      while (i < src.length && src[i] !== '|' && src[i] !== ')') {
        of.push(postfix(primary()));
        ws();
      }
      return { t: 'seq', of };
    };
    const primary = (): Node => {
      const c = src[i];
      if (c === '"') {
        let s = '';
        i++;
        while (src[i] !== '"') s += src[i] === '\\' ? escaped() : src[i++];
        i++;
        return { t: 'bytes', n: Buffer.byteLength(s) };
      }
      if (c === '[') {
        i++;
        const negated = src[i] === '^';
        if (negated) i++;
        let most = 0;
        while (src[i] !== ']') {
          const ch = src[i] === '\\' ? escaped() : (src[i++] ?? '');
          most = Math.max(most, Buffer.byteLength(ch));
        }
        i++;
        // Any character but those listed: up to 4 bytes.
        return { t: 'bytes', n: negated ? 4 : most };
      }
      if (c === '(') {
        i++;
        const inner = alt();
        i++;
        return inner;
      }
      const name = /^[a-zA-Z0-9-]+/.exec(src.slice(i))?.[0];
      assert.ok(name, `unexpected GBNF at ${src.slice(i)}`);
      i += name.length;
      return { t: 'ref', name };
    };
    const postfix = (node: Node): Node => {
      for (;;) {
        const c = src[i];
        if (c === '*' || c === '+') {
          i++;
          node = { t: 'rep', of: node, max: Number.POSITIVE_INFINITY };
        } else if (c === '?') {
          i++;
          node = { t: 'rep', of: node, max: 1 };
        } else if (c === '{') {
          const m = /^\{(\d+)(,(\d*))?\}/.exec(src.slice(i));
          assert.ok(m);
          i += m[0].length;
          const max = m[2] === undefined ? Number(m[1]) : m[3] ? Number(m[3]) : Number.POSITIVE_INFINITY;
          node = { t: 'rep', of: node, max };
        } else return node;
      }
    };
    rules.set(line.slice(0, sep), alt());
  }
  return rules;
}

/** The most bytes of text from the start to the grammar's stop trigger (the `[\n]*` after it never runs). */
function grammarMaxBytes(gbnf: string): number {
  const lines = gbnf.split('\n');
  assert.match(lines[0] ?? '', / "\\n\\n\\n\\n" \[\\n\]\*$/, 'the root ends with the stop trigger');
  lines[0] = (lines[0] ?? '').replace(/ \[\\n\]\*$/, '');
  const rules = parseGbnf(lines.join('\n'));
  const memo = new Map<string, number>();
  const max = (n: Node): number => {
    switch (n.t) {
      case 'bytes':
        return n.n;
      case 'seq':
        return n.of.reduce((s, x) => s + max(x), 0);
      case 'alt':
        return Math.max(...n.of.map(max));
      case 'rep': {
        const one = max(n.of);
        return one === 0 ? 0 : one * n.max;
      }
      case 'ref': {
        const known = memo.get(n.name);
        if (known !== undefined) return known;
        memo.set(n.name, Number.POSITIVE_INFINITY); // a cycle is unbounded
        const rule = rules.get(n.name);
        assert.ok(rule, `rule ${n.name} is defined`);
        const v = max(rule);
        memo.set(n.name, v);
        return v;
      }
    }
  };
  return max({ t: 'ref', name: 'root' });
}

let llama: Llama;
before(async () => {
  llama = await getLlama({ gpu: false, build: 'never' });
});
after(async () => {
  await llama.dispose();
});

/** The patched GBNF of `schema`, failing on any warning node-llama-cpp prints (an unresolved ref becomes "any JSON"). */
async function gbnf(schema: GbnfJsonSchema): Promise<string> {
  const warn = console.warn;
  const warnings: unknown[] = [];
  console.warn = (...args: unknown[]) => warnings.push(args);
  try {
    return (await createJsonGrammar(llama, schema)).grammar;
  } finally {
    console.warn = warn;
    assert.deepEqual(warnings, [], 'node-llama-cpp warned about the schema');
  }
}

describe('keywords the llama.cpp grammar cannot enforce: a 400 naming the path', () => {
  const cases: Array<[string, object]> = [
    ['pattern', { type: 'string', pattern: '^a' }],
    ['minimum', { type: 'integer', minimum: 0 }],
    ['maximum', { type: 'number', maximum: 10 }],
    ['exclusiveMinimum', { type: 'number', exclusiveMinimum: 0 }],
    ['exclusiveMaximum', { type: 'integer', exclusiveMaximum: 5 }],
    ['multipleOf', { type: 'integer', multipleOf: 2 }],
    ['allOf', { allOf: [{ type: 'string' }] }],
    ['not', { not: { type: 'string' } }],
    // `then` spelled out of an object literal: biome takes such an object for a promise.
    [
      'if',
      Object.fromEntries([
        ['if', { type: 'string' }],
        ['then', { maxLength: 2 }],
      ]),
    ],
    ['uniqueItems', { type: 'array', items: { type: 'integer' }, uniqueItems: true }],
    ['contains', { type: 'array', contains: { type: 'integer' } }],
    ['patternProperties', { type: 'object', patternProperties: { '^a': { type: 'string' } } }],
    ['propertyNames', { type: 'object', propertyNames: { maxLength: 3 } }],
    ['dependentRequired', { type: 'object', dependentRequired: { a: ['b'] } }],
    ['additionalItems', { type: 'array', items: [{ type: 'string' }], additionalItems: false }],
    ['unevaluatedProperties', { type: 'object', unevaluatedProperties: false }],
    ['nullable', { type: 'string', nullable: true }],
  ];
  for (const [keyword, schema] of cases)
    it(keyword, () => {
      const err = refusal(() => responseFormatSchema(fmt({ type: 'object', properties: { x: schema } }), 256));
      assert.equal(err.param, `${P}.properties.x.${keyword}`);
      assert.match(err.message, new RegExp(`${keyword} is not supported: the llama.cpp engine cannot enforce it`));
    });

  it('number formats that do not hold every number the grammar writes (int32, float)', () => {
    for (const [type, format] of [
      ['integer', 'int32'],
      ['number', 'float'],
      ['number', 'int64'],
    ]) {
      const err = refusal(() => responseFormatSchema(fmt({ type, format }), 64));
      assert.equal(err.param, `${P}.format`);
    }
    responseFormatSchema(fmt({ type: 'integer', format: 'int64' }), 64);
    responseFormatSchema(fmt({ type: 'number', format: 'double' }), 64);
  });

  it('format other than date, time and date-time, naming the format', () => {
    const err = refusal(() => responseFormatSchema(fmt({ type: 'string', format: 'email' }), 64));
    assert.equal(err.param, `${P}.format`);
    assert.match(err.message, /"email" is not supported: the llama.cpp engine enforces only date, time and date-time/);
  });

  it('deep paths: in anyOf, items, prefixItems, a $defs entry reached by $ref, and a tool', () => {
    const nested = {
      type: 'object',
      properties: {
        a: { anyOf: [{ type: 'string' }, { type: 'string', pattern: 'x' }] },
        b: { type: 'array', items: { type: 'object', properties: { c: { type: 'integer', minimum: 1 } } } },
        d: { type: 'array', prefixItems: [{ type: 'string' }, { not: {} }] },
        e: { $ref: '#/$defs/E' },
      },
      $defs: { E: { type: 'string', pattern: 'y' } },
    };
    const err = refusal(() => responseFormatSchema(fmt(nested), 512));
    assert.equal(err.param, `${P}.properties.a.anyOf[1].pattern`);
    assert.deepEqual(err.details, [
      `${P}.properties.a.anyOf[1].pattern: pattern is not supported: the llama.cpp engine cannot enforce it`,
      `${P}.properties.b.items.properties.c.minimum: minimum is not supported: the llama.cpp engine cannot enforce it`,
      `${P}.properties.d.prefixItems[1].not: not is not supported: the llama.cpp engine cannot enforce it`,
      `${P}.$defs.E.pattern: pattern is not supported: the llama.cpp engine cannot enforce it`,
    ]);
    const tools: ToolDef[] = [
      { type: 'function', function: { name: 'ok', parameters: { type: 'object', properties: {} } } },
      {
        type: 'function',
        function: { name: 'bad', parameters: { type: 'object', properties: { q: { type: 'string', pattern: 'z' } } } },
      },
    ];
    const terr = refusal(() => toolCallSchema(tools, 'required', 256));
    assert.equal(terr.param, 'tools[1].function.parameters.properties.q.pattern');
  });

  it('keywords beside anyOf, oneOf, $ref and enum whose meaning would change', () => {
    assert.equal(
      refusal(() => responseFormatSchema(fmt({ type: 'object', anyOf: [{ required: ['a'] }] }), 64)).param,
      `${P}.type`,
    );
    assert.equal(
      refusal(() =>
        responseFormatSchema(fmt({ $ref: '#/$defs/A', maxLength: 2, $defs: { A: { type: 'string' } } }), 64),
      ).param,
      `${P}.maxLength`,
    );
    assert.equal(refusal(() => responseFormatSchema(fmt({ enum: ['a'], format: 'date' }), 64)).param, `${P}.format`);
  });

  it('oneOf whose branches may both match (the grammar cannot make exactly one match); anyOf is fine', () => {
    const overlapping = { oneOf: [{ type: 'string' }, { type: 'string', maxLength: 3 }] };
    const err = refusal(() => responseFormatSchema(fmt(overlapping), 64));
    assert.equal(err.param, `${P}.oneOf`);
    assert.match(err.message, /branches 0 and 1 may both match one document.*use anyOf/);
    responseFormatSchema(fmt({ anyOf: overlapping.oneOf }), 64);
    // Told apart by type, by value, or by a discriminating property.
    responseFormatSchema(fmt({ oneOf: [{ type: 'string' }, { type: 'integer' }, { type: 'null' }] }), 64);
    responseFormatSchema(fmt({ oneOf: [{ const: 'a' }, { enum: ['b', 'c'] }] }), 64);
    const tagged = (t: string) => ({ type: 'object', properties: { t: { const: t }, v: { type: 'integer' } } });
    responseFormatSchema(fmt({ oneOf: [tagged('x'), tagged('y')] }), 128);
  });

  it('schemas no document can satisfy as generated', () => {
    const cases: Array<[object, string]> = [
      [{ type: 'string', minLength: 3, maxLength: 2 }, `${P}.maxLength`],
      [{ type: 'array', minItems: 2, maxItems: 1 }, `${P}.maxItems`],
      [{ type: 'object', properties: { a: {}, b: {} }, maxProperties: 1 }, `${P}.maxProperties`],
      [{ type: 'object', additionalProperties: { type: 'string' }, minProperties: 2 }, `${P}.minProperties`],
      [{ type: 'object', required: ['a'], additionalProperties: false }, `${P}.required`],
      [{ type: 'string', enum: [1, 2] }, `${P}.enum`],
      [{ const: 'a\u0001' }, `${P}.const`],
      [{ type: 'string', format: 'date', maxLength: 5 }, `${P}.maxLength`],
      [{ type: 'wat' }, `${P}.type`],
      [{ type: 'string', maxLength: -1 }, `${P}.maxLength`],
      [{ properties: { a: false }, required: ['a'] }, `${P}.properties.a`],
      [{ $ref: 'https://example.com/s.json' }, `${P}.$ref`],
      [{ $ref: '#/$defs/missing' }, `${P}.$ref`],
    ];
    for (const [schema, param] of cases)
      assert.equal(refusal(() => responseFormatSchema(fmt(schema), 256)).param, param, JSON.stringify(schema));
  });
});

describe('what the grammar enforces passes', () => {
  it('every supported keyword, annotations and strict-mode extras', async () => {
    const schema = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: 'https://example.com/s',
      title: 'T',
      description: 'd',
      $comment: 'c',
      type: 'object',
      properties: {
        s: { type: 'string', minLength: 1, maxLength: 8, default: 'x', examples: ['y'] },
        d: { type: 'string', format: 'date' },
        t: { type: 'string', format: 'time' },
        dt: { type: 'string', format: 'date-time' },
        n: { type: 'number' },
        i: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
        b: { type: 'boolean' },
        z: { type: 'null' },
        e: { enum: ['a', 1, true, null, { k: [1] }] },
        c: { const: 'fixed' },
        u: { type: ['string', 'null'], maxLength: 4 },
        o: { anyOf: [{ type: 'integer' }, { type: 'null' }] },
        one: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'boolean' }, minItems: 1, maxItems: 3 }] },
        tuple: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }], items: false },
        rec: { type: 'object', additionalProperties: { type: 'integer' }, maxProperties: 3 },
        any: {},
        yes: true,
        nested: {
          type: 'object',
          properties: { deep: { type: 'array', items: { $ref: '#/$defs/leaf' } } },
          required: ['deep'],
          additionalProperties: false,
          minProperties: 1,
        },
      },
      required: ['s', 'd'],
      additionalProperties: false,
      $defs: { leaf: { type: 'string', maxLength: 2 } },
    };
    const out = responseFormatSchema(fmt(schema), 4096);
    assert.ok((await gbnf(out)).length > 0);
  });

  it('an OpenAI strict-mode schema: all required, optional fields as anyOf null or a type list', async () => {
    const strict = {
      type: 'object',
      properties: {
        name: { type: 'string' },
        nickname: { type: ['string', 'null'] },
        age: { anyOf: [{ type: 'integer' }, { type: 'null' }] },
        tags: { type: 'array', items: { type: 'string' } },
      },
      required: ['name', 'nickname', 'age', 'tags'],
      additionalProperties: false,
    };
    await gbnf(
      responseFormatSchema({ type: 'json_schema', json_schema: { name: 'p', strict: true, schema: strict } }, 256),
    );
  });

  it("zod through the openai SDK's zodResponseFormat: nullable, enums, unions, int, and $ref to #/definitions", async () => {
    const Address = z.object({ street: z.string(), zip: z.string().nullable() }).meta({ id: 'Address' });
    const Person = z.object({
      name: z.string(),
      age: z.number().int(),
      kind: z.enum(['a', 'b']),
      tags: z.array(z.string()),
      home: Address,
      work: Address.nullable(),
      either: z.union([z.string(), z.number()]),
      shape: z.discriminatedUnion('t', [
        z.object({ t: z.literal('x'), x: z.number() }),
        z.object({ t: z.literal('y') }),
      ]),
    });
    const format = zodResponseFormat(Person, 'person');
    assert.match(JSON.stringify(format.json_schema.schema), /"#\/definitions\/Address"/);
    const out = responseFormatSchema(zodFormat(format), 1024);
    const text = JSON.stringify(out);
    assert.doesNotMatch(text, /#\/definitions/, 'refs rewritten');
    assert.match(text, /"#\/\$defs\/d0"/);
    await gbnf(out);
  });

  it('zod refusals name the keyword: .datetime() and .email() carry a pattern, .min(0) a minimum', () => {
    const err = refusal(() =>
      responseFormatSchema(zodFormat(zodResponseFormat(z.object({ at: z.string().datetime() }), 'x')), 256),
    );
    assert.equal(err.param, `${P}.properties.at.pattern`);
    const min = refusal(() =>
      responseFormatSchema(zodFormat(zodResponseFormat(z.object({ n: z.number().int().min(0) }), 'x')), 256),
    );
    assert.equal(min.param, `${P}.properties.n.minimum`);
  });

  it('json_schema without a schema: any JSON value, bounded', async () => {
    const out = responseFormatSchema({ type: 'json_schema', json_schema: { name: 'x' } }, 200);
    assert.ok(grammarMaxBytes(await gbnf(out)) <= 200);
  });
});

describe('refs', () => {
  it('$defs, definitions and pointers into the document, each one rule under #/$defs', async () => {
    const schema = {
      type: 'object',
      properties: {
        a: { $ref: '#/definitions/A' },
        b: { $ref: '#/$defs/B' },
        c: { $ref: '#/properties/a' },
        d: { $ref: '#/definitions/A' },
        e: { $ref: '#/$defs/with~1slash' },
      },
      definitions: { A: { type: 'string', maxLength: 3 } },
      $defs: {
        B: { type: 'array', items: { $ref: '#/definitions/A' }, maxItems: 2 },
        'with/slash': { type: 'boolean' },
      },
    };
    const out = responseFormatSchema(fmt(schema), 512);
    const { $defs } = out as unknown as { $defs: Record<string, unknown> };
    const refs = [...JSON.stringify(out).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1] ?? '');
    for (const ref of refs) {
      assert.match(ref, /^#\/\$defs\//);
      assert.ok(ref.slice('#/$defs/'.length) in $defs, `${ref} resolves`);
    }
    await gbnf(out);
  });

  it('recursive refs are refused naming the $ref: to the root, a def to itself, two defs to each other', () => {
    const cases: Array<[object, string]> = [
      [
        { type: 'object', properties: { kids: { type: 'array', items: { $ref: '#' } } } },
        `${P}.properties.kids.items.$ref`,
      ],
      [
        { $ref: '#/$defs/N', $defs: { N: { type: 'object', properties: { next: { $ref: '#/$defs/N' } } } } },
        `${P}.$defs.N.properties.next.$ref`,
      ],
      [
        {
          $ref: '#/$defs/A',
          $defs: {
            A: { anyOf: [{ $ref: '#/$defs/B' }, { type: 'null' }] },
            B: { type: 'array', items: { $ref: '#/$defs/A' } },
          },
        },
        `${P}.$defs.B.items.$ref`,
      ],
    ];
    for (const [schema, param] of cases) {
      const err = refusal(() => responseFormatSchema(fmt(schema), 512));
      assert.equal(err.param, param);
      assert.match(err.message, /is recursive: the llama.cpp engine cannot bound the size of a recursive schema/);
    }
    // zod's recursive schema ($ref "#").
    const Node: z.ZodType = z.object({
      v: z.number(),
      get kids() {
        return z.array(Node);
      },
    });
    assert.match(
      refusal(() => responseFormatSchema(zodFormat(zodResponseFormat(Node, 'n')), 512)).param ?? '',
      /\.\$ref$/,
    );
  });
});

describe('the bound: the longest document the real grammar allows fits max_tokens', () => {
  const schemas: object[] = [
    {},
    { type: 'string' },
    { type: 'string', minLength: 5 },
    { type: 'array' },
    { type: 'array', items: { type: 'array', items: { type: 'string' } } },
    { type: 'object' },
    { type: 'object', additionalProperties: { type: 'array', items: { type: 'number' } } },
    {
      type: 'object',
      properties: { a: { type: 'string' }, b: { type: ['integer', 'null'] }, c: { enum: ['é', '漢字'] } },
    },
    {
      type: 'array',
      prefixItems: [{ const: 'x' }, { type: 'string', format: 'date-time' }],
      items: { type: 'boolean' },
      minItems: 3,
    },
    {
      $ref: '#/$defs/P',
      $defs: {
        P: {
          type: 'object',
          properties: { name: { type: 'string' }, kids: { type: 'array', items: { $ref: '#/$defs/K' } } },
        },
        K: { type: 'string' },
      },
    },
    {
      anyOf: [
        { type: 'string', maxLength: 100 },
        { type: 'array', items: {} },
      ],
    },
  ];
  const budgets = [16, 40, 64, 100, 256, 1000, 4096];

  it('for every schema and budget: fits, or the 400 names the least max_tokens that does', async () => {
    for (const schema of schemas)
      for (const maxTokens of budgets) {
        const label = `${JSON.stringify(schema)} at ${maxTokens}`;
        let out: GbnfJsonSchema;
        try {
          out = responseFormatSchema(fmt(schema), maxTokens);
        } catch (err) {
          assert.ok(err instanceof ValidationError, label);
          assert.equal(err.param, 'max_tokens', label);
          const least = Number(/at least (\d+)/.exec(err.message)?.[1]);
          assert.ok(least > maxTokens, label);
          const fits = grammarMaxBytes(await gbnf(responseFormatSchema(fmt(schema), least)));
          assert.ok(fits <= least, `${label}: the least (${least}) fits (${fits})`);
          continue;
        }
        const worst = grammarMaxBytes(await gbnf(out));
        assert.ok(worst <= maxTokens, `${label}: worst case ${worst}`);
      }
  });

  it('json_object and forced tool calls too', async () => {
    const tools: ToolDef[] = [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          parameters: {
            type: 'object',
            properties: { city: { type: 'string' }, days: { type: 'integer' } },
            required: ['city'],
          },
        },
      },
      { type: 'function', function: { name: 'noop' } },
      { type: 'function', function: { name: 'free', parameters: {} } },
    ];
    for (const maxTokens of [128, 256, 1024, 4096]) {
      assert.ok(grammarMaxBytes(await gbnf(responseFormatSchema({ type: 'json_object' }, maxTokens))) <= maxTokens);
      assert.ok(grammarMaxBytes(await gbnf(toolCallSchema(tools, 'required', maxTokens))) <= maxTokens);
      const named = toolCallSchema(tools, { type: 'function', function: { name: 'get_weather' } }, maxTokens);
      assert.ok(grammarMaxBytes(await gbnf(named)) <= maxTokens);
    }
  });

  it('the cap is the largest that fits: a lone string takes all but one character of slack', async () => {
    for (const maxTokens of [20, 64, 257, 1000]) {
      const worst = grammarMaxBytes(await gbnf(responseFormatSchema(fmt({ type: 'string' }), maxTokens)));
      assert.ok(worst <= maxTokens && worst + 6 > maxTokens, `${maxTokens}: ${worst}`);
    }
  });

  it('json_object nests only once the budget leaves strings of 8 characters and more', () => {
    const small = JSON.stringify(responseFormatSchema({ type: 'json_object' }, 1024));
    assert.doesNotMatch(small, /any1/);
    assert.match(small, /"maxLength":8/);
    assert.match(JSON.stringify(responseFormatSchema({ type: 'json_object' }, 16384)), /any1/);
    // The smallest document, {}, always fits a handful of tokens.
    responseFormatSchema({ type: 'json_object' }, 8);
  });

  it('max_tokens too small for the smallest document: a 400 naming max_tokens', () => {
    const err = refusal(() =>
      responseFormatSchema(fmt({ type: 'object', properties: { a_long_property_name: { type: 'integer' } } }), 10),
    );
    assert.equal(err.param, 'max_tokens');
    // {, space, "a_long_property_name" (22), :, space, an integer (16), space, }, then the 4 newlines of the stop trigger.
    assert.match(err.message, /use max_tokens of at least 48 \(got 10\)/);
    responseFormatSchema(fmt({ type: 'object', properties: { a_long_property_name: { type: 'integer' } } }), 48);
  });
});

describe('schemas built to be expensive (issue #25): bounded work, a 400 naming the field and the rule', () => {
  const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);
  /** $refs two ways to the next def, `depth` deep: 2^depth alternatives as llama.cpp expands them. */
  const dag = (depth: number): object => {
    const defs: Record<string, object> = {};
    for (let i = 0; i < depth; i++)
      defs[`a${i}`] = { anyOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
    defs[`a${depth}`] = { const: 1 };
    return { oneOf: [{ $ref: '#/$defs/a0' }, { const: 2 }], $defs: defs };
  };

  it("the issue's oneOf of two enums of 6,000 values: enum values count as nodes", () => {
    const schema = { oneOf: [{ enum: range(0, 6000) }, { enum: range(6000, 6000) }] };
    const err = refusal(() => responseFormatSchema(fmt(schema), 256));
    assert.equal(err.param, `${P}.oneOf[0].enum`);
    assert.match(err.message, /the schema is too large: more than 5000 nodes \(schemas, and enum and const values/);
    // The same at 1 MiB: refused at once, one problem.
    const big = { oneOf: [{ enum: range(0, 80_000) }, { enum: range(80_000, 80_000) }] };
    assert.equal(refusal(() => responseFormatSchema(fmt(big), 256)).details.length, 1);
  });

  it('oneOf tells enums apart by value (not pair by pair), and finds the branches that share one', () => {
    responseFormatSchema(fmt({ oneOf: [{ enum: range(0, 999) }, { enum: range(1000, 999) }] }), 64);
    const err = refusal(() =>
      responseFormatSchema(fmt({ oneOf: [{ enum: range(0, 999) }, { const: 'x' }, { enum: range(998, 999) }] }), 64),
    );
    assert.equal(err.param, `${P}.oneOf`);
    assert.match(err.message, /branches 0 and 2 may both match one document/);
    // 1 and 1.0 are one value to JSON Schema; "1" is another.
    refusal(() => responseFormatSchema(fmt({ oneOf: [{ const: 1 }, { const: 1.0 }] }), 64));
    responseFormatSchema(fmt({ oneOf: [{ const: 1 }, { const: '1' }] }), 64);
  });

  it('a oneOf of objects with too many pairs to compare', () => {
    const tagged = (t: number) => ({ type: 'object', properties: { t: { const: t } }, required: ['t'] });
    responseFormatSchema(fmt({ oneOf: range(0, 100).map(tagged) }), 128);
    const err = refusal(() => responseFormatSchema(fmt({ oneOf: range(0, 400).map(tagged) }), 128));
    assert.equal(err.param, `${P}.oneOf`);
    assert.match(err.message, /its branches are too many to check that no two match one document.*use anyOf/);
  });

  it('alternatives at one point: a long enum, and $refs that double them at each level (2^24)', () => {
    responseFormatSchema(fmt({ enum: range(0, 2000) }), 64);
    for (const schema of [{ enum: range(0, 2001) }, dag(24)]) {
      const err = refusal(() => responseFormatSchema(fmt(schema), 64));
      assert.equal(err.param, P);
      assert.match(err.message, /too many alternatives at one point of a document \(more than 2000/);
    }
  });

  it('the text the grammar writes out: enum strings and property names, 120,000 characters', () => {
    const long = (n: number) => range(0, n).map((i) => `${i}`.padEnd(200, 'x'));
    responseFormatSchema(fmt({ enum: long(500) }), 256);
    const err = refusal(() => responseFormatSchema(fmt({ enum: long(1000) }), 256));
    assert.equal(err.param, `${P}.enum`);
    assert.match(err.message, /more than 120000 characters of enum and const strings and property names/);
    const names = Object.fromEntries(long(1000).map((k) => [k, { type: 'null' }]));
    assert.equal(
      refusal(() => responseFormatSchema(fmt({ type: 'object', properties: names }), 256)).param,
      `${P}.properties`,
    );
  });

  it('required names count as properties, found in a set (100,000 took minutes compared in lists)', () => {
    const schema = { type: 'object', required: range(0, 100_000).map((i) => `k${i}`) };
    const err = refusal(() => responseFormatSchema(fmt(schema), 256));
    assert.equal(err.param, `${P}.required`);
    assert.match(err.message, /the schema is too large/);
  });

  it('values nested deeply inside const and enum, and chains of $refs, stop at 64 levels', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 2000; i++) deep = [deep];
    const cases: Array<[object, string]> = [
      [{ const: deep }, `${P}.const`],
      [{ enum: ['a', deep] }, `${P}.enum`],
      [{ const: deep, enum: [deep] }, `${P}.const`],
    ];
    for (const [schema, param] of cases) {
      const err = refusal(() => responseFormatSchema(fmt(schema), 256));
      assert.equal(err.param, param);
      assert.match(err.message, /nested too deeply|no value fits/);
    }
    const defs: Record<string, object> = {};
    for (let i = 0; i < 100; i++) defs[`a${i}`] = { type: 'array', maxItems: 1, items: { $ref: `#/$defs/a${i + 1}` } };
    defs.a100 = { type: 'null' };
    const err = refusal(() => responseFormatSchema(fmt({ $ref: '#/$defs/a0', $defs: defs }), 256));
    assert.match(err.message, /nested too deeply \(more than 64 levels, \$refs included\)/);
  });

  it("one budget for all of a request's tools, forced or not", () => {
    const tools: ToolDef[] = range(0, 128).map((i) => ({
      type: 'function',
      function: { name: `f${i}`, parameters: { type: 'object', properties: { v: { enum: range(0, 50) } } } },
    }));
    for (const fn of [() => toolCallSchema(tools, 'required', 4096), () => toolCallSchemas(tools, [4096])]) {
      const err = refusal(fn);
      assert.match(err.param ?? '', /^tools\[\d+\]\.function\.parameters/);
      assert.match(err.message, /of all the request's schemas together/);
    }
    // Few enough: every tool's call bounded on its own.
    assert.equal(toolCallSchemas(tools.slice(0, 10), [4096]).length, 10);
  });

  it('at most 50 problems, however many keywords', () => {
    const schema = Object.fromEntries(range(0, 10_000).map((i) => [`x-${i}`, 1]));
    assert.equal(refusal(() => responseFormatSchema(fmt(schema), 64)).details.length, 50);
  });
});

describe('forced tool calls', () => {
  const tools: ToolDef[] = [
    {
      type: 'function',
      function: { name: 'a', parameters: { type: 'object', properties: { x: { type: 'integer' } } } },
    },
    { type: 'function', function: { name: 'b' } },
  ];
  it('a named function: {"name": const, "arguments": its parameters}', () => {
    const out = JSON.stringify(toolCallSchema(tools, { type: 'function', function: { name: 'b' } }, 128));
    assert.match(out, /"name":\{"const":"b"\}/);
    assert.doesNotMatch(out, /"const":"a"/);
    assert.match(out, /"arguments":\{"type":"object","properties":\{\},"additionalProperties":false\}/);
  });
  it('required: any one of the tools', () => {
    const out = JSON.stringify(toolCallSchema(tools, 'required', 128));
    assert.match(out, /"oneOf"/);
    assert.match(out, /"const":"a"/);
    assert.match(out, /"const":"b"/);
  });
  it('a name not in tools, a duplicated name, parameters that are not an object', () => {
    assert.equal(
      refusal(() => toolCallSchema(tools, { type: 'function', function: { name: 'zz' } }, 128)).param,
      'tool_choice',
    );
    assert.equal(
      refusal(() => toolCallSchema([tools[1]!, tools[1]!], 'required', 128)).param,
      'tools[1].function.name',
    );
    const str: ToolDef = { type: 'function', function: { name: 's', parameters: { type: 'string' } } };
    assert.equal(refusal(() => toolCallSchema([str], 'required', 128)).param, 'tools[0].function.parameters.type');
  });
});

describe("patches to node-llama-cpp's rules", () => {
  it('integers without exponents, bounded exponents, surrogate-free escapes, dates that exist, bounded keys', async () => {
    const schema = responseFormatSchema(
      fmt({
        type: 'object',
        properties: {
          i: { type: 'integer' },
          n: { type: 'number' },
          d: { type: 'string', format: 'date' },
          m: { type: 'object', additionalProperties: { type: 'boolean' } },
        },
      }),
      1024,
    );
    const text = await gbnf(schema);
    assert.match(text, /^integer-number-rule ::= "-"\? \("0" \| \[1-9\] \[0-9\]\{0,14\}\)$/m);
    assert.match(text, /^fractional-number-rule ::= .*\(\[eE\] \[-\+\]\? \[0-9\]\{1,2\}\)\?$/m);
    assert.match(text, /\[dD\] \[0-7\]/);
    assert.match(text, /"02-" \("0" \[1-9\] \| "1" \[0-9\] \| "2" \[0-8\]\)/);
    // Keys of open objects: as long as the schema's own `key` def says (JSON-equal schemas, one grammar).
    const keyLength = (schema as unknown as { $defs: { key: { maxLength: number } } }).$defs.key.maxLength;
    assert.ok(keyLength > 0);
    assert.match(
      text,
      new RegExp(`^string-rule ::= "\\\\"" \\( string-char-rule \\)\\{0,${keyLength}\\} "\\\\""$`, 'm'),
    );
    assert.doesNotMatch(text, /string-char-rule\*/);
  });
  it('a rule that is not the one patched (another node-llama-cpp) fails loudly', () => {
    const schema = responseFormatSchema({ type: 'json_object' }, 256);
    assert.throws(
      () => patchGrammar('root ::= x\ninteger-number-rule ::= [0-9]+', schema),
      /integer-number-rule is not the one patched/,
    );
  });
});
