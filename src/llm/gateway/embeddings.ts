// POST /v1/embeddings (issue #17), OpenAI's shape: `input` a string or a list of strings, the
// vectors as floats or base64, priced on input tokens. Sent to an orchestrator offering the
// model with the `embeddings` feature, failing over to the next on a 5xx or no answer, as
// chat does before its first token (an embedding's answer is all one piece): the same failover
// loop (failover.ts), given how embeddings are charged and asked.

import { randomUUID } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  BadRequestError,
  MediaplaneError,
  PaymentRequiredError,
  TimeoutError,
  UpstreamFailedError,
  UpstreamUnavailableError,
} from '../../lib/errors.ts';
import { ERROR_MESSAGE } from '../../lib/schema-errors.ts';
import { OpenAiErrorBody } from '../../lib/wire-errors.ts';
import type { Principal } from '../../accounts/index.ts';
import { beforeCharge } from './before-charge.ts';
import { selectCandidates } from './candidates.ts';
import type { Billing } from './billing.ts';
import { sharedFields, unknownFields } from '../protocol/index.ts';
import type { CompleteDeps } from './complete.ts';
import { clientGone, type GatewayRoutes, listOf, nameIgnored } from './serve.ts';
import { refusal } from './errors.ts';
import { failover, type Tried } from './failover.ts';
import type { Candidate } from './pool.ts';
import { postForJson } from './upstream.ts';

/** OpenAI's limit on the inputs of one request. */
const MAX_INPUTS = 2048;

// Token arrays (OpenAI's other `input` forms) are refused: token ids belong to one tokenizer,
// and those clients send (LangChain's OpenAIEmbeddings tokenizes with tiktoken) mean other
// tokens to these models.
const inputWording = `required, must be a non-empty string or an array of 1 to ${MAX_INPUTS} non-empty strings (token arrays are not supported: send the text)`;

export const EmbeddingsBody = Type.Object(
  {
    model: sharedFields.model,
    input: Type.Union(
      [Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }), { minItems: 1, maxItems: MAX_INPUTS })],
      { description: 'The text to embed: a string, or a list of them', [ERROR_MESSAGE]: inputWording },
    ),
    encoding_format: Type.Optional(
      Type.Union([Type.Literal('float'), Type.Literal('base64'), Type.Null()], {
        description: 'float (default), or base64 of the little-endian float32 values',
        [ERROR_MESSAGE]: 'must be "float" or "base64"',
      }),
    ),
    dimensions: Type.Optional(
      Type.Null({
        description: "Refused: vectors have the model's own size",
        [ERROR_MESSAGE]: "not supported: the vectors have the model's own size",
      }),
    ),
    user: sharedFields.user,
  },
  { [ERROR_MESSAGE]: { type: 'must be a JSON object' } },
);
export type EmbeddingsBody = Static<typeof EmbeddingsBody>;

const open = { additionalProperties: true };

export const embeddingsRoute = {
  summary: 'Embeddings (OpenAI-compatible), priced on input tokens',
  description:
    "Vectors of the model's own size, scaled to length 1; charged prompt_tokens x the chosen orchestrator's price per token (API.md section B).",
  body: EmbeddingsBody,
  response: {
    200: Type.Object(
      {
        object: Type.Literal('list'),
        data: Type.Array(
          Type.Object(
            {
              object: Type.Literal('embedding'),
              index: Type.Integer(),
              // No `type`: serialized as it is (an array of floats, or a base64 string), without
              // a check of every number on the way out.
              embedding: Type.Unsafe<number[] | string>({ description: 'floats, or base64 (encoding_format)' }),
            },
            open,
          ),
        ),
        model: Type.String(),
        usage: Type.Object({ prompt_tokens: Type.Integer(), total_tokens: Type.Integer() }, open),
      },
      open,
    ),
    '4xx': OpenAiErrorBody,
    '5xx': OpenAiErrorBody,
  },
};

/** The orchestrator's answer (orchestrator/embeddings.ts): floats, in input order. */
interface Embedded {
  data: Array<{ index: number; embedding: number[] }>;
  usage: { prompt_tokens: number };
}

/** Registers POST /v1/embeddings on a scope with the LLM error handler. */
export function registerEmbeddings(scope: FastifyInstance, routes: GatewayRoutes): void {
  scope.post<{ Body: EmbeddingsBody }>(
    '/v1/embeddings',
    { schema: embeddingsRoute, onRequest: routes.auth.hook },
    (req, reply) => embeddings(req, reply, routes),
  );
}

async function embeddings(
  req: FastifyRequest<{ Body: EmbeddingsBody }>,
  reply: FastifyReply,
  routes: GatewayRoutes,
): Promise<unknown> {
  const { body } = req;
  const input = listOf(body.input);
  nameIgnored(reply.raw, unknownFields(body, EmbeddingsBody));
  const key = routes.auth.of(req);
  const { billing, pool } = routes.complete;
  const candidates = await beforeCharge({ billing, pool, key, model: body.model }, () =>
    candidatesFor(routes.complete, body.model),
  );
  const gone = clientGone(reply.raw);
  const out = await firstAnswer(routes, {
    owner: key.owner,
    key,
    model: body.model,
    input,
    candidates,
    gone,
  });
  return {
    object: 'list',
    data: out.data.map((d, index) => ({
      object: 'embedding',
      index,
      embedding: body.encoding_format === 'base64' ? base64(d.embedding) : d.embedding,
    })),
    model: body.model,
    usage: { prompt_tokens: out.usage.prompt_tokens, total_tokens: out.usage.prompt_tokens },
  };
}

