// Structured output on the llama.cpp engine (issue #17): the caller's JSON Schema (response_format
// json_schema, json_object, or a forced tool call) as the schema of node-llama-cpp's JSON grammar,
// such that the output ALWAYS parses and matches, even from a random-weights model.
//
// Four hazards shape this module:
// 1. node-llama-cpp's grammar enforces only some keywords and silently drops the rest. A keyword
//    it cannot enforce is a 400 naming its path here, never an unconstrained answer.
// 2. A random model never closes a string on its own (a closing quote is one of thousands of
//    allowed tokens), so an unbounded string, array or object runs into max_tokens and is cut off
//    mid-document. Every unbounded size gets a cap computed from max_tokens such that the LONGEST
//    document the grammar allows fits (worstTokens below); when even the smallest cannot, a 400
//    names max_tokens with the least that would do.
// 3. Some of node-llama-cpp's rules allow text that does not match the schema: integers with an
//    exponent (1e-5), exponents that overflow to Infinity, dates such as 02-31, surrogate pairs
//    written as two escapes (one character to JSON Schema's minLength), and unbounded keys in open
//    objects. createJsonGrammar replaces those rules in the generated GBNF (patchGrammar).
// 4. llama.cpp's grammar decodes UTF-8 leniently, so bytes that are not text pass as characters
//    (see tokensOutsideUtf8): the engine bans those tokens while a grammar is on.

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { GbnfJsonSchema, Llama, LlamaGrammar, LlamaModel, Token } from 'node-llama-cpp';
import { InternalError, ValidationError } from '../../../lib/errors.ts';
import type { ResponseFormat, ToolChoice, ToolDef } from '../../protocol.ts';

type Scalar = string | number | boolean | null;
type JsonType = 'string' | 'number' | 'integer' | 'boolean' | 'null' | 'object' | 'array';
type DateFormat = 'date' | 'time' | 'date-time';

/**
 * The documents a schema allows, in the terms of the grammar: what is generated and how long it
 * can get. Sizes left undefined are unbounded until a cap is chosen (bounded).
 */
type Shape =
  | { kind: 'literal'; value: Scalar }
  | { kind: 'union'; of: Shape[] }
  | { kind: 'string'; min: number; max: number | undefined }
  | { kind: 'format'; format: DateFormat }
  | { kind: 'number'; integer: boolean }
  | { kind: 'boolean' }
  | { kind: 'null' }
  /** Every listed property, always (node-llama-cpp writes them all); `extra`: more keys, only when there are none. */
  | { kind: 'object'; props: Array<[string, Shape]>; extra: Shape | undefined; min: number; max: number | undefined }
  /** `items` after the `prefix` ones, when more may follow. */
  | { kind: 'array'; prefix: Shape[]; items: Shape | undefined; min: number; max: number | undefined }
  | { kind: 'ref'; def: Def }
  /** Any JSON value (`{}`, `true`, json_object's values), of bounded depth and size. */
  | { kind: 'any' };

/** A schema reached through `$ref`: one grammar rule, whatever refers to it. */
interface Def {
  name: string;
  shape: Shape | undefined;
}

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
/** The length range of each format's text (JSON Schema's minLength/maxLength count characters). */
const FORMAT_LENGTH: Record<DateFormat, [number, number]> = { date: [10, 10], time: [9, 18], 'date-time': [20, 29] };
/** Integers the grammar can write: 15 digits, so JavaScript's safe-integer bounds (zod's `int()`) are implied. */
const INTEGER_LIMIT = 999_999_999_999_999;
/** Numbers the grammar can write: 16 digits, 16 decimals, an exponent of at most 99. */
const NUMBER_LIMIT = 1e116;
/** Containers inside json_object's values and `{}` schemas: 2 levels at most, each only from a size of 8 (bounded). */
const ANY_DEPTH = 2;
const MIN_NESTED_SIZE = 8;
/**
 * Guards against schemas built to be expensive (issue #25: one request's schema held the event loop
 * that serves everyone for seconds). Every step from the caller's schema to llama.cpp's grammar
 * is linear in these, so the work of a request is bounded whatever its body's size:
 * - MAX_NODES: schemas, enum and const values (and the items and properties inside them) of all
 *   the request's schemas together (OpenAI allows 1,000 enum values in a whole schema);
 * - MAX_TEXT: characters of the strings the grammar writes out (enum and const strings,
 *   property names), as OpenAI's 120,000: llama.cpp parses the grammar's text on the event loop
 *   (three times: 60-90 ms each for 1 MB), so the text rather than the body limit bounds that;
 * - MAX_DEPTH: nesting, of schemas through $refs and of the values inside const and enum;
 * - MAX_ALTERNATIVES: the parses one prefix of a document can have (see alternatives()): llama.cpp
 *   keeps a stack for each and compares every new stack with all the others, on the event loop,
 *   when it parses the grammar (twice), when each choice starts and for every token: a union of
 *   5,000 literals cost ~55 ms each time, 2,000 a sixth of that (twice OpenAI's enum values),
 *   while $refs two ways to the same def, 30 deep, would be 2^30;
 * - MAX_COMPARISONS: the pairs of union members oneOf compares (literals are compared by value
 *   in a hash map, so this counts only what may overlap: objects, other open types): 50,000
 *   took ~30 ms, a tagged union of 300 branches.
 */
const MAX_NODES = 5000;
const MAX_TEXT = 120_000;
const MAX_DEPTH = 64;
const MAX_ALTERNATIVES = 2000;
const MAX_COMPARISONS = 50_000;
/** Problems reported per request: each one names a path, and a schema of 100,000 bad keywords would make a huge 400. */
const MAX_PROBLEMS = 50;

