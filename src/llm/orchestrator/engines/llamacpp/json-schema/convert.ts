// The caller's schema as a Shape, refusing what the grammar cannot enforce (a problem naming the
// keyword's path; every one is reported).

import { cannotEnforce, type Doc, problem, spend, spendText } from './doc.ts';
import {
  ANNOTATIONS,
  ARRAY_KEYWORDS,
  count,
  declaredTypes,
  NUMBER_KEYWORDS,
  OBJECT_KEYWORDS,
  onlyBeside,
  STRING_KEYWORDS,
  SUPPORTED,
} from './keywords.ts';
import { literalsShape, literalText } from './literals.ts';
import { overlapping } from './overlap.ts';
import { checkNumberBounds, stringShape } from './scalars.ts';
import { isObject, type JsonType, MAX_COMPARISONS, MAX_DEPTH, oneOrUnion, type Path, type Shape } from './shape.ts';

export function shapeOf(doc: Doc, schema: unknown, path: Path): Shape {
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
