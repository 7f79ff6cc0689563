// The wire between gateways and orchestrators, and the chat request both check. Gateway and
// orchestrator talk over HTTP only (STYLE.md: separate processes at scale); this module holds
// the shapes and the one validation function they share, no state.

import { Type, type Static, type TNever, type TOptional } from '@sinclair/typebox';
import { ERROR_MESSAGE, type RuleMessages } from '../lib/schema-errors.ts';
import { schemaChecker } from '../lib/schema-validator.ts';

/** `developer` arrives as `system` (toChatRequest): engines see these four. */
export type Role = 'system' | 'user' | 'assistant' | 'tool';

/** A function call the assistant made (OpenAI `message.tool_calls[]`). `arguments` is JSON text. */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/**
 * One message as engines see it: `content` is always a string (text parts joined, null as "");
 * `tool_calls` on an assistant message, `tool_call_id` on a tool message; `name` kept.
 */
export interface ChatMessage {
  role: Role;
  content: string;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
}

/** A JSON Schema as the caller sent it (checked per engine: a keyword it cannot enforce is a 400). */
export type JsonSchema = Record<string, unknown>;

/** A function the model may call (OpenAI `tools[]`, type function). */
export interface ToolDef {
  type: 'function';
  function: { name: string; description?: string; parameters?: JsonSchema; strict?: boolean };
}

/** `auto` and `required` as OpenAI; `none` never reaches an engine (tools are dropped). */
export type ToolChoice = 'auto' | 'required' | { type: 'function'; function: { name: string } };

/** `text` never reaches an engine (it is the default, dropped). */
export type ResponseFormat =
  | { type: 'json_object' }
  | {
      type: 'json_schema';
      json_schema: { name: string; description?: string; schema?: JsonSchema; strict?: boolean };
    };

/**
 * What a request asks of an engine beyond plain generation. An orchestrator advertises the
 * features its engine has (Capabilities.features); the gateway sends a request only to one that
 * has all the request needs (requiredFeatures), and answers 400 naming the field when none does.
 */
export type Feature =
  | 'json_object'
  | 'json_schema'
  | 'tools'
  | 'logprobs'
  | 'n'
  | 'logit_bias'
  | 'completions'
  | 'embeddings';

/** A validated chat request, as the gateway forwards it (OpenAI field names). */
export interface ChatRequest {
  model: string;
  /** Exactly one of messages (chat) and prompt (POST /v1/completions: raw text, no chat template). */
  messages: ChatMessage[];
  prompt?: string;
  stream: boolean;
  /** Prompt + max_tokens above the model's context is refused (400 context_length_exceeded). */
  max_tokens: number;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  stop?: string[];
  seed?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  /** 2..8 when set; absent means 1. */
  n?: number;
  /** Per-token log probabilities: true, with top_logprobs (0..20) alternatives each. */
  logprobs?: boolean;
  top_logprobs?: number;
  /** Token id (decimal string) to a bias from -100 to 100. */
  logit_bias?: Record<string, number>;
  response_format?: ResponseFormat;
  /** Absent when none were given, the list was empty, or tool_choice was "none". */
  tools?: ToolDef[];
  tool_choice?: ToolChoice;
  parallel_tool_calls?: boolean;
  /** stream_options.include_usage: the gateway streams the usage chunk only when asked (never forwarded). */
  include_usage?: boolean;
  /** Mediaplane extension: the caller's price ceiling in USD per output token. */
  max_price_per_token?: number;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls';
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** One token's log probability, OpenAI's `logprobs.content[]` entry. */
export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] | null }>;
}

/** What an orchestrator advertises at GET <base>/capabilities. */
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

/** `<org>/<model_name>` as on the public model hub. */
export const MODEL_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;

// OpenAI parameters this service cannot honour: refused by name rather than silently dropped.
const UNSUPPORTED = [
  'logit_bias',
  'logprobs',
  'top_logprobs',
  'tools',
  'tool_choice',
  'functions',
  'function_call',
  'response_format',
  'audio',
  'modalities',
  'prediction',
] as const;

