// Whether two branches of a oneOf may match one document: the grammar picks one branch and
// never checks the others, so only branches that cannot overlap are accepted.

import type { Doc } from './doc.ts';
import { type Def, MAX_COMPARISONS, type Scalar, type Shape } from './shape.ts';

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

export function jsonTypes(s: Shape): Set<string> {
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
export function overlapping(doc: Doc, of: Shape[]): [number, number] | 'too many' | undefined {
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
