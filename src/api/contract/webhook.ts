import { Type, type Static } from '@sinclair/typebox';
import { ERROR_MESSAGE } from '../../lib/schema-errors.ts';
import { ASSET_EVENT_NAMES } from '../../assets/index.ts';
import { STREAM_EVENT_NAMES } from '../../live/index.ts';
import { TASK_EVENT_NAMES } from '../../tasks/index.ts';
import type { DeliveryLogRow, WebhookRow } from '../../webhooks/index.ts';

// The wire contract of the webhook routes (issue #18, spec/API.md section A "Webhooks"):
// Livepeer Studio's shapes, as the `livepeer` SDK sends and parses them (its models
// components/webhook.ts WebhookInput and Webhook, components/webhooklog.ts WebhookLog; the SDK
// checks every answer with zod, so what it requires is always here). The domain (webhooks/)
// has its own rows and never imports this file.

/**
 * The events a webhook may subscribe to: the task events (tasks/events.ts; Livepeer has no
 * cancel event), the asset events (assets/types.ts) and the live stream events
 * (live/event-names.ts), as their domains name them.
 */
export const WEBHOOK_EVENTS = [...TASK_EVENT_NAMES, ...ASSET_EVENT_NAMES, ...STREAM_EVENT_NAMES] as const;

const EVENTS_LIST = WEBHOOK_EVENTS.map((e) => JSON.stringify(e)).join(', ');

// The fields of a webhook as an owner sends them: all of them to create or replace one (POST,
// PUT), any of them to change it (PATCH).
const Name = Type.String({
  minLength: 1,
  maxLength: 256,
  [ERROR_MESSAGE]: { required: 'is required', default: 'must be a string of 1 to 256 characters' },
});
const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  description:
    'Where events are POSTed: http:// or https://, no user name or password. Addresses that are loopback, private, link-local or metadata are refused unless the operator allows them (MEDIAPLANE_ALLOW_PRIVATE_URLS), here and again when each delivery connects; redirects are not followed.',
  [ERROR_MESSAGE]: {
    required: 'is required',
    default: 'must be an http:// or https:// URL of at most 2,048 characters',
  },
});
const Events = Type.Array(
  Type.Union(
    WEBHOOK_EVENTS.map((e) => Type.Literal(e)),
    {
      [ERROR_MESSAGE]: `must be one of ${EVENTS_LIST} (this server sends task, asset, stream, recording and multistream events only; got {value})`,
    },
  ),
  {
    minItems: 1,
    maxItems: WEBHOOK_EVENTS.length,
    uniqueItems: true,
    description: 'The events to receive.',
    [ERROR_MESSAGE]: {
      required: 'is required',
      minItems: `must list at least one of ${EVENTS_LIST}`,
      maxItems: 'must not list an event twice',
      uniqueItems: 'must not list an event twice',
      default: `must be an array of ${EVENTS_LIST}`,
    },
  },
);
const SharedSecret = Type.String({
  minLength: 1,
  maxLength: 1024,
  description:
    'Signs every delivery: `Livepeer-Signature: t=<ms>,v1=<hex HMAC-SHA256 of the raw body keyed by the secret>`. Never shown again. PUT replaces the webhook: leaving the secret out removes it, as Livepeer does (PATCH keeps it).',
  [ERROR_MESSAGE]: 'must be a string of 1 to 1,024 characters (leave it out for unsigned deliveries)',
});
const ProjectId = Type.String({
  maxLength: 64,
  description: "The API key's project (Livepeer's WebhookInput has it); any other is refused.",
});

export const WebhookRequest = Type.Object(
  {
    name: Name,
    url: Url,
    events: Events,
    sharedSecret: Type.Optional(SharedSecret),
    projectId: Type.Optional(ProjectId),
  },
  { additionalProperties: false },
);
export type WebhookRequestBody = Static<typeof WebhookRequest>;

/**
 * PATCH: a JSON merge patch (RFC 7396) of the webhook. A field left out stays as it is, the
 * secret included; `sharedSecret: null` removes it. Not Livepeer's (its PUT replaces).
 */
