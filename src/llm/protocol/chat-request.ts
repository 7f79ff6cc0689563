// The chat request's checks: what the schema cannot say (which fields go together), the
// validated ChatRequest built from a body, the features it needs, and its max_tokens against a
// model's context.

import type { Static } from '@sinclair/typebox';
import { ValidationError } from '../../lib/errors.ts';
import { schemaChecker } from '../../lib/schema-validator.ts';
import { type ChatMessageBody, type ChatRequestBody, ForwardedChatBody, messagesWording } from './chat-schema.ts';
import type { ChatMessage, ChatRequest, Feature, ResponseFormat, Role, ToolDef } from './types.ts';

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

/**
 * Why `maxTokens` cannot be generated with `contextLength` tokens per request (the whole
 * context, so even an empty prompt leaves no room for that many), or undefined when it can.
 * Answered 400 `context_length_exceeded` by the gateway and the orchestrator (issue #15).
 */
export function maxTokensProblem(maxTokens: number, contextLength: number | undefined): string | undefined {
  if (contextLength === undefined || maxTokens <= contextLength) return undefined;
  return `max_tokens: must be at most ${contextLength}, the model's context per request (MAX_MODEL_LEN), prompt included (got ${maxTokens})`;
}