/** OpenAI's base64 form: the float32 values, little-endian, one after another. */
export function base64(vector: readonly number[]): string {
  const buf = Buffer.alloc(vector.length * 4);
  for (const [i, x] of vector.entries()) buf.writeFloatLE(x, i * 4);
  return buf.toString('base64');
}

/**
 * The orchestrators that can answer, best first (candidates.ts): those offering the model whose
 * engine computes embeddings, under the operator's price ceiling; some offer the model, but
 * none computes embeddings: 400 naming `model`.
 */
function candidatesFor(deps: CompleteDeps, model: string): Promise<Candidate[]> {
  return selectCandidates(deps.pool, {
    model,
    able: (c) => c.features.includes('embeddings'),
    unable: () =>
      new BadRequestError(`model: no orchestrator computes embeddings with ${model} (its engines generate text only)`, {
        param: 'model',
      }),
    ceiling: deps.maxPricePerToken,
    doing: `computes embeddings with ${model}`,
  });
}

/**
 * The most tokens `input` can take on `c`, reserved before asking (the count comes with the
 * answer): a token covers at least one byte of text, plus up to three the tokenizer adds (a
 * leading space, the beginning and end markers), and an input longer than the model's context
 * is refused, not charged. Settled at the answer's prompt_tokens (never above the bound).
 */
function tokenBound(input: readonly string[], c: Candidate): number {
  const perInput = (text: string) => Buffer.byteLength(text) + 3;
  return input.reduce((sum, text) => sum + Math.min(perInput(text), c.contextLength ?? Number.POSITIVE_INFINITY), 0);
}

interface Attempted {
  owner: string;
  key: Principal;
  model: string;
  input: string[];
  candidates: Candidate[];
  gone: AbortSignal;
}

/** Tries the candidates in order (failover.ts); the first answer is charged and returned. */
async function firstAnswer(routes: GatewayRoutes, a: Attempted): Promise<Embedded> {
  const deps = routes.complete;
  const requestId = `embd-${randomUUID()}`;
  let answered: Embedded | undefined;
  const ended = await failover(
    deps,
    { candidates: a.candidates, model: a.model, requestId, clientGone: a.gone },
    {
      charge: (c) => openCharge(deps.billing, { ...a, candidate: c, requestId }),
      ask: (c) => ask(c, { ...a, requestId }, deps.firstTokenTimeoutMs),
      deliver: async (out: Embedded, charge) => {
        await charge.settle(out.usage.prompt_tokens);
        answered = out;
        const tokens = out.usage.prompt_tokens;
        return { outcome: 'completed', usage: { prompt_tokens: tokens, completion_tokens: 0, total_tokens: tokens } };
      },
    },
  );
  if (ended.outcome === 'completed' && answered) return answered;
  if (ended.outcome === 'failed' || ended.outcome === 'refused') throw ended.error;
  // No one is left to read it: what the log says of a client gone mid-request.
  throw new UpstreamUnavailableError('the client went away before the answer');
}

interface EmbeddingsCharge {
  settle(promptTokens: number): Promise<void>;
  release(): Promise<void>;
}

/**
 * The charge of one attempt (chat's billing.ts, with the key's tokens and budget limits): a
 * free orchestrator's zero charge is written once the answer is out; a priced one reserves
 * tokenBound x price first (402 when the balance cannot cover it) and settles usage-based at
 * the tokens counted, whatever the gateway's setting for chat: the bound is a bound, not a price basis.
 */
async function openCharge(
  billing: Billing,
  o: { owner: string; key: Principal; model: string; input: string[]; candidate: Candidate; requestId: string },
): Promise<EmbeddingsCharge | MediaplaneError> {
  const c = o.candidate;
  return billing.open(
    {
      owner: o.owner,
      key: o.key,
      maxTokens: tokenBound(o.input, c),
      pricePerToken: c.pricePerToken,
      model: o.model,
      orchestrator: c.orchestrator.url,
      requestId: o.requestId,
    },
    {
      usageBased: true,
      tooLow: (charge) =>
        new PaymentRequiredError(
          `balance too low for up to ${charge.maxTokens} input tokens at ${c.pricePerToken} USD per token; add credits or send less input`,
        ),
    },
  );
}

/** One orchestrator's answer, or the error that says why not. */
async function ask(c: Candidate, a: Attempted & { requestId: string }, timeoutMs: number): Promise<Tried<Embedded>> {
  // The answer comes whole: the first-token timeout bounds all of it.
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    const res = await postForJson(`${c.base}/v1/embeddings`, JSON.stringify({ model: a.model, input: a.input }), {
      secret: c.secret,
      requestId: a.requestId,
      signal: AbortSignal.any([a.gone, timeout]),
    });
    if (!res.ok) return refusal(res);
    const out = parsed(res.text);
    if (!Array.isArray(out.data) || out.data.length !== a.input.length || typeof out.usage?.prompt_tokens !== 'number')
      throw new UpstreamFailedError('the orchestrator answered embeddings in an unknown shape');
    return { kind: 'answered', answer: { data: [...out.data].sort((x, y) => x.index - y.index), usage: out.usage } };
  } catch (err) {
    if (err instanceof MediaplaneError) return { kind: 'failed', error: err };
    if (timeout.aborted) return { kind: 'failed', error: new TimeoutError(`no answer within ${timeoutMs} ms`) };
    return {
      kind: 'failed',
      error: new UpstreamUnavailableError(`unreachable: ${(err as Error).message}`, { cause: err }),
    };
  }
}

function parsed(text: string): Partial<Embedded> {
  try {
    return JSON.parse(text) as Partial<Embedded>;
  } catch {
    return {};
  }
}
