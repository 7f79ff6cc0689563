// The gateway's route schemas (API.md section B): they validate requests, type the handlers
// and make the OpenAPI document (api/openapi.ts collects every route's schema). The chat body
// itself is llm/protocol.ts ChatRequestBody, which orchestrators check too. Response schemas
// also serialize the answer, so each object keeps properties it does not list.

import { type TSchema, Type } from '@sinclair/typebox';
import { ERROR_MESSAGE } from '../../lib/schema-errors.ts';
import { OpenAiErrorBody, TasksErrorBody } from '../../lib/wire-errors.ts';
import { ChatRequestBody } from '../protocol.ts';

const open = { additionalProperties: true };
const nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

const Usage = Type.Object(
  { prompt_tokens: Type.Integer(), completion_tokens: Type.Integer(), total_tokens: Type.Integer() },
  open,
);

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
          message: Type.Object({ role: Type.Literal('assistant'), content: Type.String() }, open),
          finish_reason: Type.Unsafe<'stop' | 'length'>({ type: 'string', enum: ['stop', 'length'] }),
        },
        open,
      ),
    ),
    usage: Usage,
  },
  { ...open, description: 'With stream: true, text/event-stream of chat.completion.chunk events, then data: [DONE]' },
);

/** Every error of the LLM routes has OpenAI's shape. */
const openAiErrors = { '4xx': OpenAiErrorBody, '5xx': OpenAiErrorBody };

export const chatRoute = (summary: string) => ({
  summary,
  description:
    'An OpenAI-compatible chat completion, priced per max_tokens at the chosen orchestrator (API.md section B).',
  body: ChatRequestBody,
  response: { 200: ChatCompletion, ...openAiErrors },
});

export const modelsRoute = {
  summary: 'The models the orchestrators offer, warm or not',
  response: {
    200: Type.Object(
      {
        object: Type.Literal('list'),
        data: Type.Array(
          Type.Object(
            {
              id: Type.String(),
              object: Type.Literal('model'),
              created: Type.Integer(),
              owned_by: Type.String(),
              warm: Type.Boolean({ description: 'Loaded on at least one orchestrator' }),
            },
            open,
          ),
        ),
      },
      open,
    ),
    ...openAiErrors,
  },
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
  response: { 204: Type.Null({ description: 'Registered' }), ...openAiErrors },
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
