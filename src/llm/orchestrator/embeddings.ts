// Embeddings on an orchestrator (issue #17): POST /v1/embeddings for gateways, admitted through
// the model's Slots like a chat request, and llama.cpp's embedding contexts, which the
// llama.cpp engine's `embed` delegates to. The gateway speaks OpenAI's shape to its clients
// (base64 included); this route always answers floats.

import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { LlamaEmbeddingContext, LlamaModel } from 'node-llama-cpp';
import { ContextLengthExceededError, ModelNotFoundError, NotFoundError } from '../../lib/errors.ts';
import { ERROR_MESSAGE } from '../../lib/schema-errors.ts';
import { schemaChecker } from '../../lib/schema-validator.ts';
import { forwardedBodyLimit, MODEL_ID_RE } from '../protocol/index.ts';
import type { Engine } from './engine.ts';
import type { Slots } from './slots.ts';

/** OpenAI's limit on the inputs of one request. */
export const MAX_EMBEDDING_INPUTS = 2048;

/** What an engine's `embed` gives: one vector per input, and the tokens the inputs took. */
export interface Embedded {
  vectors: number[][];
  promptTokens: number;
}

/** The body a gateway forwards: its client's `input` always as a list. */
const EmbeddingsForward = Type.Object(
  {
    model: Type.String({ pattern: MODEL_ID_RE.source, [ERROR_MESSAGE]: 'required, must be <org>/<model_name>' }),
    input: Type.Array(Type.String({ minLength: 1 }), {
      minItems: 1,
      maxItems: MAX_EMBEDDING_INPUTS,
      [ERROR_MESSAGE]: `required, must be an array of 1 to ${MAX_EMBEDDING_INPUTS} non-empty strings`,
    }),
  },
  { [ERROR_MESSAGE]: { type: 'must be a JSON object {model, input}' } },
);
type EmbeddingsForward = Static<typeof EmbeddingsForward>;
const checkForward = schemaChecker()(EmbeddingsForward);

/** The part of the orchestrator's state the route uses (routes.ts OrchestratorState has it). */
export interface EmbeddingsState {
  engine: Engine;
  slots: (model: string) => Slots;
  bodyLimitBytes: number;
  stats: { active: number };
}

/** Registers POST /v1/embeddings on the gateways' (secret-protected) scope. */
export function embeddingsRoute(app: FastifyInstance, s: EmbeddingsState): void {
  app.post('/v1/embeddings', { bodyLimit: forwardedBodyLimit(s.bodyLimitBytes) }, async (req, reply) =>
    embeddings(req.body, reply, s),
  );
}

async function embeddings(body: unknown, reply: FastifyReply, s: EmbeddingsState): Promise<unknown> {
  const error = checkForward(body);
  if (error) throw error;
  const { model, input } = body as EmbeddingsForward;
  if (!s.engine.models().some((m) => m.id === model)) throw new ModelNotFoundError(`model ${model} is not served here`);
  const res = reply.raw;
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  // One slot, as a chat request takes: the embedding shares the engine's compute with
  // generation, and a busy model answers 503, which sends the gateway to another orchestrator.
  const release = await s.slots(model).acquire(abort.signal);
  s.stats.active++;
  try {
    const out = await s.engine.embed(model, input, abort.signal);
    return {
      object: 'list',
      data: out.vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })),
      model,
      usage: { prompt_tokens: out.promptTokens, total_tokens: out.promptTokens },
    };
  } catch (err) {
    if (err instanceof NotFoundError) throw new ModelNotFoundError(err.message, { cause: err });
    // The gateway went away: nobody to answer.
    if (abort.signal.aborted) return reply.hijack();
    throw err;
  } finally {
    s.stats.active--;
    release();
  }
}

// One embedding context per model, made on the first request and kept: it is a second llama.cpp
// context beside the generation one (node-llama-cpp computes embeddings only on a context made
// for them). Keyed by the model object, so it goes with the model: disposing a model disposes
// its contexts, and a disposed one is made anew.
const contexts = new WeakMap<LlamaModel, Promise<LlamaEmbeddingContext>>();

function embeddingContext(
  model: LlamaModel,
  o: { contextSize: number; threads: number },
): Promise<LlamaEmbeddingContext> {
  const known = contexts.get(model);
  if (known) return known.then((ctx) => (ctx.disposed ? fresh() : ctx));
  return fresh();
  function fresh(): Promise<LlamaEmbeddingContext> {
    // The batch holds a whole input: a model that pools its tokens (mean, CLS) needs every
    // token of an input in one batch.
    const made = model.createEmbeddingContext({
      contextSize: o.contextSize,
      batchSize: o.contextSize,
      threads: o.threads,
    });
    contexts.set(model, made);
    made.catch(() => contexts.delete(model));
    return made;
  }
}

/**
 * The embeddings of `input` on a llama.cpp model (LlamaCppEngine.embed), one input at a time
 * (an embedding context evaluates one sequence). Every input is measured before any is
 * computed, so one too long for the context refuses the request at once. The vectors are
 * scaled to length 1, as OpenAI's and llama-server's are: clients compare them by dot product.
 */
export async function llamaCppEmbed(o: {
  model: LlamaModel;
  /** Tokens per input at most (the model's MAX_MODEL_LEN). */
  contextSize: number;
  threads: number;
  input: readonly string[];
  signal: AbortSignal;
}): Promise<Embedded> {
  const ctx = await embeddingContext(o.model, o);
  const lengths = o.input.map((text) => ctx.calculateInputLength(text));
  lengths.forEach((tokens, i) => {
    // node-llama-cpp keeps one position of the context free.
    if (tokens >= o.contextSize)
      throw new ContextLengthExceededError(
        `input[${i}]: ${tokens} tokens, the model takes ${o.contextSize - 1} per input (MAX_MODEL_LEN)`,
        { param: 'input' },
      );
  });
  const vectors: number[][] = [];
  for (const text of o.input) {
    o.signal.throwIfAborted();
    vectors.push(unitLength((await ctx.getEmbeddingFor(text)).vector));
  }
  return { vectors, promptTokens: lengths.reduce((a, b) => a + b, 0) };
}

function unitLength(v: readonly number[]): number[] {
  const norm = Math.sqrt(v.reduce((sum, x) => sum + x * x, 0));
  return norm > 0 ? v.map((x) => x / norm) : [...v];
}
