// The gateway's route schemas (API.md section B): they validate requests, type the handlers
// and make the OpenAPI document (api/openapi.ts collects every route's schema). The chat body
// itself is llm/protocol/ ChatRequestBody, which orchestrators check too. Response schemas
// also serialize the answer, so each object keeps properties it does not list.

import { type TSchema, Type } from '@sinclair/typebox';
import { ERROR_MESSAGE } from '../../lib/schema-errors.ts';
import { LlmErrorBody, OpenAiErrorBody, TasksErrorBody } from '../../lib/wire-errors.ts';
import { ChatRequestBody } from '../protocol/index.ts';

const open = { additionalProperties: true };
const nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

const Usage = Type.Object(
  { prompt_tokens: Type.Integer(), completion_tokens: Type.Integer(), total_tokens: Type.Integer() },
  open,
);

const FinishReason = Type.Unsafe<'stop' | 'length' | 'tool_calls'>({
  type: 'string',
  enum: ['stop', 'length', 'tool_calls'],
});

const TopLogprob = Type.Object(
  { token: Type.String(), logprob: Type.Number(), bytes: nullable(Type.Array(Type.Integer())) },
  open,
);

const TokenLogprob = Type.Object(
  {
    token: Type.String(),
    logprob: Type.Number(),
    bytes: nullable(Type.Array(Type.Integer())),
    top_logprobs: Type.Array(TopLogprob),
  },
  open,
);

const ToolCall = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('function'),
    function: Type.Object({ name: Type.String(), arguments: Type.String({ description: 'JSON text' }) }, open),
  },
  open,
);

// Every field a client reads is listed, nullable ones as such: the serializer writes only the
// properties a schema lists (an unlisted one goes out as JSON.stringify gives it) and would
// write a null listed as a string as "".
/** A non-streaming answer. A streaming one is text/event-stream: chat.completion.chunk events, then `data: [DONE]`. */
const ChatCompletion = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('chat.completion'),
    created: Type.Integer(),
    model: Type.String(),
    choices: Type.Array(
      Type.Object(
        {
          index: Type.Integer(),
          message: Type.Object(
            {
              role: Type.Literal('assistant'),
              content: nullable(Type.String({ description: 'null when the choice only called tools' })),
              refusal: Type.Null(),
              tool_calls: Type.Optional(Type.Array(ToolCall)),
            },
            open,
          ),
          logprobs: nullable(
            Type.Object(
              { content: Type.Array(TokenLogprob), refusal: Type.Null() },
              { ...open, description: 'null unless logprobs: true' },
            ),
          ),
          finish_reason: FinishReason,
        },
        open,
      ),
    ),
    usage: Usage,
  },
  { ...open, description: 'With stream: true, text/event-stream of chat.completion.chunk events, then data: [DONE]' },
);

/** Every error of the LLM routes has OpenAI's shape; under /llm with @livepeer/ai's `detail` beside it. */
export const openAiErrors = { '4xx': OpenAiErrorBody, '5xx': OpenAiErrorBody };
const llmErrors = { '4xx': LlmErrorBody, '5xx': LlmErrorBody };

export const chatRoute = (summary: string, opts: { livepeer: boolean }) => ({
  summary,
  description:
    'An OpenAI-compatible chat completion, priced per max_tokens (x n) at the chosen orchestrator (API.md section B). Unknown fields are ignored and named in the x-mediaplane-ignored-fields header.',
  body: ChatRequestBody,
  response: { 200: ChatCompletion, ...(opts.livepeer ? llmErrors : openAiErrors) },
});

const Model = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('model'),
    created: Type.Integer(),
    owned_by: Type.String(),
    warm: Type.Boolean({ description: 'Loaded on at least one orchestrator' }),
    priced: Type.Boolean({
      description:
        'An orchestrator that may answer it (at or under MEDIAPLANE_GATEWAY_MAX_PRICE_PER_TOKEN) charges per token, so its requests reserve credit (docs/llm.md, "Pricing and credits"); false: they cost nothing',
    }),
  },
  open,
);

export const modelsRoute = {
  summary: 'The models the orchestrators offer, warm or not',
  response: {
    200: Type.Object({ object: Type.Literal('list'), data: Type.Array(Model) }, open),
    ...openAiErrors,
  },
};

export const ModelParams = Type.Object({
  id: Type.String({ description: '<org>/<model_name>; the openai SDK sends the slash as %2F' }),
});

export const modelRoute = {
  summary: 'One model the orchestrators offer; 404 model_not_found when none does',
  params: ModelParams,
  response: { 200: Model, ...openAiErrors },
};

export const RegistrationBody = Type.Object(
  {
    url: Type.String({
      pattern: '^https?://[^\\s]+$',
      description: "The orchestrator's base URL",
      [ERROR_MESSAGE]: 'must be the http(s) base URL of the orchestrator',
    }),
  },
  { [ERROR_MESSAGE]: { type: 'must be a JSON object {url}' } },
);

export const registrationRoute = {
  summary: 'An orchestrator registers itself (Authorization: Bearer <the shared orchestrator secret>)',
  body: RegistrationBody,
  response: { 204: Type.Null({ description: 'Registered' }), ...llmErrors },
};

export const LedgerQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 1000,
      default: 100,
      description: 'Entries, newest first',
      [ERROR_MESSAGE]: 'must be an integer from 1 to 1000',
    }),
  ),
});

const LedgerEntry = Type.Object(
  {
    id: Type.String(),
    createdAt: Type.String({ format: 'date-time' }),
    kind: Type.Unsafe<'charge' | 'credit'>({ type: 'string', enum: ['charge', 'credit'] }),
    status: Type.Unsafe<'reserved' | 'settled' | 'released'>({
      type: 'string',
      enum: ['reserved', 'settled', 'released'],
    }),
    amountUsd: Type.Number(),
    model: nullable(Type.String()),
    requestId: nullable(Type.String()),
    maxTokens: nullable(Type.Integer()),
    completionTokens: nullable(Type.Integer()),
    pricePerToken: nullable(Type.Number()),
    note: nullable(Type.String()),
  },
  open,
);

export const ledgerRoute = {
  summary: "The key owner's LLM balance and ledger (credits and charges, newest first)",
  querystring: LedgerQuery,
  // The ledger belongs to the owner-facing /api, so it answers in that API's error shape.
  response: {
    200: Type.Object({ owner: Type.String(), balanceUsd: Type.Number(), entries: Type.Array(LedgerEntry) }, open),
    '4xx': TasksErrorBody,
    '5xx': TasksErrorBody,
  },
};
