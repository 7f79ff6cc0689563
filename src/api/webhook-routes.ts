import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ValidationError } from '../lib/errors.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import type { DeliveryLogRow, WebhookInput, WebhookRow } from '../webhooks/index.ts';
import {
  toWireWebhook,
  toWireWebhookLog,
  WebhookLogSchema,
  WebhookRequest,
  WebhookSchema,
  type WebhookRequestBody,
} from './contract/webhook.ts';
import { IdempotencyConflictBody, IdempotencyHeaders, type IdempotencyKeys } from './idempotency.ts';
import { linkNext, principal } from './routes.ts';
import { checkHttpUrl, type TranscodeRules } from './validate-transcode.ts';

// Livepeer's webhook routes (issue #18, spec/API.md section A "Webhooks"), so the `livepeer`
// SDK's webhook.create/get/getAll/update/delete/getLogs/getLog/resendLog work unchanged.
// Owner-scoped like tasks: another owner's webhook answers 404, as if it did not exist.

/** What the routes need of the webhooks domain (webhooks/index.ts WebhookStore). */
export interface WebhookStoreLike {
  create(owner: string, projectId: string, input: WebhookInput): Promise<WebhookRow>;
  list(owner: string, opts: PageOptions): Promise<{ webhooks: WebhookRow[]; next: string | null }>;
  get(owner: string, id: string): Promise<WebhookRow>;
  update(owner: string, id: string, input: WebhookInput): Promise<WebhookRow>;
  delete(owner: string, id: string): Promise<WebhookRow>;
  logs(owner: string, webhookId: string, opts: PageOptions): Promise<{ logs: DeliveryLogRow[]; next: string | null }>;
  log(owner: string, webhookId: string, logId: string): Promise<DeliveryLogRow>;
}

/** What the routes need of the dispatcher (webhooks/index.ts WebhookDispatcher). */
export interface WebhookResender {
  /** Sends the event of log `logId` to its webhook again, now; the new attempt (a ResendLimitError beyond its limits). */
  resend(owner: string, webhookId: string, logId: string): Promise<DeliveryLogRow>;
}

interface PageOptions {
  limit: number;
  cursor?: string | undefined;
}

export interface WebhookRoutesDeps {
  webhooks: WebhookStoreLike;
  webhookDispatcher: WebhookResender;
  rules: Pick<TranscodeRules, 'allowPrivateUrls'>;
  idempotency: IdempotencyKeys;
  /** MEDIAPLANE_PUBLIC_URL: absolute links start with it; without it links are relative. */
  publicUrl?: string | undefined;
}

const WebhookId = Type.Object({ id: Type.String({ maxLength: 64 }) });
const LogId = Type.Object({ id: Type.String({ maxLength: 64 }), logId: Type.String({ maxLength: 64 }) });
const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    cursor: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
);
const Errors = TasksErrorBody;

/** The rules JSON Schema cannot say: the URL's scheme and address (the same guard as inputs), the project. */
async function checkWebhookRequest(
  body: WebhookRequestBody,
  ctx: { projectId: string; rules: WebhookRoutesDeps['rules'] },
): Promise<WebhookInput> {
  const problems: string[] = [];
  const url = await checkHttpUrl('url', body.url, ctx.rules, problems);
  if (url && !['http:', 'https:'].includes(url.protocol)) problems.push('url: must start with https:// or http://');
  if (body.projectId !== undefined && body.projectId !== ctx.projectId)
    problems.push(`projectId: must be the API key's project (${ctx.projectId}) or left out`);
  if (problems.length > 0) throw new ValidationError(problems);
  return {
    name: body.name,
    url: body.url,
    events: body.events,
    ...(body.sharedSecret === undefined ? {} : { sharedSecret: body.sharedSecret }),
  };
}

