import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import { ValidationError } from '../lib/errors.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import type { DeliveryLogRow, WebhookInput, WebhookPatch, WebhookRow } from '../webhooks/index.ts';
import {
  toWireWebhook,
  toWireWebhookLog,
  WebhookLogSchema,
  type WebhookPatchBody,
  WebhookPatchRequest,
  WebhookRequest,
  WebhookSchema,
  type WebhookRequestBody,
} from './contract/webhook.ts';
import { createRoute } from './create-route.ts';
import type { IdempotencyKeys } from './idempotency.ts';
import { ListQuery, type PageOptions, pageOf } from './paging.ts';
import { checkHttpUrl, type TranscodeRules } from './validate-transcode.ts';

// Livepeer's webhook routes (issue #18, spec/API.md section A "Webhooks"), so the `livepeer`
// SDK's webhook.create/get/getAll/update/delete/getLogs/getLog/resendLog work unchanged.
// Owner-scoped like tasks: another owner's webhook answers 404, as if it did not exist. Each
// route names its auth (`onRequest: auth.hook`, issue #26), as the task routes do.

/** What the routes need of the webhooks domain (webhooks/index.ts WebhookStore). */
export interface WebhookStoreLike {
  create(owner: string, projectId: string, input: WebhookInput): Promise<WebhookRow>;
  list(owner: string, opts: PageOptions): Promise<{ webhooks: WebhookRow[]; next: string | null }>;
  get(owner: string, id: string): Promise<WebhookRow>;
  update(owner: string, id: string, input: WebhookInput): Promise<WebhookRow>;
  patch(owner: string, id: string, patch: WebhookPatch): Promise<WebhookRow>;
  delete(owner: string, id: string): Promise<WebhookRow>;
  logs(owner: string, webhookId: string, opts: PageOptions): Promise<{ logs: DeliveryLogRow[]; next: string | null }>;
  log(owner: string, webhookId: string, logId: string): Promise<DeliveryLogRow>;
}

/** What the routes need of the dispatcher (webhooks/index.ts WebhookDispatcher). */
export interface WebhookResender {
  /** Sends the event of log `logId` to its webhook again, now; the new attempt (a ResendLimitError beyond its limits). */
  resend(owner: string, webhookId: string, logId: string): Promise<DeliveryLogRow>;
}

export interface WebhookRoutesDeps {
  /** The API key check every route names (lib/request-auth.ts). */
  auth: RequestAuth<Principal>;
  webhooks: WebhookStoreLike;
  webhookDispatcher: WebhookResender;
  rules: Pick<TranscodeRules, 'allowPrivateUrls'>;
  idempotency: IdempotencyKeys;
  /** MEDIAPLANE_PUBLIC_URL: absolute links start with it; without it links are relative. */
  publicUrl?: string | undefined;
}

const WebhookId = Type.Object({ id: Type.String({ maxLength: 64 }) });
const LogId = Type.Object({ id: Type.String({ maxLength: 64 }), logId: Type.String({ maxLength: 64 }) });
const Errors = TasksErrorBody;

interface CheckContext {
  projectId: string;
  rules: WebhookRoutesDeps['rules'];
}

/** The rules JSON Schema cannot say, of the fields given: the URL's scheme and address (the same guard as inputs), the project. */
async function checkFields(body: { url?: string; projectId?: string }, ctx: CheckContext): Promise<void> {
  const problems: string[] = [];
  if (body.url !== undefined) {
    const url = await checkHttpUrl('url', body.url, ctx.rules, problems);
    if (url && !['http:', 'https:'].includes(url.protocol)) problems.push('url: must start with https:// or http://');
  }
  if (body.projectId !== undefined && body.projectId !== ctx.projectId)
    problems.push(`projectId: must be the API key's project (${ctx.projectId}) or left out`);
  if (problems.length > 0) throw new ValidationError(problems);
}

/** A whole webhook (POST, PUT), checked. */
async function checkWebhookRequest(body: WebhookRequestBody, ctx: CheckContext): Promise<WebhookInput> {
  await checkFields(body, ctx);
  return {
    name: body.name,
    url: body.url,
    events: body.events,
    ...(body.sharedSecret === undefined ? {} : { sharedSecret: body.sharedSecret }),
  };
}

/** A change of some fields (PATCH), checked; `projectId` names the webhook's project and changes nothing. */
async function checkWebhookPatch(body: WebhookPatchBody, ctx: CheckContext): Promise<WebhookPatch> {
  await checkFields(body, ctx);
  const { projectId: _, ...patch } = body;
  return patch;
}

/** The webhook routes under the prefix the caller registers them at. */
export async function webhookRoutes(app: FastifyInstance, deps: WebhookRoutesDeps): Promise<void> {
  webhookWriteRoutes(app, deps);
  webhookReadRoutes(app, deps);
  deliveryRoutes(app, deps);
}

