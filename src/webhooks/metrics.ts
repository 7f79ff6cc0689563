import { Counter, Gauge, Histogram, type Registry as MetricsRegistry } from 'prom-client';

// What webhook delivery adds to GET /metrics (issue #18, "Metrics"): deliveries by outcome,
// undelivered work waiting, and how long an event takes to reach its receiver.

export type DeliveryOutcome = 'delivered' | 'retried' | 'failed';

export interface WebhookMetrics {
  outcome(o: DeliveryOutcome): void;
  /** Seconds from the event to its delivery. */
  delivered(seconds: number): void;
}

export const noMetrics: WebhookMetrics = { outcome() {}, delivered() {} };

export function webhookMetrics(registry: MetricsRegistry, pending: () => Promise<number>): WebhookMetrics {
  const registers = [registry];
  const outcomes = new Counter({
    name: 'mediaplane_webhook_deliveries_total',
    help: 'Webhook delivery attempts by outcome: delivered, retried (failed, to be tried again), failed (given up)',
    labelNames: ['outcome'],
    registers,
  });
  for (const outcome of ['delivered', 'retried', 'failed']) outcomes.inc({ outcome }, 0);
  new Gauge({
    name: 'mediaplane_webhook_pending',
    help: 'Webhook deliveries not yet made and task events not yet fanned out to webhooks (all processes, from the database)',
    registers,
    async collect() {
      this.set(await pending());
    },
  });
  const latency = new Histogram({
    name: 'mediaplane_webhook_delivery_seconds',
    help: 'Time from a task event to its delivery to a webhook, retries included',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600, 86_400],
    registers,
  });
  return {
    outcome: (o) => outcomes.inc({ outcome: o }),
    delivered: (s) => latency.observe(s),
  };
}