const ANNOTATIONS = new Set([
  'title',
  'description',
  '$schema',
  '$id',
  '$anchor',
  '$comment',
  'default',
  'examples',
  'deprecated',
  'readOnly',
  'writeOnly',
  'contentMediaType',
  'contentEncoding',
  // Containers, not constraints: what they hold counts only where a $ref reaches it.
  '$defs',
  'definitions',
]);
const OBJECT_KEYWORDS = ['properties', 'required', 'additionalProperties', 'minProperties', 'maxProperties'];
const ARRAY_KEYWORDS = ['items', 'prefixItems', 'minItems', 'maxItems'];
const STRING_KEYWORDS = ['minLength', 'maxLength', 'format'];
const NUMBER_KEYWORDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'];
const SUPPORTED = new Set([
  'type',
  'const',
  'enum',
  'anyOf',
  'oneOf',
  '$ref',
  ...OBJECT_KEYWORDS,
  ...ARRAY_KEYWORDS,
  ...STRING_KEYWORDS,
  ...NUMBER_KEYWORDS, // only where the grammar's range already implies them (checkNumberBounds)
]);
/** Formats of numbers (ajv-formats); any other format is a string's and does not apply to numbers. */
const NUMBER_FORMATS = new Set<unknown>(['int32', 'int64', 'float', 'double']);
const JSON_TYPES = new Set<string>(['string', 'number', 'integer', 'boolean', 'null', 'object', 'array']);

type Path = ReadonlyArray<string | number>;

/** The conversion of one document (a response_format schema, one tool's parameters). */
interface Doc {
  root: unknown;
  /** The request field the document sits at: `response_format.json_schema.schema`. */
  param: string;
  /** Def names are `${prefix}${n}`, unique across the documents of one request. */
  prefix: string;
  defs: Map<object, Def>;
  /** Refs being converted: reaching one again is a recursive schema. */
  converting: Set<object>;
  problems: Array<{ param: string; message: string }>;
  /** Shared by the documents of one request (MAX_NODES, MAX_TEXT and MAX_COMPARISONS are per request). */
  budget: Budget;
  /** Schemas being converted, nested (through $refs too, where the path starts again). */
  depth: number;
}

interface Budget {
  nodes: number;
  text: number;
  comparisons: number;
  /** Set once a limit is passed: the conversion then stops adding work and problems. */
  exceeded: boolean;
}

const newBudget = (): Budget => ({ nodes: 0, text: 0, comparisons: 0, exceeded: false });

/** `response_format.json_schema.schema` + [properties, age, minimum] as OpenAI writes params. */
function paramOf(doc: Doc, path: Path): string {
  return path.reduce<string>((p, seg) => (typeof seg === 'number' ? `${p}[${seg}]` : `${p}.${seg}`), doc.param);
}

/** Records a problem; the placeholder shape lets the conversion go on and report every one. */
function problem(doc: Doc, path: Path, rule: string): Shape {
  const param = paramOf(doc, path);
  if (doc.problems.length < MAX_PROBLEMS) doc.problems.push({ param, message: `${param}: ${rule}` });
  return { kind: 'null' };
}

/** Counts `n` nodes against MAX_NODES; past it, one problem at `path` and false from then on. */
function spend(doc: Doc, n: number, path: Path): boolean {
  const b = doc.budget;
  if (b.exceeded) return false;
  b.nodes += n;
  if (b.nodes <= MAX_NODES) return true;
  return exceeded(
    doc,
    path,
    `more than ${MAX_NODES} nodes (schemas, and enum and const values with what they hold, of all the request's schemas together)`,
  );
}

/** Counts the characters of a string the grammar writes out against MAX_TEXT, as spend. */
function spendText(doc: Doc, text: string, path: Path): boolean {
  const b = doc.budget;
  if (b.exceeded) return false;
  b.text += text.length;
  if (b.text <= MAX_TEXT) return true;
  return exceeded(
    doc,
    path,
    `more than ${MAX_TEXT} characters of enum and const strings and property names (of all the request's schemas together)`,
  );
}

function exceeded(doc: Doc, path: Path, what: string): false {
  doc.budget.exceeded = true;
  problem(doc, path, `the schema is too large: ${what}`);
  return false;
}

const cannotEnforce = (doc: Doc, path: Path): Shape =>
  problem(doc, path, `${String(path.at(-1))} is not supported: the llama.cpp engine cannot enforce it`);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function newDoc(root: unknown, o: { param: string; prefix: string; budget: Budget }): Doc {
  return { root, ...o, defs: new Map(), converting: new Set(), problems: [], depth: 0 };
}

function throwProblems(docs: Doc[]): void {
  const all = docs.flatMap((d) => d.problems).slice(0, MAX_PROBLEMS);
  const first = all[0];
  if (first)
    throw new ValidationError(
      all.map((p) => p.message),
      { param: first.param },
    );
}

// ---------------------------------------------------------------------------------------------
// The caller's schema as a Shape, refusing what the grammar cannot enforce.

function shapeOf(doc: Doc, schema: unknown, path: Path): Shape {
  if (!spend(doc, 1, path)) return { kind: 'null' };
  if (path.length > MAX_DEPTH || doc.depth >= MAX_DEPTH)
    return problem(doc, path, `the schema is nested too deeply (more than ${MAX_DEPTH} levels, $refs included)`);
  doc.depth++;
  try {
    return nodeShape(doc, schema, path);
  } finally {
    doc.depth--;
  }
}

function nodeShape(doc: Doc, schema: unknown, path: Path): Shape {
  if (schema === true) return { kind: 'any' };
  if (schema === false) return problem(doc, path, 'the schema false allows no value');
  if (!isObject(schema)) return problem(doc, path, 'must be a JSON Schema (an object or a boolean)');
  let unsupported = false;
  for (const key of Object.keys(schema))
    if (!SUPPORTED.has(key) && !ANNOTATIONS.has(key)) {
      cannotEnforce(doc, [...path, key]);
      unsupported = true;
    }
  if (unsupported) return { kind: 'null' };
  if (schema.$ref !== undefined) return refShape(doc, schema, path);
  if (schema.anyOf !== undefined || schema.oneOf !== undefined) return unionShape(doc, schema, path);
  if (schema.const !== undefined || schema.enum !== undefined) return literalsShape(doc, schema, path);
  return typedShape(doc, schema, path);
}