/** The wording of a number field: `must be a number`, `must be an integer`, `must be between 0 and 2 (got 3)`. */
function numberWording(min: number, max: number): RuleMessages {
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
function bounded(min: number, max: number, opts: { integer?: boolean; description: string }) {
  const kind = opts.integer
    ? Type.Integer({ minimum: min, maximum: max })
    : Type.Number({ minimum: min, maximum: max });
  return Type.Optional(
    Type.Union([kind, Type.Null()], { description: opts.description, [ERROR_MESSAGE]: numberWording(min, max) }),
  );
}

/** The UNSUPPORTED fields: any value is refused, naming the field. */
function unsupportedFields(): Record<(typeof UNSUPPORTED)[number], TOptional<TNever>> {
  const refused = () => Type.Optional(Type.Never({ [ERROR_MESSAGE]: 'not supported by this service' }));
  return Object.fromEntries(UNSUPPORTED.map((k) => [k, refused()])) as Record<
    (typeof UNSUPPORTED)[number],
    TOptional<TNever>
  >;
}

const ChatMessageBody = Type.Object(
  {
    role: Type.Union([Type.Literal('system'), Type.Literal('user'), Type.Literal('assistant')], {
      [ERROR_MESSAGE]: 'must be one of system, user, assistant',
    }),
    content: Type.String({ [ERROR_MESSAGE]: 'must be a string' }),
    name: Type.Optional(Type.Unknown({ description: 'Accepted and ignored' })),
  },
  {
    additionalProperties: false,
    [ERROR_MESSAGE]: { type: 'must be an object {role, content}', additionalProperties: 'unknown field' },
  },
);

/**
 * The chat request body of POST /llm and /v1/chat/completions (API.md section B), also what a
 * gateway forwards to an orchestrator. The schema is the rules: the gateway's routes validate
 * with it, an orchestrator checks with it (validateChatRequest), and its own wording
 * (ERROR_MESSAGE) keeps the messages clients know, each naming the field and the rule.
 */
export const ChatRequestBody = Type.Object(
  {
    model: Type.String({
      pattern: MODEL_ID_RE.source,
      description: '<org>/<model_name>, as on the public model hub',
      [ERROR_MESSAGE]: 'required, must be <org>/<model_name> (e.g. karpathy/stories260K)',
    }),
    messages: Type.Array(ChatMessageBody, { minItems: 1, [ERROR_MESSAGE]: 'required, must be a non-empty array' }),
    stream: Type.Optional(
      Type.Union([Type.Boolean(), Type.Null()], {
        description: 'Server-sent events (default false)',
        [ERROR_MESSAGE]: 'must be a boolean',
      }),
    ),
    max_tokens: bounded(1, 1_000_000, {
      integer: true,
      description:
        "The price basis; the gateway's default when unset; above the model's context: 400 context_length_exceeded",
    }),
    max_completion_tokens: bounded(1, 1_000_000, { integer: true, description: 'max_tokens under its newer name' }),
    temperature: bounded(0, 2, { description: 'Sampling temperature' }),
    top_p: bounded(0, 1, { description: 'Nucleus sampling' }),
    // -1 means "off" in vLLM's API, and @livepeer/ai sends it by default.
    top_k: Type.Optional(
      Type.Union([Type.Literal(-1), Type.Integer({ minimum: 0, maximum: 1_000_000 }), Type.Null()], {
        description: 'Top-k sampling; -1: off',
        [ERROR_MESSAGE]: numberWording(0, 1_000_000),
      }),
    ),
    stop: Type.Optional(
      Type.Union([Type.String(), Type.Array(Type.String({ minLength: 1 }), { maxItems: 4 }), Type.Null()], {
        description: 'Where generation stops',
        [ERROR_MESSAGE]: 'must be a string or an array of at most 4 non-empty strings',
      }),
    ),
    seed: bounded(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, {
      integer: true,
      description: 'Seeded sampling; unseeded requests are random',
    }),
    presence_penalty: bounded(-2, 2, { description: 'Presence penalty' }),
    frequency_penalty: bounded(-2, 2, { description: 'Frequency penalty' }),
    max_price_per_token: bounded(0, 1, {
      description: "Mediaplane extension: the caller's price ceiling, USD per output token",
    }),
    n: Type.Optional(Type.Union([Type.Literal(1), Type.Null()], { [ERROR_MESSAGE]: 'only 1 is supported' })),
    user: Type.Optional(Type.String({ description: 'Accepted and ignored', [ERROR_MESSAGE]: 'must be a string' })),
    stream_options: Type.Optional(
      Type.Union([Type.Object({ include_usage: Type.Optional(Type.Unknown()) }), Type.Null()], {
        [ERROR_MESSAGE]: 'must be an object',
      }),
    ),
    ...unsupportedFields(),
  },
  {
    additionalProperties: false,
    [ERROR_MESSAGE]: { type: 'must be a JSON object', additionalProperties: 'unknown field' },
  },
);
export type ChatRequestBody = Static<typeof ChatRequestBody>;

/**
 * The request a gateway forwards, from a body that fits ChatRequestBody: what the schema cannot
 * say is said here (max_tokens before max_completion_tokens, then the default; top_k -1 and
 * null values mean unset; a stop string is a list of one).
 */
export function toChatRequest(body: ChatRequestBody, opts: { defaultMaxTokens: number }): ChatRequest {
  const req: ChatRequest = {
    model: body.model,
    messages: body.messages.map((m) => ({ role: m.role, content: m.content })),
    stream: body.stream === true,
    max_tokens: body.max_tokens ?? body.max_completion_tokens ?? opts.defaultMaxTokens,
  };
  const optional = {
    temperature: body.temperature,
    top_p: body.top_p,
    top_k: body.top_k === -1 ? undefined : body.top_k,
    seed: body.seed,
    presence_penalty: body.presence_penalty,
    frequency_penalty: body.frequency_penalty,
    max_price_per_token: body.max_price_per_token,
  };
  for (const [k, v] of Object.entries(optional)) if (typeof v === 'number') Object.assign(req, { [k]: v });
  if (typeof body.stop === 'string') req.stop = [body.stop];
  else if (Array.isArray(body.stop)) req.stop = body.stop;
  return req;
}

const checkChatBody = schemaChecker()(ChatRequestBody);

/**
 * Checks a chat request body outside a route (an orchestrator's): every problem is reported,
 * each naming the field path and the rule. Throws ValidationError (the gateway answers 400
 * and forwards nothing).
 */
export function validateChatRequest(body: unknown, opts: { defaultMaxTokens: number }): ChatRequest {
  const error = checkChatBody(body);
  if (error) throw error;
  return toChatRequest(body as ChatRequestBody, opts);
}

/** Builds a `chat.completion.chunk` event body (the id and created come from the gateway). */
export function chunk(opts: {
  id: string;
  created: number;
  model: string;
  delta: { role?: 'assistant'; content?: string };
  finish: FinishReason | null;
}): string {
  return JSON.stringify({
    id: opts.id,
    object: 'chat.completion.chunk',
    created: opts.created,
    model: opts.model,
    choices: [{ index: 0, delta: opts.delta, finish_reason: opts.finish }],
  });
}

/**
 * The wire form (`data: {chunk}\n\n`) of a stream's chunks, with everything but the delta
 * serialised once: byte for byte what formatSse({ data: chunk(...) }) gives, without a
 * JSON.stringify of the whole object for every token.
 */
export function chunkEncoder(meta: {
  id: string;
  created: number;
  model: string;
}): (delta: { role?: 'assistant'; content?: string }, finish: FinishReason | null) => string {
  const head = `data: {"id":${JSON.stringify(meta.id)},"object":"chat.completion.chunk","created":${JSON.stringify(meta.created)},"model":${JSON.stringify(meta.model)},"choices":[{"index":0,"delta":`;
  return (delta, finish) => `${head}${JSON.stringify(delta)},"finish_reason":${JSON.stringify(finish)}}]}\n\n`;
}

export function usageChunk(opts: { id: string; created: number; model: string; usage: Usage }): string {
  return JSON.stringify({
    id: opts.id,
    object: 'chat.completion.chunk',
    created: opts.created,
    model: opts.model,
    choices: [],
    usage: opts.usage,
  });
}

/** The header a gateway sends with the id it wants on every chunk (so chunks relay verbatim). */
export const REQUEST_ID_HEADER = 'x-mediaplane-request-id';

/**
 * The most a gateway's forwarded chat body may exceed the body it accepted. The gateway sends
 * its validated request, re-serialised: `stream` and `max_tokens` are always written, a `stop`
 * string becomes an array, and a number may be written out longer (`9e15` as 16 digits, at
 * most 24 characters for each of the seven numeric fields); strings of valid UTF-8 never grow.
 * An orchestrator accepts this much over its MEDIAPLANE_BODY_LIMIT_BYTES, so a body a gateway
 * with the same limit accepted is not refused as too large on its way (issue #15).
 */
export const FORWARD_OVERHEAD_BYTES = 1024;

/** The chat body an orchestrator accepts from a gateway whose clients may send `bodyLimitBytes`. */
export function forwardedBodyLimit(bodyLimitBytes: number): number {
  return bodyLimitBytes + FORWARD_OVERHEAD_BYTES;
}

/**
 * Why `maxTokens` cannot be generated with `contextLength` tokens per request (the whole
 * context, so even an empty prompt leaves no room for that many), or undefined when it can.
 * Answered 400 `context_length_exceeded` by the gateway and the orchestrator (issue #15).
 */
export function maxTokensProblem(maxTokens: number, contextLength: number | undefined): string | undefined {
  if (contextLength === undefined || maxTokens <= contextLength) return undefined;
  return `max_tokens: must be at most ${contextLength}, the model's context per request (MAX_MODEL_LEN), prompt included (got ${maxTokens})`;
}
