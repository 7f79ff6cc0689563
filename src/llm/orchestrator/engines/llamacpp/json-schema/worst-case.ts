// What a grammar costs: the longest document it allows (in tokens, against max_tokens) and the
// parses one prefix of a document can have (against MAX_ALTERNATIVES).
//
// One cap value, `size`, bounds every size left open: string lengths (and keys of open objects),
// the number of array items after the prefix and of generated keys. A larger size never shortens
// the worst case, so the largest that fits is found by bisection. One value rather than one per
// size because the worst case is a product along each path (items x string length x ...):
// weighing sizes against each other would be a policy per schema, while one value is predictable
// and treats every open size alike. Sizes the caller bounded keep the smaller bound.

import { type Doc, problem } from './doc.ts';
import { ANY_DEPTH, type DateFormat, type Def, MAX_ALTERNATIVES, type Shape } from './shape.ts';

/** The worst-case length, in UTF-8 bytes, of pieces of node-llama-cpp's grammar (patched). */
const BYTES = {
  /** `\uXXXX`; a character written as itself is at most 4 bytes. */
  stringChar: 6,
  /** `"-"? ("0" | [1-9] [0-9]{0,14})` */
  integer: 16,
  /** `"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?` */
  number: 38,
  boolean: 5,
  null: 4,
  /** Every whitespace rule outside newline scopes is `[ ]?` (the root is a $ref: see toGbnfSchema). */
  space: 1,
  /** The grammar's end: `"\n\n\n\n"`, the stop trigger. */
  trailer: 4,
  format: { date: 12, time: 20, 'date-time': 31 } satisfies Record<DateFormat, number>,
};

export const stringMax = (s: { min: number; max: number | undefined }, cap: number): number =>
  Math.max(s.min, Math.min(s.max ?? Number.POSITIVE_INFINITY, cap));

/** Items after the prefix. */
export const restMax = (a: Extract<Shape, { kind: 'array' }>, cap: number): number =>
  a.items === undefined
    ? 0
    : Math.max(a.min - a.prefix.length, Math.min((a.max ?? Number.POSITIVE_INFINITY) - a.prefix.length, cap));

export const extraMax = (o: Extract<Shape, { kind: 'object' }>, cap: number): number =>
  o.extra === undefined ? 0 : Math.max(o.min, Math.min(o.max ?? Number.POSITIVE_INFINITY, cap));

/** The bounds of one grammar: `size` for every open size, `anyDepth` levels of containers in `any`. */
export interface Caps {
  size: number;
  anyDepth: number;
}

/** The `fixed` items, then `n` more of `each` bytes, and the `", "` between them. */
const listBytes = (fixed: number[], n = 0, each = 0): number =>
  fixed.reduce((s, x) => s + x, 0) + n * each + Math.max(0, fixed.length + n - 1) * (1 + BYTES.space);

/** `{` or `[`, space, the items, space, `}` or `]`. */
const containerBytes = (inner: number): number => 2 + 2 * BYTES.space + inner;

const utf8 = (s: string): number => Buffer.byteLength(s);

/** `"key": ` */
const keyBytes = (key: string): number => utf8(JSON.stringify(key)) + 1 + BYTES.space;

const stringBytes = (maxChars: number): number => 2 + maxChars * BYTES.stringChar;

/**
 * The most bytes (so tokens: every token the grammar accepts has at least one byte) of any
 * document the grammar of `shape` with `cap` allows, after node-llama-cpp's rules (utils/gbnfJson:
 * GbnfObjectMap, GbnfArray, GbnfString, patched numbers) with newline-free whitespace.
 */
