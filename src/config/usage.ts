import { defineSettings } from './types.ts';

// Settings of usage reporting. Per-key figures are a label per API key on every
// scrape, so they are off unless the operator asks (Prometheus' advice on label cardinality).
export const usageSettings = defineSettings({
  metricsPerKey: {
    env: 'MEDIAPLANE_METRICS_PER_KEY',
    type: 'bool',
    group: 'server',
    default: false,
    description:
      'GET /metrics adds mediaplane_key_requests_total and mediaplane_key_tokens_total per API key (labels key_id, owner), read from the usage table: one series per key.',
  },
});