/** Keywords beside `keyword` other than annotations and `allowed`: refused, as their meaning would change. */
function onlyBeside(
  doc: Doc,
  schema: Record<string, unknown>,
  path: Path,
  keyword: string,
  allowed: string[],
): boolean {
  const extra = Object.keys(schema).filter((k) => k !== keyword && !ANNOTATIONS.has(k) && !allowed.includes(k));
  for (const k of extra)
    problem(
      doc,
      [...path, k],
      `cannot be combined with ${keyword} on the llama.cpp engine (it enforces ${keyword} alone)`,
    );
  return extra.length === 0;
}

/** A local reference (`#/$defs/X`, `#/definitions/X`, any JSON pointer in the document). */
function refShape(doc: Doc, schema: Record<string, unknown>, path: Path): Shape {
  const at = [...path, '$ref'];
  if (!onlyBeside(doc, schema, path, '$ref', [])) return { kind: 'null' };
  const ref = schema.$ref;
  if (typeof ref !== 'string' || !ref.startsWith('#'))
    return problem(doc, at, 'only references within the schema (starting with #) are supported');
  const target = resolvePointer(doc.root, ref.slice(1));
  if (target === undefined) return problem(doc, at, `${ref} does not resolve to a schema in the document`);
  if (!isObject(target)) return shapeOf(doc, target, at);
  if (doc.converting.has(target))
    return problem(doc, at, `${ref} is recursive: the llama.cpp engine cannot bound the size of a recursive schema`);
  let def = doc.defs.get(target);
  if (!def) {
    def = { name: `${doc.prefix}${doc.defs.size}`, shape: undefined };
    doc.defs.set(target, def);
    doc.converting.add(target);
    def.shape = shapeOf(doc, target, pointerPath(ref.slice(1)));
    doc.converting.delete(target);
  }
  return { kind: 'ref', def };
}

/** RFC 6901 pointer segments of a URI fragment (`/$defs/a~1b` is ['$defs', 'a/b']). */
function pointerPath(pointer: string): string[] {
  if (pointer === '') return [];
  return decodeURIComponent(pointer)
    .slice(1)
    .split('/')
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
}

function resolvePointer(root: unknown, pointer: string): unknown {
  if (pointer !== '' && !pointer.startsWith('/')) return undefined; // `#anchor`: not supported
  let segments: string[];
  try {
    segments = pointerPath(pointer);
  } catch {
    return undefined; // a malformed %-escape
  }
  let node = root;
  for (const seg of segments) {
    if (Array.isArray(node)) node = node[Number(seg)];
    else if (isObject(node) && Object.hasOwn(node, seg)) node = node[seg];
    else return undefined;
  }
  return node;
}

/** anyOf, and oneOf where no document can match two branches (the grammar picks one branch, never checks the others). */
function unionShape(doc: Doc, schema: Record<string, unknown>, path: Path): Shape {
  const keyword = schema.anyOf !== undefined ? 'anyOf' : 'oneOf';
  if (!onlyBeside(doc, schema, path, keyword, [])) return { kind: 'null' };
  const branches = schema[keyword];
  if (!Array.isArray(branches) || branches.length === 0)
    return problem(doc, [...path, keyword], 'must be a non-empty array of schemas');
  const of = branches.map((b, i) => shapeOf(doc, b, [...path, keyword, i]));
  if (keyword === 'oneOf' && !doc.budget.exceeded) {
    const overlap = overlapping(doc, of);
    if (overlap === 'too many')
      return problem(
        doc,
        [...path, keyword],
        `its branches are too many to check that no two match one document (more than ${MAX_COMPARISONS} comparisons); use anyOf if any match will do`,
      );
    if (overlap)
      return problem(
        doc,
        [...path, keyword],
        `branches ${overlap[0]} and ${overlap[1]} may both match one document, and the llama.cpp engine cannot enforce that exactly one matches (use anyOf if any match will do)`,
      );
  }
  return oneOrUnion(of);
}

const oneOrUnion = (of: Shape[]): Shape => (of.length === 1 && of[0] ? of[0] : { kind: 'union', of });

/** What a shape generates, with unions and refs looked through, each reached shape once. */
function leavesOf(shape: Shape, out = new Set<Shape>(), seen = new Set<Def>()): Set<Shape> {
  if (shape.kind === 'union') for (const s of shape.of) leavesOf(s, out, seen);
  else if (shape.kind === 'ref' && shape.def.shape) {
    if (!seen.has(shape.def)) {
      seen.add(shape.def);
      leavesOf(shape.def.shape, out, seen);
    }
  } else out.add(shape);
  return out;
}

const ALL_TYPES: readonly string[] = ['string', 'number', 'boolean', 'null', 'object', 'array'];

/** The JSON types of a shape that is no union and no resolved ref (a leaf). */
function leafTypes(s: Shape): readonly string[] {
  switch (s.kind) {
    case 'literal':
      return [s.value === null ? 'null' : typeof s.value];
    case 'ref':
    case 'any':
      return ALL_TYPES;
    case 'string':
    case 'format':
      return ['string'];
    case 'union': // never a leaf
      return s.of.flatMap(leafTypes);
    default:
      return [s.kind];
  }
}

function jsonTypes(s: Shape): Set<string> {
  return new Set([...leavesOf(s)].flatMap(leafTypes));
}

/** A scalar literal as a key: equal keys for values JSON Schema calls equal (1 and 1.0, 0 and -0). */
const literalKey = (v: Scalar): string => (v === null ? 'null' : `${typeof v}:${String(v)}`);

/**
 * Two branches of `of` that may both match one document (conservative: when unsure they may),
 * or 'too many' past MAX_COMPARISONS. Not quadratic in literals (issue #25: two enums of 6,000
 * values took 3.9 s compared pairwise): literals are told apart by value in a map; only shapes
 * that may overlap by more than a value (objects with a discriminator) are compared in pairs.
 */
