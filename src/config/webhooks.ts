import { defineSettings } from './types.ts';

// Settings of the webhooks domain. They sit in the `tasks` group: the processes
// that run tasks (API and worker roles) are the ones that deliver their events.
export const webhookSettings = defineSettings({
  webhookTimeoutMs: {
    env: 'MEDIAPLANE_WEBHOOK_TIMEOUT_MS',
    type: 'int',
    group: 'tasks',
    default: 10_000,
    min: 100,
    max: 600_000,
    description:
      'How long one webhook delivery may take (connect, send, answer) before it counts as a failed attempt and is retried.',
  },
  webhookMaxAgeMs: {
    env: 'MEDIAPLANE_WEBHOOK_MAX_AGE_MS',
    type: 'int',
    group: 'tasks',
    default: 86_400_000,
    min: 0,
    description: 'How long an event is retried for after it happened; past it a failing delivery is given up.',
  },
  webhookRetryMs: {
    env: 'MEDIAPLANE_WEBHOOK_RETRY_MS',
    type: 'int',
    group: 'tasks',
    default: 1000,
    min: 1,
    description: 'Delay before the second attempt of a webhook delivery; it doubles with each attempt (with jitter).',
  },
  webhookRetryMaxMs: {
    env: 'MEDIAPLANE_WEBHOOK_RETRY_MAX_MS',
    type: 'int',
    group: 'tasks',
    default: 3_600_000,
    min: 1,
    description: 'Longest delay between two attempts of a webhook delivery.',
  },
  webhookPollMs: {
    env: 'MEDIAPLANE_WEBHOOK_POLL_MS',
    type: 'int',
    group: 'tasks',
    default: 1000,
    min: 10,
    description:
      'How often an idle process looks for task events and due webhook deliveries (NOTIFY wakes it at once).',
  },
  webhookConcurrency: {
    env: 'MEDIAPLANE_WEBHOOK_CONCURRENCY',
    type: 'int',
    group: 'tasks',
    default: 16,
    min: 1,
    max: 1024,
    description:
      'Webhook deliveries (resends included) one process sends at once; an owner holds at most its fair share while others wait.',
  },
  maxWebhooksPerOwner: {
    env: 'MEDIAPLANE_MAX_WEBHOOKS_PER_OWNER',
    type: 'int',
    group: 'tasks',
    default: 20,
    min: 1,
    max: 10_000,
    description:
      'Webhooks an owner may have; creating one more answers 422. It also caps the POSTs one task event fans out to.',
  },
  webhookResendsPerMinute: {
    env: 'MEDIAPLANE_WEBHOOK_RESENDS_PER_MINUTE',
    type: 'int',
    group: 'tasks',
    default: 30,
    min: 1,
    max: 100_000,
    description:
      'Resends (POST /api/webhook/{id}/log/{logId}/resend) an owner may make per minute on one process, in a burst or spread; more answer 429 with Retry-After.',
  },
});
