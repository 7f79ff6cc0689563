// The domain types of text generation (issue #26: the one part of llm/protocol/ that engines
// import): chat messages, tools, structured output, features, the validated request, the usage,
// log probabilities, and the form of a model id.

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

/** `<org>/<model_name>` as on the public model hub: the ids an orchestrator offers. */
export const MODEL_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;