function overlapping(doc: Doc, of: Shape[]): [number, number] | 'too many' | undefined {
  const literals = new Map<string, number>();
  // Per JSON type: branches with a literal of it, branches with an open shape of it (two of each suffice).
  const literalTypes = new Map<string, number[]>();
  const openTypes = new Map<string, number[]>();
  const objects: Array<[number, Extract<Shape, { kind: 'object' }>]> = [];
  const note = (m: Map<string, number[]>, t: string, i: number): void => {
    const at = m.get(t) ?? [];
    if (at.length < 2 && !at.includes(i)) m.set(t, [...at, i]);
  };
  for (const [i, branch] of of.entries()) {
    const leaves = leavesOf(branch);
    if (!compare(doc, leaves.size)) return 'too many';
    for (const leaf of leaves) {
      if (leaf.kind === 'literal') {
        const key = literalKey(leaf.value);
        const j = literals.get(key);
        if (j !== undefined && j !== i) return [j, i];
        literals.set(key, i);
        note(literalTypes, leafTypes(leaf)[0] ?? 'null', i);
      } else if (leaf.kind === 'object') objects.push([i, leaf]);
      else for (const t of leafTypes(leaf)) note(openTypes, t, i);
    }
  }
  for (const [t, open] of openTypes) {
    const pair = distinctPair(open, [...open, ...(literalTypes.get(t) ?? [])]);
    if (pair) return pair;
  }
  const anyObject = openTypes.get('object') ?? [];
  for (const [i] of objects) {
    const j = anyObject.find((k) => k !== i);
    if (j !== undefined) return [Math.min(i, j), Math.max(i, j)];
  }
  return overlappingObjects(doc, objects);
}

/** One of `a` and one of `b` that differ, in order. */
function distinctPair(a: number[], b: number[]): [number, number] | undefined {
  for (const i of a) for (const j of b) if (i !== j) return [Math.min(i, j), Math.max(i, j)];
  return undefined;
}

/** Counts comparisons against MAX_COMPARISONS (per request). */
function compare(doc: Doc, n: number): boolean {
  doc.budget.comparisons += n;
  return doc.budget.comparisons <= MAX_COMPARISONS;
}

/** Objects of different branches that no property both always have tells apart (a discriminator such as {"t": "x"}). */
function overlappingObjects(
  doc: Doc,
  objects: Array<[number, Extract<Shape, { kind: 'object' }>]>,
): [number, number] | 'too many' | undefined {
  for (const [x, [i, a]] of objects.entries())
    for (const [j, b] of objects.slice(x + 1)) {
      if (i === j) continue;
      if (!compare(doc, 1 + a.props.length)) return 'too many';
      const told = discriminated(doc, a, b);
      if (told === 'too many') return told;
      if (!told) return [Math.min(i, j), Math.max(i, j)];
    }
  return undefined;
}

/** Whether a property both objects always have can never match in both. */
function discriminated(
  doc: Doc,
  a: Extract<Shape, { kind: 'object' }>,
  b: Extract<Shape, { kind: 'object' }>,
): boolean | 'too many' {
  const props = new Map(b.props);
  for (const [k, pa] of a.props) {
    const pb = props.get(k);
    if (pb === undefined) continue;
    const o = overlapping(doc, [pa, pb]);
    if (o === 'too many') return o;
    if (o === undefined) return true;
  }
  return false;
}
/** const and enum: the values that fit the type and lengths given beside them, written out whole. */
function literalsShape(doc: Doc, schema: Record<string, unknown>, path: Path): Shape {
  const keyword = schema.const !== undefined ? 'const' : 'enum';
  if (!onlyBeside(doc, schema, path, keyword, ['type', 'minLength', 'maxLength', 'enum', 'const']))
    return { kind: 'null' };
  const at = [...path, keyword];
  const values = keyword === 'const' ? [schema.const] : schema.enum;
  if (!Array.isArray(values) || values.length === 0) return problem(doc, at, 'must be a non-empty array');
  // Counted before any is looked at, so an enum of 100,000 values costs one comparison (issue #25).
  if (!spend(doc, values.length, at)) return { kind: 'null' };
  const types = declaredTypes(doc, schema, path);
  const lengths = { min: count(doc, schema, path, 'minLength') ?? 0, max: count(doc, schema, path, 'maxLength') };
  const other = keyword === 'const' && Array.isArray(schema.enum) ? schema.enum : undefined;
  const fitting = values.filter(
    (v) =>
      (!types || types.some((t) => matchesType(v, t))) &&
      (typeof v !== 'string' || fitsLength(v, lengths)) &&
      (!other || other.some((o) => deepEqual(o, v))),
  );
  if (fitting.length === 0) return problem(doc, at, 'no value fits the rest of the schema');
  const of = fitting.map((v) => literalShape(doc, v, at, doc.depth));
  return oneOrUnion(of);
}

function matchesType(v: unknown, t: JsonType): boolean {
  if (t === 'integer') return Number.isInteger(v);
  if (t === 'null') return v === null;
  if (t === 'array') return Array.isArray(v);
  if (t === 'object') return isObject(v);
  return typeof v === t;
}

/** JSON Schema counts characters (code points), as ajv does. */
const charLength = (s: string): number => [...s].length;
const fitsLength = (s: string, l: { min: number; max: number | undefined }): boolean =>
  charLength(s) >= l.min && (l.max === undefined || charLength(s) <= l.max);

/** Values nested deeper than MAX_DEPTH are unequal here: literalShape refuses them anyway. */
function deepEqual(a: unknown, b: unknown, depth = 0): boolean {
  if (depth > MAX_DEPTH) return false;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((x, i) => deepEqual(x, b[i], depth + 1));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return (
      ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k], depth + 1))
    );
  }
  return a === b;
}

/**
 * One value written out: scalars as they are (node-llama-cpp writes a string literal with only
 * \\ \" \t \r \n escaped, so other control characters, which JSON forbids raw, are refused),
 * arrays and objects as shapes of literals. What they hold counts toward MAX_NODES (the values
 * themselves were counted by literalsShape) and their nesting toward MAX_DEPTH: `depth` is that
 * of `v` (a const 100,000 deep overflowed the stack, issue #25).
 */
