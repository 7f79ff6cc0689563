// The JSON Schema keywords the llama.cpp engine enforces, and how a schema's keywords are read.

import { type Doc, problem } from './doc.ts';
import type { JsonType, Path } from './shape.ts';

export const ANNOTATIONS = new Set([
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

export const OBJECT_KEYWORDS = ['properties', 'required', 'additionalProperties', 'minProperties', 'maxProperties'];

export const ARRAY_KEYWORDS = ['items', 'prefixItems', 'minItems', 'maxItems'];

export const STRING_KEYWORDS = ['minLength', 'maxLength', 'format'];

export const NUMBER_KEYWORDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'];

export const SUPPORTED = new Set([
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
export const NUMBER_FORMATS = new Set<unknown>(['int32', 'int64', 'float', 'double']);

const JSON_TYPES = new Set<string>(['string', 'number', 'integer', 'boolean', 'null', 'object', 'array']);

/** Keywords beside `keyword` other than annotations and `allowed`: refused, as their meaning would change. */
export function onlyBeside(
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

/** `type` as a list, or undefined when absent; problems for values that are not JSON types. */
export function declaredTypes(doc: Doc, schema: Record<string, unknown>, path: Path): JsonType[] | undefined {
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
export function count(doc: Doc, schema: Record<string, unknown>, path: Path, keyword: string): number | undefined {
  const v = schema[keyword];
  if (v === undefined) return undefined;
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return v;
  problem(doc, [...path, keyword], 'must be a non-negative integer');
  return undefined;
}
