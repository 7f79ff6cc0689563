// The GbnfJsonSchema for node-llama-cpp: a Shape with every open size bounded by the largest cap
// whose worst case fits max_tokens.

import type { GbnfJsonSchema } from 'node-llama-cpp';
import { ValidationError } from '../../../../../lib/errors.ts';
import { ANY_DEPTH, MIN_NESTED_SIZE, type Shape } from './shape.ts';
import { type Caps, extraMax, restMax, stringMax, worstTokens } from './worst-case.ts';

type GbnfNode = Record<string, unknown>;

/** node-llama-cpp's schema of `shape` with `cap`: every size bounded, refs to `#/$defs/<name>`. */
function gbnfOf(shape: Shape, caps: Caps, defs: Map<string, Shape>): GbnfNode {
  const cap = caps.size;
  switch (shape.kind) {
    case 'literal':
      return { const: shape.value };
    case 'union':
      return { oneOf: shape.of.map((s) => gbnfOf(s, caps, defs)) };
    case 'string':
      return { type: 'string', minLength: shape.min, maxLength: stringMax(shape, cap) };
    case 'format':
      return { type: 'string', format: shape.format };
    case 'number':
      return { type: shape.integer ? 'integer' : 'number' };
    case 'boolean':
    case 'null':
      return { type: shape.kind };
    case 'object':
      return gbnfObject(shape, caps, defs);
    case 'array':
      return gbnfArray(shape, caps, defs);
    case 'ref':
      if (shape.def.shape) defs.set(shape.def.name, shape.def.shape);
      return { $ref: `#/$defs/${shape.def.name}` };
    case 'any':
      return { $ref: `#/$defs/${anyDef(caps.anyDepth, cap, defs)}` };
  }
}

function gbnfObject(o: Extract<Shape, { kind: 'object' }>, caps: Caps, defs: Map<string, Shape>): GbnfNode {
  const properties = Object.fromEntries(o.props.map(([k, v]) => [k, gbnfOf(v, caps, defs)]));
  const n = extraMax(o, caps.size);
  if (!o.extra || n === 0) return { type: 'object', properties, additionalProperties: false };
  return {
    type: 'object',
    properties,
    additionalProperties: gbnfOf(o.extra, caps, defs),
    minProperties: o.min,
    maxProperties: n,
  };
}

function gbnfArray(a: Extract<Shape, { kind: 'array' }>, caps: Caps, defs: Map<string, Shape>): GbnfNode {
  const n = restMax(a, caps.size);
  return {
    type: 'array',
    ...(a.prefix.length > 0 ? { prefixItems: a.prefix.map((s) => gbnfOf(s, caps, defs)) } : {}),
    // With no item after the prefix, null stands in (never written) so node-llama-cpp adds no any-JSON rule.
    items: a.items && n > 0 ? gbnfOf(a.items, caps, defs) : { type: 'null' },
    minItems: Math.max(a.min, a.prefix.length),
    maxItems: a.prefix.length + n,
  };
}

/** The def of `any` at `depth` (and those below it): `any<depth>`. */
function anyDef(depth: number, cap: number, defs: Map<string, Shape>): string {
  const name = `any${depth}`;
  if (defs.has(name)) return name;
  const scalars: Shape[] = [
    { kind: 'string', min: 0, max: cap },
    { kind: 'number', integer: false },
    { kind: 'boolean' },
    { kind: 'null' },
  ];
  if (depth === 0) {
    defs.set(name, { kind: 'union', of: scalars });
    return name;
  }
  const inner: Shape = { kind: 'ref', def: { name: anyDef(depth - 1, cap, defs), shape: undefined } };
  defs.set(name, {
    kind: 'union',
    of: [
      ...scalars,
      { kind: 'array', prefix: [], items: inner, min: 0, max: cap },
      { kind: 'object', props: [], extra: inner, min: 0, max: cap },
    ],
  });
  return name;
}

/**
 * The keys of open objects, as a def nothing refers to (node-llama-cpp writes no rule for it):
 * GbnfJsonSchema has no place for a key's length, and patchGrammar reads it from here. So the
 * schema says all its grammar depends on, and two schemas equal as JSON have one grammar.
 */
export const KEY_DEF = 'key';

/**
 * The root is a $ref to its own def: node-llama-cpp writes a def's rules without newlines, so every
 * whitespace is at most one space, where its root scope allows a newline and four spaces a level
 * (a random model spends tokens on both, and the worst case counts them).
 */
function toGbnfSchema(root: Shape, caps: Caps): GbnfJsonSchema {
  const defs = new Map<string, Shape>([['root', root]]);
  const out: Record<string, GbnfNode> = {};
  // gbnfOf adds the defs it reaches while the loop runs; a Map iterates over those too.
  for (const [name, shape] of defs) out[name] = gbnfOf(shape, caps, defs);
  out[KEY_DEF] = { type: 'string', maxLength: caps.size };
  return { $ref: '#/$defs/root', $defs: out } as GbnfJsonSchema;
}

/**
 * The caps of the grammar for `root`: the largest size whose worst case fits maxTokens, and a 400
 * naming max_tokens when even 0 does not. `any` nests as deep as leaves a size of at least
 * MIN_NESTED_SIZE: each level multiplies the worst case by the size, and two levels on a small
 * budget would leave one-character strings (json_object at max_tokens 1024: 8 flat rather than 2
 * nested twice).
 */
export function bounded(root: Shape, maxTokens: number): GbnfJsonSchema {
  const least = worstTokens(root, { size: 0, anyDepth: 0 });
  if (least > maxTokens)
    throw new ValidationError(
      `max_tokens: the longest document the smallest grammar for this schema allows takes ${least} tokens on the llama.cpp engine, which must fit; use max_tokens of at least ${least} (got ${maxTokens})`,
      { param: 'max_tokens' },
    );
  for (let anyDepth = ANY_DEPTH; anyDepth > 0; anyDepth--) {
    const size = largestSize(root, maxTokens, anyDepth);
    if (size >= MIN_NESTED_SIZE) return toGbnfSchema(root, { size, anyDepth });
  }
  return toGbnfSchema(root, { size: largestSize(root, maxTokens, 0), anyDepth: 0 });
}

/** Bisection: a larger size never shortens the worst case. */
function largestSize(root: Shape, maxTokens: number, anyDepth: number): number {
  let lo = 0;
  let hi = maxTokens; // every open size costs at least a token an item, so no larger size can fit
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (worstTokens(root, { size: mid, anyDepth }) <= maxTokens) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
