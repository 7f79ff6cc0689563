// const and enum: values the grammar writes out whole.

import { type Doc, problem, spend, spendText } from './doc.ts';
import { count, declaredTypes, onlyBeside } from './keywords.ts';
import { isObject, type JsonType, MAX_DEPTH, oneOrUnion, type Path, type Shape } from './shape.ts';

/** const and enum: the values that fit the type and lengths given beside them, written out whole. */
export function literalsShape(doc: Doc, schema: Record<string, unknown>, path: Path): Shape {
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
export const literalText = (s: string): boolean =>
  s.isWellFormed() && ![...s].some((c) => c < ' ' && c !== '\t' && c !== '\n' && c !== '\r');
