// Schema pieces of the LLM request bodies: the wording of number and boolean fields, and the
// fields the chat body, POST /v1/completions and /v1/embeddings share (one rule each).

import { type Static, type TArray, type TObject, Type, type TUnsafe } from '@sinclair/typebox';
import { ERROR_MESSAGE, type RuleMessages } from '../../lib/schema-errors.ts';
import type { JsonSchema } from './types.ts';

/** OpenAI's rule for function and json_schema names. */
export const NameBody = Type.String({
  pattern: '^[a-zA-Z0-9_-]{1,64}$',
  [ERROR_MESSAGE]: 'required, must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -',
});

/** The wording of a number field: `must be a number`, `must be an integer`, `must be between 0 and 2 (got 3)`. */
export function numberWording(min: number, max: number): RuleMessages {
  const range = `must be between ${min} and ${max} (got {value})`;
  return {
    type: 'must be a number',
    integer: 'must be an integer',
    minimum: range,
    maximum: range,
    default: 'must be a number',
  };
}

/** A number field from `min` to `max`, unset when absent or null. */
export function bounded(min: number, max: number, opts: { integer?: boolean; description: string }) {
  const kind = opts.integer
    ? Type.Integer({ minimum: min, maximum: max })
    : Type.Number({ minimum: min, maximum: max });
  return Type.Optional(
    Type.Union([kind, Type.Null()], { description: opts.description, [ERROR_MESSAGE]: numberWording(min, max) }),
  );
}

/** A boolean field, unset when absent or null. */
export function flag(description: string) {
  return Type.Optional(
    Type.Union([Type.Boolean(), Type.Null()], { description, [ERROR_MESSAGE]: 'must be a boolean' }),
  );
}

/**
 * `schema` or null, as one node (`type: [..., "null"]`) rather than a union: a mistake deep
 * inside is then reported at its own path, not beside a "must be null" of the other branch.
 */
export function orNull<T extends TObject | TArray>(schema: T): TUnsafe<Static<T> | null> {
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [schema.type, 'null'] });
}

/**
 * Known OpenAI fields this service cannot honour: any value but null is refused by name (a
 * behaviour asked for and silently not given would be worse than the 400).
 */
export function refused(why: string) {
  return Type.Optional(Type.Null({ description: `Refused: ${why}`, [ERROR_MESSAGE]: why }));
}

/** A JSON Schema object, as the caller sent it (each engine checks the keywords it can enforce). */
export const JsonSchemaBody = Type.Unsafe<JsonSchema>({
  type: 'object',
  [ERROR_MESSAGE]: { type: 'must be a JSON Schema object' },
});

/** The longest stop string, in characters (so at most 4 × 256 of them per request). */
const STOP_MAX_LENGTH = 256;

/**
 * The fields the LLM request bodies share (the chat body here, POST /v1/completions and
 * /v1/embeddings in gateway/): one schema each, so a field has the same rules, wording and
 * description on every route that takes it.
 */
export const sharedFields = {
  model: Type.String({
    minLength: 1,
    maxLength: 256,
    description: '<org>/<model_name>, as on the public model hub; any other id is a 404 model_not_found',
    [ERROR_MESSAGE]: 'required, must be <org>/<model_name> (e.g. karpathy/stories260K)',
  }),
  max_tokens: bounded(1, 1_000_000, {
    integer: true,
    description:
      "Per choice; the price basis; the gateway's default when unset; above the model's context: 400 context_length_exceeded",
  }),
  temperature: bounded(0, 2, { description: 'Sampling temperature (default 1)' }),
  top_p: bounded(0, 1, { description: 'Nucleus sampling (default 1: off)' }),
  // -1 means "off" in vLLM's API, and @livepeer/ai sends it by default.
  top_k: Type.Optional(
    Type.Union([Type.Literal(-1), Type.Integer({ minimum: 0, maximum: 1_000_000 }), Type.Null()], {
      description: 'Top-k sampling; -1 or unset: off',
      [ERROR_MESSAGE]: numberWording(0, 1_000_000),
    }),
  ),
  // OpenAI's count; the length bounds what an engine builds from them for every request (a trie
  // node per character in node-llama-cpp): 800 KB of stop strings stalled the loop for 1.6 s (issue #25).
  stop: Type.Optional(
    Type.Union(
      [
        Type.String({ maxLength: STOP_MAX_LENGTH }),
        Type.Array(Type.String({ minLength: 1, maxLength: STOP_MAX_LENGTH }), { maxItems: 4 }),
        Type.Null(),
      ],
      {
        description: `Where generation stops: at most 4 strings of at most ${STOP_MAX_LENGTH} characters each`,
        [ERROR_MESSAGE]: `must be a string or an array of at most 4 non-empty strings, each at most ${STOP_MAX_LENGTH} characters`,
      },
    ),
  ),
  seed: bounded(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, {
    integer: true,
    description: 'Seeded sampling (choice i uses seed + i); unseeded requests are random',
  }),
  presence_penalty: bounded(-2, 2, { description: 'Presence penalty' }),
  frequency_penalty: bounded(-2, 2, { description: 'Frequency penalty' }),
  user: Type.Optional(
    Type.Union([Type.String(), Type.Null()], {
      description: 'Accepted and ignored',
      [ERROR_MESSAGE]: 'must be a string',
    }),
  ),
  max_price_per_token: bounded(0, 1, {
    description: "Mediaplane extension: the caller's price ceiling, USD per output token",
  }),
};
