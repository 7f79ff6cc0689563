// The chat request body as a schema: the public form (POST /llm, /v1/chat/completions) and the
// form a gateway forwards to an orchestrator.

import { type Static, type TObject, Type } from '@sinclair/typebox';
import { ERROR_MESSAGE } from '../../lib/schema-errors.ts';
import { bounded, flag, JsonSchemaBody, NameBody, numberWording, orNull, refused, sharedFields } from './fields.ts';

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
export const ChatMessageBody = Type.Object(
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

export const messagesWording = 'required, must be a non-empty array';

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
