// Webhooks (issue #18): owners subscribe URLs to task events; every event of the outbox
// (task_events) reaches each subscribed URL at least once, signed as Livepeer signs.
export { purgeWebhookDeliveries, purgeWebhookLogs, WebhookStore } from './store.ts';
export { DELIVERIES_CHANNEL, WebhookDispatcher, type WebhookDispatcherOptions } from './dispatcher.ts';
export { retryDelay, USER_AGENT, verdictOf } from './attempt.ts';
export { fairShare, ResendLimitError } from './limits.ts';
export { SIGNATURE_HEADER, signBody, signatureHeaders } from './sign.ts';
export type {
  DeliveryLogRow,
  Page,
  WebhookEvent,
  WebhookFailure,
  WebhookInput,
  WebhookPatch,
  WebhookRow,
} from './types.ts';