function literalShape(doc: Doc, v: unknown, path: Path, depth: number): Shape {
  if (depth >= MAX_DEPTH)
    return problem(
      doc,
      path,
      `the value is nested too deeply (more than ${MAX_DEPTH} levels with the schemas around it)`,
    );
  if (typeof v === 'string') {
    if (!spendText(doc, v, path)) return { kind: 'null' };
    return literalText(v)
      ? { kind: 'literal', value: v }
      : problem(doc, path, 'a string with control characters cannot be written by the llama.cpp engine');
  }
  if (typeof v === 'number')
    return Number.isFinite(v) ? { kind: 'literal', value: v } : problem(doc, path, 'must be a finite number');
  if (typeof v === 'boolean' || v === null) return { kind: 'literal', value: v };
  if (Array.isArray(v)) {
    if (!spend(doc, v.length, path)) return { kind: 'null' };
    return {
      kind: 'array',
      prefix: v.map((x) => literalShape(doc, x, path, depth + 1)),
      items: undefined,
      min: v.length,
      max: v.length,
    };
  }
  if (isObject(v)) {
    const entries = Object.entries(v);
    if (!spend(doc, entries.length, path)) return { kind: 'null' };
    for (const [k] of entries) {
      if (!spendText(doc, k, path)) return { kind: 'null' };
      if (!literalText(k))
        return problem(doc, path, 'a key with control characters cannot be written by the llama.cpp engine');
    }
    const props = entries.map(([k, x]): [string, Shape] => [k, literalShape(doc, x, path, depth + 1)]);
    return { kind: 'object', props, extra: undefined, min: props.length, max: props.length };
  }
  return problem(doc, path, 'must be a JSON value');
}

/** Text node-llama-cpp writes as valid JSON string content (see literalShape), UTF-16 well formed. */
const literalText = (s: string): boolean =>
  s.isWellFormed() && ![...s].some((c) => c < ' ' && c !== '\t' && c !== '\n' && c !== '\r');

/** `type` as a list, or undefined when absent; problems for values that are not JSON types. */
function declaredTypes(doc: Doc, schema: Record<string, unknown>, path: Path): JsonType[] | undefined {
  const t = schema.type;
  if (t === undefined) return undefined;
  const list = Array.isArray(t) ? t : [t];
  if (list.length === 0 || !list.every((x) => typeof x === 'string' && JSON_TYPES.has(x))) {
    problem(
      doc,
      [...path, 'type'],
      'must be one of string, number, integer, boolean, null, object, array, or a list of them',
    );
    return [];
  }
  return [...new Set(list as JsonType[])];
}

/** A size keyword: a non-negative integer, or undefined when absent. */
function count(doc: Doc, schema: Record<string, unknown>, path: Path, keyword: string): number | undefined {
  const v = schema[keyword];
  if (v === undefined) return undefined;
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return v;
  problem(doc, [...path, keyword], 'must be a non-negative integer');
  return undefined;
}

/** Types from `type`, or from the keywords present (`{"properties": ...}` generates an object), else any. */
function typedShape(doc: Doc, schema: Record<string, unknown>, path: Path): Shape {
  const has = (keys: string[]): boolean => keys.some((k) => schema[k] !== undefined);
  const inferred: JsonType[] = [
    ...(has(OBJECT_KEYWORDS) ? (['object'] as const) : []),
    ...(has(ARRAY_KEYWORDS) ? (['array'] as const) : []),
    ...(has(STRING_KEYWORDS) ? (['string'] as const) : []),
    ...(has(NUMBER_KEYWORDS) ? (['number'] as const) : []),
  ];
  const types = declaredTypes(doc, schema, path) ?? (inferred.length > 0 ? inferred : undefined);
  if (types === undefined) return { kind: 'any' };
  checkNumberBounds(doc, schema, path, types);
  const of = types.map((t) => shapeOfType(doc, schema, path, t));
  return oneOrUnion(of);
}

function shapeOfType(doc: Doc, schema: Record<string, unknown>, path: Path, t: JsonType): Shape {
  switch (t) {
    case 'string':
      return stringShape(doc, schema, path);
    case 'number':
    case 'integer':
      return { kind: 'number', integer: t === 'integer' };
    case 'boolean':
      return { kind: 'boolean' };
    case 'null':
      return { kind: 'null' };
    case 'object':
      return objectShape(doc, schema, path);
    case 'array':
      return arrayShape(doc, schema, path);
  }
}

/**
 * minimum, maximum and the exclusive ones are accepted only where every number the grammar can
 * write already satisfies them: zod's `z.number().int()` sends the safe-integer bounds, and an
 * integer of the grammar has at most 15 digits. multipleOf 1 on integers likewise, and the
 * number formats of OpenAPI generators (ajv-formats checks them) that hold every such number:
 * int64 for integers, double; int32 and float do not.
 */
function checkNumberBounds(doc: Doc, schema: Record<string, unknown>, path: Path, types: JsonType[]): void {
  const numeric = types.filter((t) => t === 'number' || t === 'integer');
  if (numeric.length === 0) return; // they apply to numbers only
  const fractional = numeric.includes('number');
  const format = schema.format;
  if (NUMBER_FORMATS.has(format) && !(format === 'double' || (format === 'int64' && !fractional)))
    problem(
      doc,
      [...path, 'format'],
      `${JSON.stringify(format)} is not supported on numbers: the llama.cpp engine cannot enforce it`,
    );
  const limit = fractional ? NUMBER_LIMIT : INTEGER_LIMIT;
  const implied: Record<string, (v: number) => boolean> = {
    minimum: (v) => v <= -limit,
    exclusiveMinimum: (v) => v < -limit,
    maximum: (v) => v >= limit,
    exclusiveMaximum: (v) => v > limit,
    multipleOf: (v) => v === 1 && !fractional,
  };
  for (const [k, ok] of Object.entries(implied)) {
    const v = schema[k];
    if (v !== undefined && !(typeof v === 'number' && ok(v))) cannotEnforce(doc, [...path, k]);
  }
}