/** Create, replace, change: the body checked as checkWebhookRequest (or checkWebhookPatch) says. */
function webhookWriteRoutes(app: FastifyInstance, deps: WebhookRoutesDeps): void {
  const { auth } = deps;
  const onRequest = auth.hook;
  const input = (req: FastifyRequest<{ Body: WebhookRequestBody }>) =>
    checkWebhookRequest(req.body, { projectId: auth.of(req).projectId, rules: deps.rules });

  createRoute<WebhookRequestBody>(app, {
    url: '/webhook',
    summary: 'Create a webhook',
    body: WebhookRequest,
    answer: WebhookSchema,
    auth,
    idempotency: deps.idempotency,
    create: async (req, p) => {
      const row = await deps.webhooks.create(p.owner, p.projectId, await input(req));
      req.log.info({ webhookId: row.id, owner: p.owner }, 'webhook created');
      return toWireWebhook(row);
    },
  });

  app.put<{ Params: Static<typeof WebhookId>; Body: WebhookRequestBody }>(
    '/webhook/:id',
    {
      onRequest,
      schema: {
        summary: 'Replace a webhook (as Livepeer: a sharedSecret left out is removed)',
        params: WebhookId,
        body: WebhookRequest,
        response: { 200: WebhookSchema, 404: Errors, 422: Errors },
      },
    },
    async (req) => {
      const owner = auth.of(req).owner;
      // 404 before 422: another owner's webhook does not exist, whatever the body says.
      await deps.webhooks.get(owner, req.params.id);
      return toWireWebhook(await deps.webhooks.update(owner, req.params.id, await input(req)));
    },
  );
  patchRoute(app, deps);
}

/** PATCH: the fields given change, the others (the secret above all) stay; not Livepeer's, whose SDK uses PUT. */
function patchRoute(app: FastifyInstance, deps: WebhookRoutesDeps): void {
  const { auth } = deps;
  app.patch<{ Params: Static<typeof WebhookId>; Body: WebhookPatchBody }>(
    '/webhook/:id',
    {
      onRequest: auth.hook,
      schema: {
        summary:
          'Change some fields of a webhook (a field left out stays, the secret too; sharedSecret null removes it)',
        params: WebhookId,
        body: WebhookPatchRequest,
        response: { 200: WebhookSchema, 404: Errors, 422: Errors },
      },
    },
    async (req) => {
      const p = auth.of(req);
      // 404 before 422, as PUT.
      await deps.webhooks.get(p.owner, req.params.id);
      const patch = await checkWebhookPatch(req.body, { projectId: p.projectId, rules: deps.rules });
      return toWireWebhook(await deps.webhooks.patch(p.owner, req.params.id, patch));
    },
  );
}

/** List, get, delete. */
function webhookReadRoutes(app: FastifyInstance, deps: WebhookRoutesDeps): void {
  const { auth } = deps;
  const onRequest = auth.hook;
  app.get<{ Querystring: ListQuery }>(
    '/webhook',
    {
      onRequest,
      schema: {
        summary: 'List webhooks, newest first',
        querystring: ListQuery,
        response: { 200: Type.Array(WebhookSchema) },
      },
    },
    async (req, reply) => {
      const read = (page: PageOptions) => deps.webhooks.list(auth.of(req).owner, page);
      return (await pageOf(req, reply, { publicUrl: deps.publicUrl, read })).webhooks.map(toWireWebhook);
    },
  );
  const one = [
    { method: 'GET', summary: 'Get a webhook', act: (o: string, id: string) => deps.webhooks.get(o, id) },
    {
      method: 'DELETE',
      summary: 'Delete a webhook: no more deliveries to it',
      act: (o: string, id: string) => deps.webhooks.delete(o, id),
    },
  ] as const;
  for (const r of one)
    app.route<{ Params: Static<typeof WebhookId> }>({
      method: r.method,
      url: '/webhook/:id',
      onRequest,
      schema: { summary: r.summary, params: WebhookId, response: { 200: WebhookSchema, 404: Errors } },
      handler: async (req) => toWireWebhook(await r.act(auth.of(req).owner, req.params.id)),
    });
}

/** A webhook's delivery attempts: the list, one, and sending one again. */
function deliveryRoutes(app: FastifyInstance, deps: WebhookRoutesDeps): void {
  const { auth } = deps;
  const onRequest = auth.hook;
  app.get<{ Params: Static<typeof WebhookId>; Querystring: ListQuery }>(
    '/webhook/:id/log',
    {
      onRequest,
      schema: {
        summary: "A webhook's delivery attempts, newest first",
        params: WebhookId,
        querystring: ListQuery,
        response: { 200: Type.Array(WebhookLogSchema), 404: Errors },
      },
    },
    async (req, reply) => {
      const read = (page: PageOptions) => deps.webhooks.logs(auth.of(req).owner, req.params.id, page);
      return (await pageOf(req, reply, { publicUrl: deps.publicUrl, read })).logs.map(toWireWebhookLog);
    },
  );
  const resend = {
    summary: 'Send the event of a delivery attempt again, now; answers the new attempt',
    description:
      'Takes one of the delivery slots (MEDIAPLANE_WEBHOOK_CONCURRENCY), at most MEDIAPLANE_WEBHOOK_RESENDS_PER_MINUTE an owner; beyond either, 429 with Retry-After.',
  };
  const one = [
    {
      method: 'GET',
      url: '/webhook/:id/log/:logId',
      schema: { summary: 'One delivery attempt: the request as sent, the response as received' },
      responses: { 200: WebhookLogSchema, 404: Errors },
      act: (o: string, p: Static<typeof LogId>) => deps.webhooks.log(o, p.id, p.logId),
    },
    {
      method: 'POST',
      url: '/webhook/:id/log/:logId/resend',
      schema: resend,
      responses: { 200: WebhookLogSchema, 404: Errors, 429: Errors },
      act: (o: string, p: Static<typeof LogId>) => deps.webhookDispatcher.resend(o, p.id, p.logId),
    },
  ] as const;
  for (const r of one)
    app.route<{ Params: Static<typeof LogId> }>({
      method: r.method,
      url: r.url,
      onRequest,
      schema: { ...r.schema, params: LogId, response: r.responses },
      handler: async (req) => toWireWebhookLog(await r.act(auth.of(req).owner, req.params)),
    });
}