export async function webhookRoutes(app: FastifyInstance, deps: WebhookRoutesDeps): Promise<void> {
  const input = (req: FastifyRequest<{ Body: WebhookRequestBody }>) =>
    checkWebhookRequest(req.body, { projectId: principal(req).projectId, rules: deps.rules });

  app.post<{ Body: WebhookRequestBody }>(
    '/webhook',
    {
      schema: {
        summary: 'Create a webhook',
        headers: IdempotencyHeaders,
        body: WebhookRequest,
        response: { 200: WebhookSchema, 409: IdempotencyConflictBody, 422: Errors },
      },
    },
    async (req, reply) => {
      const p = principal(req);
      return deps.idempotency.once(req, reply, p.owner, async () => {
        const row = await deps.webhooks.create(p.owner, p.projectId, await input(req));
        req.log.info({ webhookId: row.id, owner: p.owner }, 'webhook created');
        return toWireWebhook(row);
      });
    },
  );

  app.get<{ Querystring: Static<typeof ListQuery> }>(
    '/webhook',
    {
      schema: {
        summary: 'List webhooks, newest first',
        querystring: ListQuery,
        response: { 200: Type.Array(WebhookSchema) },
      },
    },
    async (req, reply) => {
      const limit = req.query.limit ?? 20;
      const page = await deps.webhooks.list(principal(req).owner, { limit, cursor: req.query.cursor });
      linkNext(req, reply, { publicUrl: deps.publicUrl, limit, next: page.next });
      return page.webhooks.map(toWireWebhook);
    },
  );

  app.get<{ Params: Static<typeof WebhookId> }>(
    '/webhook/:id',
    { schema: { summary: 'Get a webhook', params: WebhookId, response: { 200: WebhookSchema, 404: Errors } } },
    async (req) => toWireWebhook(await deps.webhooks.get(principal(req).owner, req.params.id)),
  );

  app.put<{ Params: Static<typeof WebhookId>; Body: WebhookRequestBody }>(
    '/webhook/:id',
    {
      schema: {
        summary: 'Replace a webhook (as Livepeer: a sharedSecret left out is removed)',
        params: WebhookId,
        body: WebhookRequest,
        response: { 200: WebhookSchema, 404: Errors, 422: Errors },
      },
    },
    async (req) => {
      const owner = principal(req).owner;
      // 404 before 422: another owner's webhook does not exist, whatever the body says.
      await deps.webhooks.get(owner, req.params.id);
      return toWireWebhook(await deps.webhooks.update(owner, req.params.id, await input(req)));
    },
  );

  app.delete<{ Params: Static<typeof WebhookId> }>(
    '/webhook/:id',
    {
      schema: {
        summary: 'Delete a webhook: no more deliveries to it',
        params: WebhookId,
        response: { 200: WebhookSchema, 404: Errors },
      },
    },
    async (req) => toWireWebhook(await deps.webhooks.delete(principal(req).owner, req.params.id)),
  );

  app.get<{ Params: Static<typeof WebhookId>; Querystring: Static<typeof ListQuery> }>(
    '/webhook/:id/log',
    {
      schema: {
        summary: "A webhook's delivery attempts, newest first",
        params: WebhookId,
        querystring: ListQuery,
        response: { 200: Type.Array(WebhookLogSchema), 404: Errors },
      },
    },
    async (req, reply) => {
      const limit = req.query.limit ?? 20;
      const page = await deps.webhooks.logs(principal(req).owner, req.params.id, { limit, cursor: req.query.cursor });
      linkNext(req, reply, { publicUrl: deps.publicUrl, limit, next: page.next });
      return page.logs.map(toWireWebhookLog);
    },
  );

  app.get<{ Params: Static<typeof LogId> }>(
    '/webhook/:id/log/:logId',
    {
      schema: {
        summary: 'One delivery attempt: the request as sent, the response as received',
        params: LogId,
        response: { 200: WebhookLogSchema, 404: Errors },
      },
    },
    async (req) => toWireWebhookLog(await deps.webhooks.log(principal(req).owner, req.params.id, req.params.logId)),
  );

  app.post<{ Params: Static<typeof LogId> }>(
    '/webhook/:id/log/:logId/resend',
    {
      schema: {
        summary: 'Send the event of a delivery attempt again, now; answers the new attempt',
        description:
          'Takes one of the delivery slots (MEDIAPLANE_WEBHOOK_CONCURRENCY), at most MEDIAPLANE_WEBHOOK_RESENDS_PER_MINUTE an owner; beyond either, 429 with Retry-After.',
        params: LogId,
        response: { 200: WebhookLogSchema, 404: Errors, 429: Errors },
      },
    },
    async (req) =>
      toWireWebhookLog(await deps.webhookDispatcher.resend(principal(req).owner, req.params.id, req.params.logId)),
  );
}
