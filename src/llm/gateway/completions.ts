// POST /v1/completions (issue #17): OpenAI's legacy text completion. A prompt is sent as a
// ChatRequest with `prompt` and no messages, so orchestrators tokenize it as is (no chat
// template); the answer comes back as text_completion objects (complete.ts, shape
// 'text_completion'). A list of prompts is one completion per prompt, its choices numbered
// prompt by prompt (OpenAI's rule: choice index = prompt index x n + choice), and charged
// once for all of them (complete.ts completeJointly).

import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BadRequestError } from '../../lib/errors.ts';
import { ERROR_MESSAGE } from '../../lib/schema-errors.ts';
import { OpenAiErrorBody } from '../../lib/wire-errors.ts';
import {
  bounded,
  type ChatRequest,
  type ForwardedChatBody,
  flag,
  sharedFields,
  toChatRequest,
  unknownFields,
} from '../protocol/index.ts';
import { completeJointly } from './complete.ts';
import { clientGone, type GatewayRoutes, listOf, nameIgnored, serveCompletion } from './serve.ts';

/** Prompts in one request (each a completion of its own). */
const MAX_PROMPTS = 64;

const promptWording = `required, must be a string or an array of 1 to ${MAX_PROMPTS} strings (token arrays are not supported: send the text)`;

export const CompletionsBody = Type.Object(
  {
    model: sharedFields.model,
    prompt: Type.Union([Type.String(), Type.Array(Type.String(), { minItems: 1, maxItems: MAX_PROMPTS })], {
      description: 'The text to continue, as is (no chat template); a list: one completion each',
      [ERROR_MESSAGE]: promptWording,
    }),
    max_tokens: sharedFields.max_tokens,
    temperature: sharedFields.temperature,
    top_p: sharedFields.top_p,
    top_k: sharedFields.top_k,
    n: bounded(1, 8, { integer: true, description: 'Choices per prompt, decoded together' }),
    stream: flag('Server-sent events of text_completion objects (default false)'),
    stream_options: Type.Optional(
      Type.Union(
        [Type.Object({ include_usage: flag('Stream a last chunk with the usage (choices: [])') }), Type.Null()],
        {
          [ERROR_MESSAGE]: 'must be an object {include_usage}',
        },
      ),
    ),
    stop: sharedFields.stop,
    seed: sharedFields.seed,
    logprobs: bounded(0, 5, {
      integer: true,
      description: 'Log probabilities of the output tokens with this many alternatives each (this API: 0 to 5)',
    }),
    echo: flag('The prompt before the completion in each text'),
    suffix: Type.Optional(
      Type.Union([Type.Null(), Type.Literal('')], {
        description: 'Refused: no insertion (fill in the middle)',
        [ERROR_MESSAGE]: 'not supported: no insertion (fill in the middle); send the text before only',
      }),
    ),
    best_of: Type.Optional(
      Type.Union([Type.Literal(1), Type.Null()], {
        description: 'Only 1: use n for several choices',
        [ERROR_MESSAGE]: 'only 1 is supported: ask for several choices with n',
      }),
    ),
    presence_penalty: sharedFields.presence_penalty,
    frequency_penalty: sharedFields.frequency_penalty,
    logit_bias: Type.Optional(
      Type.Unsafe<Record<string, number> | null>({
        type: ['object', 'null'],
        propertyNames: { pattern: '^[0-9]{1,10}$' },
        additionalProperties: { type: 'number', minimum: -100, maximum: 100 },
        maxProperties: 300,
        description: 'Token id (a decimal string) to a bias from -100 (never) to 100 (always); at most 300',
        [ERROR_MESSAGE]: 'must be an object of token ids (decimal strings) to biases from -100 to 100, at most 300',
      }),
    ),
    user: sharedFields.user,
    max_price_per_token: sharedFields.max_price_per_token,
  },
  { [ERROR_MESSAGE]: { type: 'must be a JSON object' } },
);
export type CompletionsBody = Static<typeof CompletionsBody>;

export const completionsRoute = {
  summary: 'Text completion (OpenAI-compatible, legacy)',
  description:
    'Continues the prompt as is (no chat template), priced per max_tokens per choice at the chosen orchestrator (API.md section B).',
  body: CompletionsBody,
  response: {
    200: Type.Object(
      {
        id: Type.String(),
        object: Type.Literal('text_completion'),
        created: Type.Integer(),
        model: Type.String(),
        choices: Type.Array(
          Type.Object({ index: Type.Integer(), text: Type.String() }, { additionalProperties: true }),
        ),
      },
      {
        additionalProperties: true,
        description: 'With stream: true, text/event-stream of text_completion objects, then data: [DONE]',
      },
    ),
    '4xx': OpenAiErrorBody,
    '5xx': OpenAiErrorBody,
  },
};