function worstBytes(shape: Shape, caps: Caps, memo: Map<Def, number>): number {
  const cap = caps.size;
  switch (shape.kind) {
    case 'literal':
      return utf8(JSON.stringify(shape.value));
    case 'union':
      return Math.max(...shape.of.map((s) => worstBytes(s, caps, memo)));
    case 'string':
      return stringBytes(stringMax(shape, cap));
    case 'format':
      return BYTES.format[shape.format];
    case 'number':
      return shape.integer ? BYTES.integer : BYTES.number;
    case 'boolean':
      return BYTES.boolean;
    case 'null':
      return BYTES.null;
    case 'object': {
      const props = shape.props.map(([k, v]) => keyBytes(k) + worstBytes(v, caps, memo));
      const n = extraMax(shape, cap);
      const extra = shape.extra && n > 0 ? stringBytes(cap) + 1 + BYTES.space + worstBytes(shape.extra, caps, memo) : 0;
      return containerBytes(listBytes(props, n, extra));
    }
    case 'array': {
      const prefix = shape.prefix.map((s) => worstBytes(s, caps, memo));
      const n = restMax(shape, cap);
      const item = shape.items && n > 0 ? worstBytes(shape.items, caps, memo) : 0;
      return containerBytes(listBytes(prefix, n, item));
    }
    case 'ref': {
      const known = memo.get(shape.def);
      if (known !== undefined) return known;
      const bytes = shape.def.shape ? worstBytes(shape.def.shape, caps, memo) : 0;
      memo.set(shape.def, bytes);
      return bytes;
    }
    case 'any':
      return anyBytes(caps.anyDepth, cap);
  }
}

/** The worst case of `any` with `depth` levels of containers: a scalar, or a container of depth - 1. */
function anyBytes(depth: number, cap: number): number {
  const scalar = Math.max(stringBytes(cap), BYTES.number, BYTES.boolean, BYTES.null);
  if (depth === 0) return scalar;
  const inner = anyBytes(depth - 1, cap);
  const array = containerBytes(listBytes([], cap, inner));
  const object = containerBytes(listBytes([], cap, stringBytes(cap) + 1 + BYTES.space + inner));
  return Math.max(scalar, array, object);
}

export const worstTokens = (shape: Shape, caps: Caps): number => worstBytes(shape, caps, new Map()) + BYTES.trailer;

/**
 * A problem when a prefix of a document may have more than MAX_ALTERNATIVES parses (see
 * shape.ts). Counted with multiplicity, as llama.cpp expands them: a union adds its members' counts, a container has those of the one member being written, a $ref its def's
 * (once per def, so a chain of defs that each refer twice to the next costs its length here).
 */
export function checkAlternatives(doc: Doc, root: Shape): void {
  if (doc.problems.length > 0) return;
  if (alternatives(root, new Map()) > MAX_ALTERNATIVES)
    problem(
      doc,
      [],
      `the schema allows too many alternatives at one point of a document (more than ${MAX_ALTERNATIVES}, counting every enum value and anyOf/oneOf branch as the grammar expands them through $refs)`,
    );
}

function alternatives(shape: Shape, memo: Map<Def, number>): number {
  switch (shape.kind) {
    case 'union':
      return shape.of.reduce((n, s) => n + alternatives(s, memo), 0);
    case 'object':
      return Math.max(1, ...shape.props.map(([, v]) => alternatives(v, memo)), ...optional(shape.extra, memo));
    case 'array':
      return Math.max(1, ...shape.prefix.map((s) => alternatives(s, memo)), ...optional(shape.items, memo));
    case 'ref': {
      const known = memo.get(shape.def);
      if (known !== undefined) return known;
      const n = shape.def.shape ? alternatives(shape.def.shape, memo) : 1;
      memo.set(shape.def, n);
      return n;
    }
    case 'any':
      return anyAlternatives(ANY_DEPTH);
    default:
      return 1;
  }
}

const optional = (s: Shape | undefined, memo: Map<Def, number>): number[] => (s ? [alternatives(s, memo)] : []);

/** `any` (see anyDef): four scalars, and an array and an object of `any` a level down. */
const anyAlternatives = (depth: number): number => (depth === 0 ? 4 : 4 + 2 * anyAlternatives(depth - 1));
