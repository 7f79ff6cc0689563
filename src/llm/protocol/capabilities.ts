// What an orchestrator advertises at GET <base>/capabilities, and the schema a gateway's pool
// checks it against (issue #26): a malformed advertisement is refused, naming the field and the
// rule, rather than half-used (a model without `free` would rank as busy, one without `id` would
// never match). Unknown top-level fields (an orchestrator's `stats`) are ignored.

import { type Static, Type } from '@sinclair/typebox';
import type { ValidationError } from '../../lib/errors.ts';
import { schemaChecker } from '../../lib/schema-validator.ts';
import { FEATURES, type Feature } from './types.ts';

const count = (description: string) => Type.Integer({ minimum: 0, description });

const AdvertisedModel = Type.Object({
  id: Type.String({ minLength: 1, description: '<org>/<model_name>' }),
  warm: Type.Boolean({ description: 'Loaded and ready' }),
  contextLength: Type.Optional(Type.Integer({ minimum: 1, description: 'Tokens per request, when known' })),
  free: count('Sequences free now'),
  total: count('Sequences in all'),
  queued: count('Requests waiting for a sequence'),
});

/** The advertisement as a schema: what the pool relies on, each with its type. */
export const CapabilitiesBody = Type.Object({
  engine: Type.String({ description: 'The engine kind (llama.cpp, vllm)' }),
  // Strings, not the FEATURES this gateway knows: a newer orchestrator may advertise more, and
  // an unknown feature is never asked for (readCapabilities drops it).
  features: Type.Optional(Type.Array(Type.String(), { description: 'Features beyond plain chat' })),
  pricePerToken: Type.Number({ minimum: 0, description: 'USD per output token' }),
  models: Type.Array(AdvertisedModel),
});

/** What an orchestrator advertises at GET <base>/capabilities (CapabilitiesBody says the rules). */
export interface Capabilities {
  engine: string;
  /** What the engine can honour beyond plain chat (absent from older orchestrators: none). */
  features?: Feature[];
  /** USD per output token. */
  pricePerToken: number;
  models: Array<{
    id: string;
    warm: boolean;
    contextLength?: number | undefined;
    free: number;
    total: number;
    queued: number;
  }>;
}

const checkCapabilities = schemaChecker()(CapabilitiesBody);
const isFeature = (f: string): f is Feature => (FEATURES as readonly string[]).includes(f);

/**
 * An advertisement as the pool uses it, or the ValidationError naming each field that breaks
 * its rule (`models[0].free: must be an integer`). Features this gateway does not know are dropped.
 */
export function readCapabilities(body: unknown): { caps: Capabilities } | { error: ValidationError } {
  const error = checkCapabilities(body);
  if (error) return { error };
  const caps = body as Static<typeof CapabilitiesBody>;
  const { features, ...rest } = caps;
  return { caps: features === undefined ? rest : { ...rest, features: features.filter(isFeature) } };
}