/** Registers POST /v1/completions on a scope with the LLM error handler. */
export function registerCompletions(scope: FastifyInstance, routes: GatewayRoutes): void {
  scope.post<{ Body: CompletionsBody }>(
    '/v1/completions',
    { schema: completionsRoute, onRequest: routes.auth.hook },
    (req, reply) => completions(req, reply, routes),
  );
}

/**
 * The chat request for one prompt: the fields under their chat names (toChatRequest checks and
 * maps them as it does chat's), `logprobs: k` as logprobs with k alternatives.
 */
export function toPromptRequest(body: CompletionsBody, prompt: string, defaultMaxTokens: number): ChatRequest {
  const same = {
    stream: body.stream,
    stream_options: body.stream_options,
    max_tokens: body.max_tokens,
    temperature: body.temperature,
    top_p: body.top_p,
    top_k: body.top_k,
    n: body.n,
    stop: body.stop,
    seed: body.seed,
    presence_penalty: body.presence_penalty,
    frequency_penalty: body.frequency_penalty,
    logit_bias: body.logit_bias,
    max_price_per_token: body.max_price_per_token,
  };
  // Fields the caller left out stay out (they are optional, not undefined, in the chat body).
  const given = Object.fromEntries(Object.entries(same).filter(([, v]) => v !== undefined));
  const logprobs = typeof body.logprobs === 'number' ? { logprobs: true, top_logprobs: body.logprobs } : {};
  const forwarded = { model: body.model, messages: [], prompt, ...given, ...logprobs } as ForwardedChatBody;
  return toChatRequest(forwarded, { defaultMaxTokens });
}

/** What complete.ts answers a non-streaming text completion with. */
interface TextCompletion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: Array<{ index: number; text: string; [k: string]: unknown }>;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

async function completions(
  req: FastifyRequest<{ Body: CompletionsBody }>,
  reply: FastifyReply,
  routes: GatewayRoutes,
): Promise<unknown> {
  const { body } = req;
  const prompts = listOf(body.prompt);
  const ignored = unknownFields(body, CompletionsBody);
  const echo = body.echo === true;
  // OpenAI's echo with logprobs scores the prompt's own tokens, which no engine here computes.
  if (echo && typeof body.logprobs === 'number')
    throw new BadRequestError(
      'echo: not supported with logprobs (the log probabilities of the prompt are not computed)',
      {
        param: 'echo',
      },
    );
  if (body.stream === true && prompts.length > 1)
    throw new BadRequestError('prompt: a streamed completion takes one prompt; send a list without stream', {
      param: 'prompt',
    });
  if (body.stream === true && echo)
    throw new BadRequestError('echo: not supported with stream yet; send it without stream', { param: 'echo' });
  const defaultMaxTokens = routes.settings.gatewayDefaultMaxTokens;
  const requests = prompts.map((p) => toPromptRequest(body, p, defaultMaxTokens));
  const [first] = requests;
  if (first && (first.stream || (requests.length === 1 && !echo)))
    return serveCompletion(routes, req, reply, { body: first, shape: 'text_completion', ignored });
  const res = reply.raw;
  nameIgnored(res, ignored);
  const gone = clientGone(res);
  const key = routes.auth.of(req);
  const owner = key.owner;
  // Each prompt is a completion of its own (its own orchestrator), run together under one
  // charge: all of them are paid for, or none (issue #25).
  const opts = { owner, key, bodies: requests, res, clientGone: gone, shape: 'text_completion' as const };
  const answers = (await completeJointly(routes.complete, opts)) as TextCompletion[] | undefined;
  // undefined: the client went away; there is no one to answer.
  return reply.send(answers && merged(answers, { prompts, echo, n: first?.n ?? 1 }));
}

/** One answer of several prompts' completions: choices numbered prompt by prompt, usage summed, the first id. */
function merged(
  answers: TextCompletion[],
  o: { prompts: string[]; echo: boolean; n: number },
): TextCompletion | undefined {
  const [head] = answers;
  if (!head) return undefined;
  const choices = answers.flatMap((a, p) =>
    a.choices.map((c) => ({
      ...c,
      index: p * o.n + c.index,
      text: o.echo ? `${o.prompts[p] ?? ''}${c.text}` : c.text,
    })),
  );
  const sum = (k: keyof TextCompletion['usage']) => answers.reduce((s, a) => s + a.usage[k], 0);
  return {
    ...head,
    choices,
    usage: {
      prompt_tokens: sum('prompt_tokens'),
      completion_tokens: sum('completion_tokens'),
      total_tokens: sum('total_tokens'),
    },
  };
}
