// The wire between gateways and orchestrators, and the chat request both check. Gateway and
// orchestrator talk over HTTP only (STYLE.md: separate processes at scale); this module holds
// the shapes and the one validation function they share, no state.

import { type Static, type TArray, type TObject, Type, type TUnsafe } from '@sinclair/typebox';
import { ValidationError } from '../lib/errors.ts';
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
export type Feature = (typeof FEATURES)[number];

/** Every feature there is (an engine's `features` is these, or those it has of them). */
export const FEATURES = [
  'json_object',
  'json_schema',
  'tools',
  'logprobs',
  'n',
  'logit_bias',
  'completions',
  'embeddings',
] as const;

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

/** `<org>/<model_name>` as on the public model hub: the ids an orchestrator offers. */
export const MODEL_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;

/** OpenAI's rule for function and json_schema names. */
const NameBody = Type.String({
  pattern: '^[a-zA-Z0-9_-]{1,64}$',
  [ERROR_MESSAGE]: 'required, must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -',
});

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
function orNull<T extends TObject | TArray>(schema: T): TUnsafe<Static<T> | null> {
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [schema.type, 'null'] });
}

/**
 * Known OpenAI fields this service cannot honour: any value but null is refused by name (a
 * behaviour asked for and silently not given would be worse than the 400).
 */
function refused(why: string) {
  return Type.Optional(Type.Null({ description: `Refused: ${why}`, [ERROR_MESSAGE]: why }));
}

/** A JSON Schema object, as the caller sent it (each engine checks the keywords it can enforce). */
const JsonSchemaBody = Type.Unsafe<JsonSchema>({
  type: 'object',
  [ERROR_MESSAGE]: { type: 'must be a JSON Schema object' },
});

// Parts other than text are accepted by the schema and refused by toChatRequest, which can
// say what the model cannot take (images, audio, files) at the part's own path.
const ContentPart = Type.Object(
  {
    type: Type.Union(
      (['text', 'refusal', 'image_url', 'input_audio', 'file'] as const).map((t) => Type.Literal(t)),
      { [ERROR_MESSAGE]: 'must be "text" (also "refusal" on an assistant message)' },
    ),
    text: Type.Optional(Type.String({ [ERROR_MESSAGE]: 'must be a string' })),
    refusal: Type.Optional(Type.String({ [ERROR_MESSAGE]: 'must be a string' })),
  },
  { [ERROR_MESSAGE]: { type: 'must be a content part {type: "text", text}' } },
);

const ToolCallBody = Type.Object(
  {
    id: Type.String({ [ERROR_MESSAGE]: 'required, must be a string' }),
    type: Type.Literal('function', { [ERROR_MESSAGE]: 'must be "function"' }),
    function: Type.Object(
      {
        name: Type.String({ [ERROR_MESSAGE]: 'required, must be a string' }),
        arguments: Type.String({ [ERROR_MESSAGE]: 'required, must be a string (JSON text)' }),
      },
      { [ERROR_MESSAGE]: { type: 'must be an object {name, arguments}' } },
    ),
  },
  { [ERROR_MESSAGE]: { type: 'must be a tool call {id, type: "function", function: {name, arguments}}' } },
);

// Unknown properties of a message (the `refusal`, `annotations` or `audio` an SDK echoes
// back with an assistant message) are ignored, as vLLM ignores them.
const ChatMessageBody = Type.Object(
  {
    role: Type.Union(
      (['system', 'developer', 'user', 'assistant', 'tool'] as const).map((r) => Type.Literal(r)),
      { [ERROR_MESSAGE]: 'must be one of system, developer, user, assistant, tool' },
    ),
    content: Type.Optional(
      Type.Unsafe<string | null | Array<Static<typeof ContentPart>>>({
        type: ['string', 'array', 'null'],
        items: ContentPart,
        description: 'A string, or an array of text parts (joined with "\\n"); null on an assistant message',
        [ERROR_MESSAGE]: { type: 'must be a string or an array of content parts' },
      }),
    ),
    name: Type.Optional(Type.String({ [ERROR_MESSAGE]: 'must be a string' })),
    tool_calls: Type.Optional(
      orNull(Type.Array(ToolCallBody, { [ERROR_MESSAGE]: { type: 'must be an array of tool calls' }, maxItems: 128 })),
    ),
    tool_call_id: Type.Optional(Type.String({ [ERROR_MESSAGE]: 'must be a string' })),
  },
  { [ERROR_MESSAGE]: { type: 'must be an object {role, content}' } },
);

