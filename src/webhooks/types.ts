import type { AssetEventName } from '../assets/event-names.ts';
import type { StreamEventName } from '../live/event-names.ts';
import type { TaskEventName } from '../tasks/index.ts';

// The webhooks domain's own types (issue #18). The wire shape of a webhook and of a log
// (Livepeer's) is the API's business (api/contract/); these are what the store returns.

/**
 * The events a webhook may subscribe to: the events of the outbox, the task events, the
 * asset events migration 010 writes into it and the stream events of migration 500, as
 * tasks/, assets/ and live/ name them.
 */
export type WebhookEvent = TaskEventName | AssetEventName | StreamEventName;

/** What an owner sends to create or replace a webhook. */
export interface WebhookInput {
  name: string;
  url: string;
  events: WebhookEvent[];
  /** Signs every delivery (Livepeer-Signature) when set; stored, never read back out. */
  sharedSecret?: string | undefined;
}

/**
 * What an owner sends to change some of a webhook (PATCH, as a JSON merge patch, RFC 7396): a
 * field left out stays as it is; a `sharedSecret` of null is removed (deliveries go unsigned).
 */
export interface WebhookPatch {
  name?: string | undefined;
  url?: string | undefined;
  events?: WebhookEvent[] | undefined;
  sharedSecret?: string | null | undefined;
}

export interface WebhookFailure {
  timestamp: Date;
  statusCode?: number;
  error?: string;
  /** The first KB of the answer. */
  response?: string;
}

/** A webhook as the store returns it: the shared secret is never among its fields. */
export interface WebhookRow {
  id: string;
  owner: string;
  projectId: string;
  name: string;
  url: string;
  events: WebhookEvent[];
  createdAt: Date;
  updatedAt: Date;
  lastTriggeredAt: Date | null;
  lastFailure: WebhookFailure | null;
  /** Whether deliveries are signed: the webhook has a shared secret (which is never a field). */
  signed: boolean;
}

/** One attempt to deliver an event to a webhook. */
export interface DeliveryLogRow {
  id: string;
  webhookId: string;
  eventId: string;
  event: WebhookEvent;
  createdAt: Date;
  durationMs: number;
  url: string;
  /** The body as sent, byte for byte what was signed. */
  requestBody: string;
  /** The headers as sent: the signature is there, the secret never is. */
  requestHeaders: Record<string, string>;
  statusCode: number | null;
  statusText: string | null;
  /** Why no answer came (a network error, a timeout, a refused address); null when one did. */
  error: string | null;
  /** The first KB of the answer, as text. */
  responseBody: string | null;
  success: boolean;
}

export interface Page {
  limit: number;
  cursor?: string | undefined;
}
