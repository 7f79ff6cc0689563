// The Shape (issue #17, split out by issue #26): the documents a caller's schema allows, in the
// terms of the grammar, and the limits every step from a schema to a grammar keeps to.

export type Scalar = string | number | boolean | null;

export type JsonType = 'string' | 'number' | 'integer' | 'boolean' | 'null' | 'object' | 'array';

export type DateFormat = 'date' | 'time' | 'date-time';

/**
 * The documents a schema allows, in the terms of the grammar: what is generated and how long it
 * can get. Sizes left undefined are unbounded until a cap is chosen (gbnf-schema.ts bounded).
 */
export type Shape =
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
export interface Def {
  name: string;
  shape: Shape | undefined;
}

export type Path = ReadonlyArray<string | number>;

/** The length range of each format's text (JSON Schema's minLength/maxLength count characters). */
export const FORMAT_LENGTH: Record<DateFormat, [number, number]> = {
  date: [10, 10],
  time: [9, 18],
  'date-time': [20, 29],
};

/** Integers the grammar can write: 15 digits, so JavaScript's safe-integer bounds (zod's `int()`) are implied. */
export const INTEGER_LIMIT = 999_999_999_999_999;

/** Numbers the grammar can write: 16 digits, 16 decimals, an exponent of at most 99. */
export const NUMBER_LIMIT = 1e116;

/** Containers inside json_object's values and `{}` schemas: 2 levels at most, each only from a size of 8 (gbnf-schema.ts bounded). */
export const ANY_DEPTH = 2;

export const MIN_NESTED_SIZE = 8;

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
export const MAX_NODES = 5000;

export const MAX_TEXT = 120_000;

export const MAX_DEPTH = 64;

export const MAX_ALTERNATIVES = 2000;

export const MAX_COMPARISONS = 50_000;

/** Problems reported per request: each one names a path, and a schema of 100,000 bad keywords would make a huge 400. */
export const MAX_PROBLEMS = 50;

export const oneOrUnion = (of: Shape[]): Shape => (of.length === 1 && of[0] ? of[0] : { kind: 'union', of });

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
