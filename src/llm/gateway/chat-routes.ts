// POST /llm (Livepeer's AI runner path, @livepeer/ai) and POST /v1/chat/completions (OpenAI's):
// one chat completion each, the same body and answer; they differ only in the error shape
// (lib/wire-errors.ts llmWireErrorFor) and the OpenAPI document's words.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ChatRequestBody, toChatRequest, unknownFields } from '../protocol/index.ts';
import { chatRoute } from './schemas.ts';
import { type GatewayRoutes, serveCompletion } from './serve.ts';

/** Registers the two chat routes on a scope with the LLM error handler. */
export function registerChat(scope: FastifyInstance, routes: GatewayRoutes): void {
  const chat = async (req: FastifyRequest<{ Body: ChatRequestBody }>, reply: FastifyReply): Promise<unknown> => {
    const body = toChatRequest(req.body, { defaultMaxTokens: routes.settings.gatewayDefaultMaxTokens });
    return serveCompletion(routes, req, reply, { body, ignored: unknownFields(req.body, ChatRequestBody) });
  };
  const options = (summary: string, livepeer: boolean) => ({
    schema: chatRoute(summary, { livepeer }),
    onRequest: routes.auth.hook,
  });
  scope.post<{ Body: ChatRequestBody }>('/llm', options('Chat completion', true), chat);
  scope.post<{ Body: ChatRequestBody }>(
    '/v1/chat/completions',
    options('Chat completion (OpenAI-compatible)', false),
    chat,
  );
}