function stringShape(doc: Doc, schema: Record<string, unknown>, path: Path): Shape {
  const min = count(doc, schema, path, 'minLength') ?? 0;
  const max = count(doc, schema, path, 'maxLength');
  if (max !== undefined && max < min) return problem(doc, [...path, 'maxLength'], 'is below minLength: no string fits');
  const format = schema.format;
  if (format === undefined || NUMBER_FORMATS.has(format)) return { kind: 'string', min, max };
  if (format !== 'date' && format !== 'time' && format !== 'date-time')
    return problem(
      doc,
      [...path, 'format'],
      `${JSON.stringify(format)} is not supported: the llama.cpp engine enforces only date, time and date-time`,
    );
  // The grammar writes the format's own lengths; bounds tighter than those cannot be enforced.
  const [fmin, fmax] = FORMAT_LENGTH[format];
  if (min > fmin) return cannotEnforce(doc, [...path, 'minLength']);
  if (max !== undefined && max < fmax) return cannotEnforce(doc, [...path, 'maxLength']);
  return { kind: 'format', format };
}

function objectShape(doc: Doc, schema: Record<string, unknown>, path: Path): Shape {
  const props = schema.properties ?? {};
  if (!isObject(props)) return problem(doc, [...path, 'properties'], 'must be an object of schemas');
  const required = schema.required ?? [];
  if (!Array.isArray(required) || !required.every((r) => typeof r === 'string'))
    return problem(doc, [...path, 'required'], 'must be an array of property names');
  const additional = schema.additionalProperties;
  const extra =
    additional === undefined || additional === false
      ? additional
      : shapeOf(doc, additional, [...path, 'additionalProperties']);
  const out: Array<[string, Shape]> = [];
  // Sets, not lists: 20,000 required names took 1.4 s compared with every property (issue #25).
  const requiredNames = new Set<string>(required);
  const listed = new Set<string>();
  for (const [name, sub] of Object.entries(props)) {
    if (!spendText(doc, name, [...path, 'properties'])) return { kind: 'null' };
    if (!literalText(name))
      return problem(
        doc,
        [...path, 'properties', name],
        'a property name with control characters cannot be written by the llama.cpp engine',
      );
    // A property whose schema is false may only be absent: left out (node-llama-cpp writes every listed one).
    if (sub === false && !requiredNames.has(name)) continue;
    out.push([name, shapeOf(doc, sub, [...path, 'properties', name])]);
    listed.add(name);
  }
  // A required name without a schema of its own takes additionalProperties' (any value when absent).
  for (const name of requiredNames)
    if (!listed.has(name)) {
      if (!spend(doc, 1, [...path, 'required']) || !spendText(doc, name, [...path, 'required']))
        return { kind: 'null' };
      if (extra === false)
        return problem(
          doc,
          [...path, 'required'],
          `names ${JSON.stringify(name)}, which additionalProperties false forbids`,
        );
      if (!literalText(name))
        return problem(
          doc,
          [...path, 'required'],
          'a property name with control characters cannot be written by the llama.cpp engine',
        );
      out.push([name, extra ?? { kind: 'any' }]);
    }
  return boundedObject(doc, schema, path, out, extra === false ? undefined : (extra ?? { kind: 'any' }));
}

/**
 * Sizes of an object. More keys than the listed ones are generated only when none are listed: a
 * generated key may repeat a listed one (the grammar cannot tell them apart), and the value
 * parsed last would then replace the listed property's. For the same reason minProperties
 * above 1 cannot be met with generated keys alone (two may be equal).
 */
function boundedObject(
  doc: Doc,
  schema: Record<string, unknown>,
  path: Path,
  props: Array<[string, Shape]>,
  extra: Shape | undefined,
): Shape {
  const min = count(doc, schema, path, 'minProperties') ?? 0;
  const max = count(doc, schema, path, 'maxProperties');
  if (max !== undefined && max < props.length)
    return problem(
      doc,
      [...path, 'maxProperties'],
      `is below the ${props.length} properties, which the llama.cpp engine always writes`,
    );
  const open = props.length === 0 && extra !== undefined;
  if (min > Math.max(props.length, open ? 1 : 0))
    return problem(
      doc,
      [...path, 'minProperties'],
      `above ${Math.max(props.length, 1)} is not supported: the llama.cpp engine cannot enforce it`,
    );
  return { kind: 'object', props, extra: open ? extra : undefined, min, max };
}

function arrayShape(doc: Doc, schema: Record<string, unknown>, path: Path): Shape {
  let prefix: Shape[] = [];
  let items: Shape | undefined = { kind: 'any' };
  const p = schema.prefixItems;
  if (p !== undefined) {
    if (!Array.isArray(p)) return problem(doc, [...path, 'prefixItems'], 'must be an array of schemas');
    prefix = p.map((s, i) => shapeOf(doc, s, [...path, 'prefixItems', i]));
  }
  const it = schema.items;
  // items as an array is the tuple of drafts before 2020-12: its items, then none (a valid subset).
  if (Array.isArray(it)) {
    prefix = [...prefix, ...it.map((s, i) => shapeOf(doc, s, [...path, 'items', i]))];
    items = undefined;
  } else if (it === false) items = undefined;
  else if (it !== undefined) items = shapeOf(doc, it, [...path, 'items']);
  const min = count(doc, schema, path, 'minItems') ?? 0;
  const max = count(doc, schema, path, 'maxItems');
  if (max !== undefined && max < min) return problem(doc, [...path, 'maxItems'], 'is below minItems: no array fits');
  if (items === undefined && min > prefix.length)
    return problem(doc, [...path, 'minItems'], 'asks for more items than the schema allows');
  // Prefix items beyond maxItems are simply not written (node-llama-cpp would write them all).
  if (max !== undefined && max < prefix.length) prefix = prefix.slice(0, max);
  return { kind: 'array', prefix, items, min, max };
}

// ---------------------------------------------------------------------------------------------
// Caps and the worst case.
//
// One cap value, `size`, bounds every size left open: string lengths (and keys of open objects),
// the number of array items after the prefix and of generated keys. A larger size never shortens
// the worst case, so the largest that fits is found by bisection. One value rather than one per
// size because the worst case is a product along each path (items x string length x ...):
// weighing sizes against each other would be a policy per schema, while one value is predictable
// and treats every open size alike. Sizes the caller bounded keep the smaller bound.