export const WebhookPatchRequest = Type.Object(
  {
    name: Type.Optional(Name),
    url: Type.Optional(Url),
    events: Type.Optional(Events),
    sharedSecret: Type.Optional(
      // Its own words: "leave it out" keeps the secret here.
      Type.Union([Type.String({ minLength: 1, maxLength: 1024 }), Type.Null()], {
        description:
          'A new secret; null removes it (deliveries go unsigned); left out, the secret stays as it is. Never shown again.',
        [ERROR_MESSAGE]: 'must be a string of 1 to 1,024 characters, or null to remove the secret',
      }),
    ),
    projectId: Type.Optional(ProjectId),
  },
  { additionalProperties: false },
);
export type WebhookPatchBody = Static<typeof WebhookPatchRequest>;

const LastFailure = Type.Object(
  {
    timestamp: Type.Number({ description: 'ms' }),
    statusCode: Type.Optional(Type.Integer()),
    error: Type.Optional(Type.String()),
    response: Type.Optional(Type.String({ description: "The response body's first KB" })),
  },
  { additionalProperties: false },
);

/** Livepeer's Webhook. No `sharedSecret`: the SDK's schema does not require one, and it is never shown. */
export const WebhookSchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    kind: Type.Literal('webhook'),
    projectId: Type.String(),
    createdAt: Type.Number({ description: 'ms' }),
    updatedAt: Type.Number({ description: 'ms' }),
    events: Type.Array(Type.String()),
    url: Type.String(),
    signed: Type.Boolean({
      description:
        'Whether deliveries are signed (Livepeer-Signature): the webhook has a shared secret, never shown itself.',
    }),
    status: Type.Object(
      { lastTriggeredAt: Type.Optional(Type.Number({ description: 'ms' })), lastFailure: Type.Optional(LastFailure) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type WireWebhook = Static<typeof WebhookSchema>;

/** Livepeer's WebhookLog: one delivery attempt. */
export const WebhookLogSchema = Type.Object(
  {
    id: Type.String(),
    webhookId: Type.String(),
    eventId: Type.String({ description: "The event's id, the envelope's `id`, the same in every attempt" }),
    event: Type.String(),
    createdAt: Type.Number({ description: 'ms' }),
    duration: Type.Number({ description: 'The time the request took, in seconds (as Livepeer)' }),
    success: Type.Boolean(),
    error: Type.Optional(Type.String({ description: 'Why no response came (a network error, a timeout)' })),
    request: Type.Object(
      {
        url: Type.String(),
        method: Type.String(),
        headers: Type.Record(Type.String(), Type.String()),
        body: Type.String(),
      },
      { additionalProperties: false },
    ),
    response: Type.Object(
      {
        status: Type.Optional(Type.Integer()),
        statusText: Type.Optional(Type.String()),
        body: Type.Optional(Type.String({ description: 'The first KB' })),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type WireWebhookLog = Static<typeof WebhookLogSchema>;

export function toWireWebhook(row: WebhookRow): WireWebhook {
  const status: WireWebhook['status'] = {};
  if (row.lastTriggeredAt) status.lastTriggeredAt = row.lastTriggeredAt.getTime();
  if (row.lastFailure) {
    const f = row.lastFailure;
    status.lastFailure = {
      timestamp: f.timestamp.getTime(),
      ...(f.statusCode === undefined ? {} : { statusCode: f.statusCode }),
      ...(f.error === undefined ? {} : { error: f.error }),
      ...(f.response === undefined ? {} : { response: f.response }),
    };
  }
  return {
    id: row.id,
    name: row.name,
    kind: 'webhook',
    projectId: row.projectId,
    createdAt: row.createdAt.getTime(),
    updatedAt: row.updatedAt.getTime(),
    events: [...row.events],
    url: row.url,
    signed: row.signed,
    status,
  };
}

export function toWireWebhookLog(row: DeliveryLogRow): WireWebhookLog {
  const response: WireWebhookLog['response'] = {};
  if (row.statusCode !== null) response.status = row.statusCode;
  if (row.statusText !== null) response.statusText = row.statusText;
  if (row.responseBody !== null) response.body = row.responseBody;
  return {
    id: row.id,
    webhookId: row.webhookId,
    eventId: row.eventId,
    event: row.event,
    createdAt: row.createdAt.getTime(),
    duration: row.durationMs / 1000,
    success: row.success,
    ...(row.error === null ? {} : { error: row.error }),
    request: { url: row.url, method: 'POST', headers: { ...row.requestHeaders }, body: row.requestBody },
    response,
  };
}