const ToolBody = Type.Object(
  {
    type: Type.Literal('function', { [ERROR_MESSAGE]: 'must be "function" (the only tool type here)' }),
    function: Type.Object(
      {
        name: NameBody,
        description: Type.Optional(Type.String({ [ERROR_MESSAGE]: 'must be a string' })),
        parameters: Type.Optional(JsonSchemaBody),
        strict: flag('Arguments follow parameters exactly (they always do here)'),
      },
      { [ERROR_MESSAGE]: { type: 'must be an object {name, description?, parameters?}' } },
    ),
  },
  { [ERROR_MESSAGE]: { type: 'must be a tool {type: "function", function: {name, parameters?}}' } },
);

const ToolChoiceBody = Type.Optional(
  Type.Union(
    [
      Type.Literal('none'),
      Type.Literal('auto'),
      Type.Literal('required'),
      Type.Object({
        type: Type.Literal('function'),
        function: Type.Object({ name: Type.String() }),
      }),
      Type.Null(),
    ],
    {
      description: '"none" drops the tools; "required" or a named function forces one call',
      [ERROR_MESSAGE]: 'must be "none", "auto", "required" or {"type": "function", "function": {"name": "..."}}',
    },
  ),
);

const ResponseFormatBody = orNull(
  Type.Object(
    {
      type: Type.Union([Type.Literal('text'), Type.Literal('json_object'), Type.Literal('json_schema')], {
        [ERROR_MESSAGE]: 'required, must be one of "text", "json_object", "json_schema"',
      }),
      json_schema: Type.Optional(
        Type.Object(
          {
            name: NameBody,
            description: Type.Optional(Type.String({ [ERROR_MESSAGE]: 'must be a string' })),
            schema: Type.Optional(JsonSchemaBody),
            strict: flag('The output matches the schema exactly (it always does here)'),
          },
          { [ERROR_MESSAGE]: { type: 'must be an object {name, schema, strict?}' } },
        ),
      ),
    },
    {
      description: 'Structured output: the answer always parses (json_object) and matches the schema (json_schema)',
      [ERROR_MESSAGE]: { type: 'must be an object {type: "text" | "json_object" | "json_schema", json_schema?}' },
    },
  ),
);