const stringMax = (s: { min: number; max: number | undefined }, cap: number): number =>
  Math.max(s.min, Math.min(s.max ?? Number.POSITIVE_INFINITY, cap));
/** Items after the prefix. */
const restMax = (a: Extract<Shape, { kind: 'array' }>, cap: number): number =>
  a.items === undefined
    ? 0
    : Math.max(a.min - a.prefix.length, Math.min((a.max ?? Number.POSITIVE_INFINITY) - a.prefix.length, cap));
const extraMax = (o: Extract<Shape, { kind: 'object' }>, cap: number): number =>
  o.extra === undefined ? 0 : Math.max(o.min, Math.min(o.max ?? Number.POSITIVE_INFINITY, cap));

/** The bounds of one grammar: `size` for every open size, `anyDepth` levels of containers in `any`. */
interface Caps {
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

const worstTokens = (shape: Shape, caps: Caps): number => worstBytes(shape, caps, new Map()) + BYTES.trailer;

// ---------------------------------------------------------------------------------------------
// The GbnfJsonSchema for node-llama-cpp.

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
const KEY_DEF = 'key';

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
function bounded(root: Shape, maxTokens: number): GbnfJsonSchema {
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

// ---------------------------------------------------------------------------------------------
// The exports.

/**
 * The grammar schema for a response_format (json_object or json_schema): the caller's schema
 * checked (a ValidationError naming the first keyword the engine cannot enforce by its path,
 * every one in its details) and bounded so that any document it allows fits maxTokens tokens
 * (else a ValidationError naming max_tokens with the least that would do).
 */
export function responseFormatSchema(format: ResponseFormat, maxTokens: number): GbnfJsonSchema {
  if (format.type === 'json_object')
    return bounded({ kind: 'object', props: [], extra: { kind: 'any' }, min: 0, max: undefined }, maxTokens);
  const doc = newDoc(format.json_schema.schema ?? {}, {
    param: 'response_format.json_schema.schema',
    prefix: 'd',
    budget: newBudget(),
  });
  const root = shapeOf(doc, doc.root, []);
  checkAlternatives(doc, root);
  throwProblems([doc]);
  return bounded(root, maxTokens);
}

/**
 * The grammar schema of one forced tool call, `{"name": <the name>, "arguments": <its
 * parameters>}`: for a named function, that one; for `required`, any of the tools (oneOf). The
 * parameters are checked as responseFormatSchema checks a schema (params
 * `tools[i].function.parameters...`), and the whole call bounded to maxTokens.
 */
export function toolCallSchema(
  tools: ToolDef[],
  choice: Exclude<ToolChoice, 'auto'>,
  maxTokens: number,
): GbnfJsonSchema {
  const chosen = tools
    .map((t, i) => ({ t, i }))
    .filter(({ t }) => choice === 'required' || t.function.name === choice.function.name);
  if (chosen.length === 0)
    throw new ValidationError(
      choice === 'required'
        ? 'tools: tool_choice "required" needs at least one tool'
        : `tool_choice: names the function ${JSON.stringify(choice.function.name)}, which is not in tools`,
      { param: choice === 'required' ? 'tools' : 'tool_choice' },
    );
  return bounded(oneOrUnion(callShapes(chosen)), maxTokens);
}

/**
 * The grammar schema of a call of each tool the model may call (tool_choice "auto"), in the
 * order of `tools`, each bounded by the first of `budgets` that one call fits (else the last
 * one's refusal). The tools are converted together, as one request's schemas (MAX_NODES).
 */
export function toolCallSchemas(tools: ToolDef[], budgets: number[]): GbnfJsonSchema[] {
  return callShapes(tools.map((t, i) => ({ t, i }))).map((call) => {
    for (const [i, budget] of budgets.entries()) {
      try {
        return bounded(call, budget);
      } catch (err) {
        if (!(err instanceof ValidationError && err.param === 'max_tokens') || i === budgets.length - 1) throw err;
      }
    }
    throw new InternalError('toolCallSchemas: no budget');
  });
}

/** `{"name": <the name>, "arguments": <its parameters>}` of each tool, checked (a ValidationError). */
function callShapes(chosen: Array<{ t: ToolDef; i: number }>): Shape[] {
  const budget = newBudget();
  const docs: Doc[] = [];
  const calls = chosen.map(({ t, i }): Shape => {
    const param = `tools[${i}].function.parameters`;
    const doc = newDoc(t.function.parameters ?? NO_PARAMETERS, { param, prefix: `t${i}_`, budget });
    docs.push(doc);
    const args = argumentsShape(doc);
    checkAlternatives(doc, args);
    return {
      kind: 'object',
      props: [
        ['name', { kind: 'literal', value: t.function.name }],
        ['arguments', args],
      ],
      extra: undefined,
      min: 2,
      max: 2,
    };
  });
  throwProblems(docs);
  checkUniqueNames(chosen.map(({ t, i }) => ({ name: t.function.name, i })));
  return calls;
}

/**
 * A problem when a prefix of a document may have more than MAX_ALTERNATIVES parses (see the
 * top of the file). Counted with multiplicity, as llama.cpp expands them: a union adds its
 * members' counts, a container has those of the one member being written, a $ref its def's
 * (once per def, so a chain of defs that each refer twice to the next costs its length here).
 */
function checkAlternatives(doc: Doc, root: Shape): void {
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

/** OpenAI: "omitting parameters defines a function with an empty parameter list". */
const NO_PARAMETERS = { type: 'object', properties: {}, additionalProperties: false };

/** Function arguments are a JSON object (OpenAI): parameters without a type describe one. */
function argumentsShape(doc: Doc): Shape {
  const params = doc.root;
  if (isObject(params) && params.type === undefined && Object.keys(params).every((k) => ANNOTATIONS.has(k)))
    return shapeOf(doc, { ...params, type: 'object' }, []);
  const shape = shapeOf(doc, params, []);
  const types = jsonTypes(shape);
  if (doc.problems.length === 0 && (types.size !== 1 || !types.has('object')))
    problem(doc, ['type'], 'must describe an object: function arguments are a JSON object');
  return shape;
}

function checkUniqueNames(tools: Array<{ name: string; i: number }>): void {
  const seen = new Set<string>();
  for (const { name, i } of tools) {
    if (seen.has(name))
      throw new ValidationError(`tools[${i}].function.name: ${JSON.stringify(name)} names two tools`, {
        param: `tools[${i}].function.name`,
      });
    seen.add(name);
  }
}

// ---------------------------------------------------------------------------------------------
// The GBNF.

/** Rules of node-llama-cpp 3.21's JSON grammar replaced (see the top of the file), each checked to be what was patched. */
const RULE_PATCHES: Array<{ rule: string; from: string; to: (keyCap: number) => string }> = [
  {
    // One \u escape is one character: escapes of surrogates (two for one character) are left out.
    rule: 'string-char-rule',
    from: String.raw`[^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4}`,
    to: () =>
      String.raw`[^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt] | "\\u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})`,
  },
  {
    // Used only by the keys of open objects (every string value has a maxLength here).
    rule: 'string-rule',
    from: String.raw`"\"" string-char-rule* "\""`,
    to: (k) => (k === 0 ? String.raw`"\"\""` : String.raw`"\"" ( string-char-rule ){0,${k}} "\""`),
  },
  {
    // 1e-5 is no integer; 15 digits keep within the safe integers.
    rule: 'integer-number-rule',
    from: '"-"? ("0" | [1-9] [0-9]{0,15}) ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
    to: () => '"-"? ("0" | [1-9] [0-9]{0,14})',
  },
  {
    // An exponent of 16 digits overflows to Infinity, which JSON cannot hold.
    rule: 'fractional-number-rule',
    from: '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
    to: () => '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?',
  },
];
/** Any day 01-31 of any month: only days each month has (February to the 28th, so leap years need no rule). */
const DATE_FROM = '[0-9]{4} "-" ("0" [1-9] | "1" [012]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])';
const DATE_TO =
  '[0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8]))';
const DATE_RULES = ['string-format-date-rule', 'string-format-date-time-rule'];

/**
 * node-llama-cpp's GBNF for a schema of responseFormatSchema or toolCallSchema with its rules
 * that allow text the schema does not (see the top of the file) replaced. A rule that is not
 * what was patched (another node-llama-cpp version) is an error, never a silent pass.
 */
export function patchGrammar(gbnf: string, schema: GbnfJsonSchema): string {
  const keyCap = (schema as { $defs?: Record<string, { maxLength?: number }> }).$defs?.[KEY_DEF]?.maxLength;
  return gbnf
    .split('\n')
    .map((line) => {
      const sep = line.indexOf(' ::= ');
      const rule = line.slice(0, sep);
      const body = line.slice(sep + 5);
      const patch = RULE_PATCHES.find((p) => p.rule === rule);
      if (patch) {
        if (body !== patch.from) throw new InternalError(`node-llama-cpp's ${rule} is not the one patched: ${body}`);
        if (rule === 'string-rule' && keyCap === undefined)
          throw new InternalError('patchGrammar: the schema did not come from responseFormatSchema or toolCallSchema');
        return `${rule} ::= ${patch.to(keyCap ?? 0)}`;
      }
      if (DATE_RULES.includes(rule)) {
        if (!body.includes(DATE_FROM))
          throw new InternalError(`node-llama-cpp's ${rule} is not the one patched: ${body}`);
        return `${rule} ::= ${body.replace(DATE_FROM, DATE_TO)}`;
      }
      return line;
    })
    .join('\n');
}

/**
 * The grammar to generate with (LlamaChat's `grammar`): node-llama-cpp's for `schema`, patched,
 * with its stop trigger and whitespace trimming. `schema` from responseFormatSchema or toolCallSchema.
 *
 * Each step is synchronous: node-llama-cpp writing the GBNF and llama.cpp parsing it (once inside
 * createGrammarForJsonSchema, once patched). At the limits (2,000 strings of 59 characters)
 * each took 12-21 ms; before them (5,000 strings of 180) ~100 ms, and back to back with the
 * schema's conversion ~250 ms. So each starts on a turn of its own, with the I/O of other
 * requests between them (issue #25: no request holds the loop for more than 200 ms).
 */
export async function createJsonGrammar(llama: Llama, schema: GbnfJsonSchema): Promise<LlamaGrammar> {
  await nextTurn();
  const base = await llama.createGrammarForJsonSchema<GbnfJsonSchema, Record<string, GbnfJsonSchema>>(schema);
  await nextTurn();
  return llama.createGrammar({
    grammar: patchGrammar(base.grammar, schema),
    stopGenerationTriggers: base.stopGenerationTriggers,
    trimWhitespaceSuffix: base.trimWhitespaceSuffix,
  });
}

const outsideUtf8 = new WeakMap<LlamaModel, readonly Token[]>();

/**
 * The tokens whose text is not whole UTF-8 on its own: the byte tokens 0x80-0xFF of a
 * SentencePiece vocabulary, the pieces of characters of a byte-level BPE one. llama.cpp's grammar
 * decodes UTF-8 leniently (llama-grammar.cpp decode_utf8 checks only that continuation bytes
 * look like ones): overlong forms, surrogates and code points above U+10FFFF pass as characters,
 * so a random model wrote the bytes F9 86 83 BB as one character of a string with maxLength 5,
 * which decodes to four U+FFFD; an overlong C0 A2 even passes as a closing quote. Banned while a
 * grammar is on (the token bias `never`), every token is whole UTF-8 and so is any sequence of
 * them; a character the vocabulary has no whole token for can still be written as a \u escape.
 * Computed once per model (one detokenize per token: ~30 ms for 32,000).
 */
export function tokensOutsideUtf8(model: LlamaModel): readonly Token[] {
  const known = outsideUtf8.get(model);
  if (known) return known;
  const tokens: Token[] = [];
  for (const token of model.iterateAllTokens()) if (model.detokenize([token]).includes('\uFFFD')) tokens.push(token);
  outsideUtf8.set(model, tokens);
  return tokens;
}
