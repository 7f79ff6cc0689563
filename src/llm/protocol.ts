// The wire between gateways and orchestrators, and the chat request both check. Gateway and
// orchestrator talk over HTTP only (STYLE.md: separate processes at scale); this module holds
// the shapes and the one validation function they share, no state.

import { createHash, timingSafeEqual } from 'node:crypto';
import { ValidationError } from '../lib/errors.ts';

export type Role = 'system' | 'user' | 'assistant';
export interface ChatMessage {
  role: Role;
  content: string;
}

/** A validated chat request, as the gateway forwards it (OpenAI field names). */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream: boolean;
  max_tokens: number;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  stop?: string[];
  seed?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  /** Mediaplane extension: the caller's price ceiling in USD per output token. */
  max_price_per_token?: number;
}

export type FinishReason = 'stop' | 'length';
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** What an orchestrator advertises at GET <base>/capabilities. */
export interface Capabilities {
  engine: string;
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

const KNOWN = new Set([
  'model',
  'messages',
  'stream',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'top_k',
  'stop',
  'seed',
  'presence_penalty',
  'frequency_penalty',
  'max_price_per_token',
  'n',
  'user',
  'stream_options',
]);
// OpenAI parameters this service cannot honour: refused by name rather than silently dropped.
const UNSUPPORTED = new Set([
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
]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function num(
  body: Record<string, unknown>,
  key: string,
  problems: string[],
  rule: { min: number; max: number; int?: boolean },
): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    problems.push(`${key}: must be a number`);
    return undefined;
  }
  if (rule.int && !Number.isInteger(v)) problems.push(`${key}: must be an integer`);
  else if (v < rule.min || v > rule.max)
    problems.push(`${key}: must be between ${rule.min} and ${rule.max} (got ${v})`);
  else return v;
  return undefined;
}

/**
 * Checks a chat request body; every problem is reported, each naming the field path and the
 * rule. Throws ValidationError (the gateway answers 400 and forwards nothing).
 */
export function validateChatRequest(body: unknown, opts: { defaultMaxTokens: number }): ChatRequest {
  if (!isObject(body)) throw new ValidationError('body: must be a JSON object');
  const problems: string[] = [];
  for (const key of Object.keys(body)) {
    if (UNSUPPORTED.has(key)) problems.push(`${key}: not supported by this service`);
    else if (!KNOWN.has(key)) problems.push(`${key}: unknown field`);
  }
  const model = body.model;
  if (typeof model !== 'string' || !MODEL_ID_RE.test(model))
    problems.push('model: required, must be <org>/<model_name> (e.g. karpathy/stories260K)');

  const messages: ChatMessage[] = [];
  if (!Array.isArray(body.messages) || body.messages.length === 0)
    problems.push('messages: required, must be a non-empty array');
  else {
    body.messages.forEach((m: unknown, i) => {
      if (!isObject(m)) return problems.push(`messages[${i}]: must be an object {role, content}`);
      if (m.role !== 'system' && m.role !== 'user' && m.role !== 'assistant')
        problems.push(`messages[${i}].role: must be one of system, user, assistant`);
      if (typeof m.content !== 'string') problems.push(`messages[${i}].content: must be a string`);
      for (const k of Object.keys(m))
        if (k !== 'role' && k !== 'content' && k !== 'name') problems.push(`messages[${i}].${k}: unknown field`);
      if ((m.role === 'system' || m.role === 'user' || m.role === 'assistant') && typeof m.content === 'string')
        messages.push({ role: m.role, content: m.content });
      return undefined;
    });
  }
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean')
    problems.push('stream: must be a boolean');
  if (body.n !== undefined && body.n !== null && body.n !== 1) problems.push('n: only 1 is supported');
  if (body.stream_options !== undefined && body.stream_options !== null && !isObject(body.stream_options))
    problems.push('stream_options: must be an object');
  if (body.user !== undefined && typeof body.user !== 'string') problems.push('user: must be a string');

  // The bounds below are what any model could take; max_tokens is bounded again by the model's
  // context (maxTokensProblem) where that is known: by the gateway and the orchestrator.
  const maxTokensKey =
    body.max_tokens !== undefined && body.max_tokens !== null ? 'max_tokens' : 'max_completion_tokens';
  const maxTokens = num(body, maxTokensKey, problems, { min: 1, max: 1_000_000, int: true });
  const req: ChatRequest = {
    model: typeof model === 'string' ? model : '',
    messages,
    stream: body.stream === true,
    max_tokens: maxTokens ?? opts.defaultMaxTokens,
  };
  const optional = {
    temperature: num(body, 'temperature', problems, { min: 0, max: 2 }),
    top_p: num(body, 'top_p', problems, { min: 0, max: 1 }),
    // -1 means "off" in vLLM's API, and @livepeer/ai sends it by default.
    top_k: body.top_k === -1 ? undefined : num(body, 'top_k', problems, { min: 0, max: 1_000_000, int: true }),
    seed: num(body, 'seed', problems, { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER, int: true }),
    presence_penalty: num(body, 'presence_penalty', problems, { min: -2, max: 2 }),
    frequency_penalty: num(body, 'frequency_penalty', problems, { min: -2, max: 2 }),
    max_price_per_token: num(body, 'max_price_per_token', problems, { min: 0, max: 1 }),
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) Object.assign(req, { [k]: v });

  const stop = body.stop;
  if (typeof stop === 'string') req.stop = [stop];
  else if (Array.isArray(stop)) {
    if (stop.length > 4 || !stop.every((s) => typeof s === 'string' && s.length > 0))
      problems.push('stop: must be a string or an array of at most 4 non-empty strings');
    else req.stop = stop as string[];
  } else if (stop !== undefined && stop !== null) problems.push('stop: must be a string or an array of strings');

  if (problems.length > 0) throw new ValidationError(problems);
  return req;
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
 * Whether `Authorization: Bearer <token>` carries the orchestrator secret (the gateway's
 * registration route, every orchestrator route but /healthz and /metrics). The token and the
 * secret are compared as SHA-256 digests, fixed-size, in constant time: comparing the raw
 * bytes had to return early on a length mismatch, which told a prober the secret's length
 * (issue #15). An empty secret matches nothing.
 */
export function secretMatches(header: string | undefined, secret: string): boolean {
  const token = /^bearer\s+(\S+)\s*$/i.exec(header ?? '')?.[1];
  if (!token || !secret) return false;
  return timingSafeEqual(sha256(token), sha256(secret));
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

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
