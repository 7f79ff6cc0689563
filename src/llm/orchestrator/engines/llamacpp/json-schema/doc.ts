// One document being converted (a response_format schema, one tool's parameters): where its
// problems are recorded, each naming its path, and the budget of the request it spends.

import { ValidationError } from '../../../../../lib/errors.ts';
import { type Def, MAX_NODES, MAX_PROBLEMS, MAX_TEXT, type Path, type Shape } from './shape.ts';

/** The conversion of one document (a response_format schema, one tool's parameters). */
export interface Doc {
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

export const newBudget = (): Budget => ({ nodes: 0, text: 0, comparisons: 0, exceeded: false });

/** `response_format.json_schema.schema` + [properties, age, minimum] as OpenAI writes params. */
function paramOf(doc: Doc, path: Path): string {
  return path.reduce<string>((p, seg) => (typeof seg === 'number' ? `${p}[${seg}]` : `${p}.${seg}`), doc.param);
}

/** Records a problem; the placeholder shape lets the conversion go on and report every one. */
export function problem(doc: Doc, path: Path, rule: string): Shape {
  const param = paramOf(doc, path);
  if (doc.problems.length < MAX_PROBLEMS) doc.problems.push({ param, message: `${param}: ${rule}` });
  return { kind: 'null' };
}

/** Counts `n` nodes against MAX_NODES; past it, one problem at `path` and false from then on. */
export function spend(doc: Doc, n: number, path: Path): boolean {
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
export function spendText(doc: Doc, text: string, path: Path): boolean {
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

export const cannotEnforce = (doc: Doc, path: Path): Shape =>
  problem(doc, path, `${String(path.at(-1))} is not supported: the llama.cpp engine cannot enforce it`);

export function newDoc(root: unknown, o: { param: string; prefix: string; budget: Budget }): Doc {
  return { root, ...o, defs: new Map(), converting: new Set(), problems: [], depth: 0 };
}

export function throwProblems(docs: Doc[]): void {
  const all = docs.flatMap((d) => d.problems).slice(0, MAX_PROBLEMS);
  const first = all[0];
  if (first)
    throw new ValidationError(
      all.map((p) => p.message),
      { param: first.param },
    );
}