const LogitBiasBody = Type.Unsafe<Record<string, number> | null>({
  type: ['object', 'null'],
  propertyNames: { pattern: '^[0-9]{1,10}$' },
  additionalProperties: { type: 'number', minimum: -100, maximum: 100, [ERROR_MESSAGE]: numberWording(-100, 100) },
  maxProperties: 300,
  description: 'Token id (a decimal string) to a bias from -100 (never) to 100 (always); at most 300',
  [ERROR_MESSAGE]: {
    type: 'must be an object of token ids to biases',
    pattern: 'its keys must be token ids as decimal strings (e.g. "50256")',
    propertyNames: 'its keys must be token ids as decimal strings (e.g. "50256")',
    maxProperties: 'must have at most 300 entries',
  },
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

/** Every field of the chat body but `messages` (which the forwarded form relaxes). */
const chatFields = {
  model: sharedFields.model,
  stream: flag('Server-sent events (default false)'),
  stream_options: Type.Optional(
    orNull(
      Type.Object(
        { include_usage: flag('Stream a last chunk with the usage (choices: [])') },
        { [ERROR_MESSAGE]: { type: 'must be an object {include_usage}' } },
      ),
    ),
  ),
  max_tokens: sharedFields.max_tokens,
  max_completion_tokens: bounded(1, 1_000_000, { integer: true, description: 'max_tokens under its newer name' }),
  temperature: sharedFields.temperature,
  top_p: sharedFields.top_p,
  top_k: sharedFields.top_k,
  stop: sharedFields.stop,
  seed: sharedFields.seed,
  presence_penalty: sharedFields.presence_penalty,
  frequency_penalty: sharedFields.frequency_penalty,
  n: bounded(1, 8, { integer: true, description: 'Choices, decoded together (each up to max_tokens)' }),
  logprobs: flag('Log probabilities of the output tokens'),
  top_logprobs: bounded(0, 20, { integer: true, description: 'Alternatives per token (needs logprobs: true)' }),
  logit_bias: Type.Optional(LogitBiasBody),
  response_format: Type.Optional(ResponseFormatBody),
  tools: Type.Optional(
    orNull(
      Type.Array(ToolBody, {
        maxItems: 128,
        description: 'Functions the model may call (at most 128, names unique)',
        [ERROR_MESSAGE]: { type: 'must be an array of tools', maxItems: 'must have at most 128 tools' },
      }),
    ),
  ),
  tool_choice: ToolChoiceBody,
  parallel_tool_calls: flag('Several tool calls in one answer (default true)'),
  user: sharedFields.user,
  max_price_per_token: sharedFields.max_price_per_token,
  audio: refused('not supported: this service answers in text only'),
  modalities: Type.Optional(
    orNull(
      Type.Array(Type.Literal('text'), {
        description: 'Only ["text"]',
        [ERROR_MESSAGE]: 'only ["text"] is supported: this service answers in text only',
      }),
    ),
  ),
  prediction: refused('not supported (no predicted outputs)'),
  web_search_options: refused('not supported (no web search)'),
  functions: refused('deprecated and not supported: send tools instead'),
  function_call: refused('deprecated and not supported: send tool_choice instead'),
};

const messagesWording = 'required, must be a non-empty array';

/**
 * The chat request body of POST /llm and /v1/chat/completions (API.md section B): OpenAI's
 * whole chat request. The schema is the rules: the gateway's routes validate with it, and its
 * own wording (ERROR_MESSAGE) keeps the messages clients know, each naming the field and the
 * rule. Unknown top-level fields are accepted and ignored, as vLLM does (the openai SDK and
 * frameworks send `store`, `metadata`...): never forwarded, and named to the caller in a
 * response header (unknownFields). What the schema cannot say, toChatRequest checks.
 */
export const ChatRequestBody = Type.Object(
  {
    ...chatFields,
    messages: Type.Array(ChatMessageBody, {
      minItems: 1,
      [ERROR_MESSAGE]: { type: messagesWording, minItems: messagesWording, required: messagesWording },
    }),
  },
  { [ERROR_MESSAGE]: { type: 'must be a JSON object' } },
);
export type ChatRequestBody = Static<typeof ChatRequestBody>;

/**
 * What a gateway forwards to an orchestrator (a ChatRequest as JSON), as the orchestrator
 * checks it: the chat body, plus `prompt` (POST /v1/completions: raw text, with `messages: []`).
 * `prompt` is no field of the public chat routes.
 */
export const ForwardedChatBody = Type.Object(
  {
    ...chatFields,
    messages: Type.Array(ChatMessageBody, {
      [ERROR_MESSAGE]: { type: 'required, must be an array', required: 'required, must be an array' },
    }),
    prompt: Type.Optional(Type.String({ [ERROR_MESSAGE]: 'must be a string' })),
  },
  { [ERROR_MESSAGE]: { type: 'must be a JSON object' } },
);
export type ForwardedChatBody = Static<typeof ForwardedChatBody>;

/** The top-level fields of `body` that `schema` does not know: ignored, and named to the caller. */
export function unknownFields(body: object, schema: TObject): string[] {
  return Object.keys(body).filter((k) => !Object.hasOwn(schema.properties, k));
}

/** One rule broken, at a field path in OpenAI's style (`messages[0].content[1]`). */
interface Problem {
  path: string;
  rule: string;
}

type MessageBody = Static<typeof ChatMessageBody>;

const MEDIA: Record<string, string> = {
  image_url: 'this model takes no images: send text parts only',
  input_audio: 'this model takes no audio: send text parts only',
  file: 'this model takes no files: send text parts only',
};

function contentProblems(m: MessageBody, at: string): Problem[] {
  const out: Problem[] = [];
  if (m.content === undefined || m.content === null) {
    // OpenAI: an assistant message may leave content out (it made tool calls); no other may.
    if (m.role !== 'assistant') out.push({ path: `${at}.content`, rule: `is required on a ${m.role} message` });
    return out;
  }
  if (typeof m.content === 'string') return out;
  for (const [j, part] of m.content.entries()) {
    const path = `${at}.content[${j}]`;
    const media = MEDIA[part.type];
    if (media) out.push({ path, rule: media });
    else if (part.type === 'text' && typeof part.text !== 'string')
      out.push({ path: `${path}.text`, rule: 'is required' });
    else if (part.type === 'refusal' && typeof part.refusal !== 'string')
      out.push({ path: `${path}.refusal`, rule: 'is required' });
  }
  return out;
}

function messageProblems(messages: MessageBody[]): Problem[] {
  return messages.flatMap((m, i) => {
    const at = `messages[${i}]`;
    const out = contentProblems(m, at);
    if (m.role === 'tool' && typeof m.tool_call_id !== 'string')
      out.push({ path: `${at}.tool_call_id`, rule: 'is required on a tool message (the id of the call it answers)' });
    if (m.role !== 'assistant' && m.tool_calls)
      out.push({ path: `${at}.tool_calls`, rule: 'only on an assistant message' });
    return out;
  });
}

function toolProblems(body: ForwardedChatBody): Problem[] {
  const out: Problem[] = [];
  const tools = body.tools ?? [];
  const names = new Map<string, number>();
  for (const [i, t] of tools.entries()) {
    const first = names.get(t.function.name);
    if (first === undefined) names.set(t.function.name, i);
    else
      out.push({ path: `tools[${i}].function.name`, rule: `"${t.function.name}" is also the name of tools[${first}]` });
  }
  const choice = body.tool_choice;
  if (choice === undefined || choice === null || choice === 'none') return out;
  const named = typeof choice === 'object' ? choice.function.name : undefined;
  // As vLLM: "auto" with an empty list is an off value, with no list at all a mistake (OpenAI's too).
  if (choice === 'auto' ? !body.tools : tools.length === 0)
    out.push({ path: 'tool_choice', rule: `${JSON.stringify(choice)} needs tools: none were given` });
  else if (named !== undefined && !names.has(named))
    out.push({ path: 'tool_choice', rule: `names "${named}", which is none of the tools` });
  return out;
}

/** The rules the schema cannot say (which fields go together), as problems at their paths. */
function crossFieldProblems(body: ForwardedChatBody): Problem[] {
  const out = [...messageProblems(body.messages), ...toolProblems(body)];
  if (body.top_logprobs && body.logprobs !== true) out.push({ path: 'top_logprobs', rule: 'needs logprobs: true' });
  const format = body.response_format;
  if (format?.type === 'json_schema' && !format.json_schema)
    out.push({ path: 'response_format.json_schema', rule: 'is required when type is "json_schema"' });
  return out;
}

function contentText(content: MessageBody['content']): string {
  if (typeof content === 'string') return content;
  if (!content) return '';
  // Joined with "\n", as vLLM joins them (entrypoints/chat_utils.py).
  return content.map((p) => (p.type === 'refusal' ? (p.refusal ?? '') : (p.text ?? ''))).join('\n');
}

function toChatMessage(m: MessageBody): ChatMessage {
  const role: Role = m.role === 'developer' ? 'system' : (m.role as Role);
  const out: ChatMessage = { role, content: contentText(m.content) };
  if (typeof m.name === 'string') out.name = m.name;
  if (role === 'assistant' && m.tool_calls?.length)
    out.tool_calls = m.tool_calls.map((c) => ({
      id: c.id,
      type: 'function',
      function: { name: c.function.name, arguments: c.function.arguments },
    }));
  if (role === 'tool' && typeof m.tool_call_id === 'string') out.tool_call_id = m.tool_call_id;
  return out;
}

function toToolDef(t: NonNullable<ChatRequestBody['tools']>[number]): ToolDef {
  const f = t.function;
  const fn: ToolDef['function'] = { name: f.name };
  if (typeof f.description === 'string') fn.description = f.description;
  if (f.parameters) fn.parameters = f.parameters;
  if (typeof f.strict === 'boolean') fn.strict = f.strict;
  return { type: 'function', function: fn };
}

function toResponseFormat(f: ChatRequestBody['response_format']): ResponseFormat | undefined {
  if (!f || f.type === 'text') return undefined;
  if (f.type === 'json_object' || !f.json_schema) return { type: 'json_object' };
  const s = f.json_schema;
  const out: Extract<ResponseFormat, { type: 'json_schema' }>['json_schema'] = { name: s.name };
  if (typeof s.description === 'string') out.description = s.description;
  if (s.schema) out.schema = s.schema;
  if (typeof s.strict === 'boolean') out.strict = s.strict;
  return { type: 'json_schema', json_schema: out };
}

/** Tools, tool_choice and parallel_tool_calls: all absent when there are no tools or the choice is "none". */
function addTools(req: ChatRequest, body: ForwardedChatBody): void {
  const tools = body.tool_choice === 'none' ? [] : (body.tools ?? []);
  if (tools.length === 0) return;
  req.tools = tools.map(toToolDef);
  const choice = body.tool_choice;
  if (choice === 'auto' || choice === 'required') req.tool_choice = choice;
  else if (typeof choice === 'object' && choice !== null)
    req.tool_choice = { type: 'function', function: { name: choice.function.name } };
  if (typeof body.parallel_tool_calls === 'boolean') req.parallel_tool_calls = body.parallel_tool_calls;
}

/** The options that ask for more than plain text; off or empty values are dropped (API.md section B). */
function addFeatures(req: ChatRequest, body: ForwardedChatBody): void {
  if (typeof body.n === 'number' && body.n > 1) req.n = body.n;
  if (body.logprobs === true) {
    req.logprobs = true;
    if (typeof body.top_logprobs === 'number') req.top_logprobs = body.top_logprobs;
  }
  if (body.logit_bias && Object.keys(body.logit_bias).length > 0) req.logit_bias = body.logit_bias;
  const format = toResponseFormat(body.response_format);
  if (format) req.response_format = format;
  addTools(req, body);
  if (body.stream_options?.include_usage === true) req.include_usage = true;
}

/**
 * The request a gateway forwards, from a body that fits ChatRequestBody (or ForwardedChatBody):
 * what the schema cannot say is checked here (throws ValidationError naming the first field as
 * `param`), then max_tokens before max_completion_tokens, then the default; top_k -1 and null
 * values mean unset; a stop string is a list of one; developer messages become system ones and
 * content parts one string.
 */
export function toChatRequest(
  body: ChatRequestBody | ForwardedChatBody,
  opts: { defaultMaxTokens: number },
): ChatRequest {
  const problems = crossFieldProblems(body);
  if (problems.length > 0)
    throw new ValidationError(
      problems.map((p) => `${p.path}: ${p.rule}`),
      { param: problems[0]?.path },
    );
  const req: ChatRequest = {
    model: body.model,
    messages: body.messages.map(toChatMessage),
    stream: body.stream === true,
    max_tokens: body.max_tokens ?? body.max_completion_tokens ?? opts.defaultMaxTokens,
  };
  if ('prompt' in body && typeof body.prompt === 'string') req.prompt = body.prompt;
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
  addFeatures(req, body);
  return req;
}

/**
 * What `req` needs of an orchestrator beyond plain chat, each with the field that asks for it
 * (the `param` of the 400 when no orchestrator serving the model has it).
 */
export function requiredFeatures(req: ChatRequest): Array<{ feature: Feature; param: string }> {
  const out: Array<{ feature: Feature; param: string }> = [];
  if (req.prompt !== undefined) out.push({ feature: 'completions', param: 'prompt' });
  if (req.response_format) out.push({ feature: req.response_format.type, param: 'response_format' });
  if (req.tools) out.push({ feature: 'tools', param: 'tools' });
  if (req.logprobs) out.push({ feature: 'logprobs', param: 'logprobs' });
  if ((req.n ?? 1) > 1) out.push({ feature: 'n', param: 'n' });
  if (req.logit_bias) out.push({ feature: 'logit_bias', param: 'logit_bias' });
  return out;
}

const checkForwarded = schemaChecker()(ForwardedChatBody);

/**
 * Checks a forwarded chat body outside a route (an orchestrator's): every problem is reported,
 * each naming the field path and the rule. Exactly one of `messages` (non-empty) and `prompt`.
 * Throws ValidationError (answered 400; the gateway passes it on and tries no other).
 */
export function validateChatRequest(body: unknown, opts: { defaultMaxTokens: number }): ChatRequest {
  const error = checkForwarded(body);
  if (error) throw error;
  const b = body as ForwardedChatBody;
  if (b.prompt === undefined && b.messages.length === 0)
    throw new ValidationError(`messages: ${messagesWording}`, { param: 'messages' });
  if (b.prompt !== undefined && b.messages.length > 0)
    throw new ValidationError('messages: must be empty when prompt is set', { param: 'messages' });
  return toChatRequest(b, opts);
}

/** A piece of tool call `index` in a streamed delta (OpenAI `delta.tool_calls[]`): id, type and name on its first. */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

/** What a chunk adds to its choice: the role on the choice's first chunk, then content or tool-call pieces. */
export interface ChunkDelta {
  role?: 'assistant';
  content?: string | null;
  tool_calls?: ToolCallDelta[];
}

/** One choice of a `chat.completion.chunk`. */
export interface ChunkChoice {
  index: number;
  delta: ChunkDelta;
  /** The tokens of `delta.content` (`logprobs.content`), only when the request asked for logprobs. */
  logprobs?: TokenLogprob[] | undefined;
  finish: FinishReason | null;
}

/** Builds a `chat.completion.chunk` event body (the id and created come from the gateway). */
export function chunk(opts: { id: string; created: number; model: string; choice: ChunkChoice }): string {
  const c = opts.choice;
  return JSON.stringify({
    id: opts.id,
    object: 'chat.completion.chunk',
    created: opts.created,
    model: opts.model,
    choices: [
      {
        index: c.index,
        delta: c.delta,
        ...(c.logprobs ? { logprobs: { content: c.logprobs } } : {}),
        finish_reason: c.finish,
      },
    ],
  });
}

/**
 * The wire form (`data: {chunk}\n\n`) of a stream's chunks, with everything but the choice
 * serialised once: byte for byte what formatSse({ data: chunk(...) }) gives, without a
 * JSON.stringify of the whole object for every token.
 */
export function chunkEncoder(meta: { id: string; created: number; model: string }): (choice: ChunkChoice) => string {
  const head = `data: {"id":${JSON.stringify(meta.id)},"object":"chat.completion.chunk","created":${JSON.stringify(meta.created)},"model":${JSON.stringify(meta.model)},"choices":[{"index":`;
  return (c) =>
    `${head}${c.index},"delta":${JSON.stringify(c.delta)}${c.logprobs ? `,"logprobs":{"content":${JSON.stringify(c.logprobs)}}` : ''},"finish_reason":${JSON.stringify(c.finish)}}]}\n\n`;
}

/** The last chunk before [DONE]: no choices, the usage summed over them. */
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
 * with the same limit accepted is not refused as too large on its way (issue #15). Since issue
 * #17 a few bodies can grow by more (`"content":""` written for each assistant message without
 * content, numbers inside tool parameters or a JSON schema written out): the gateway refuses
 * those itself as too large (gateway/complete.ts forwardBody), never an orchestrator.
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
