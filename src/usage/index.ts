// Usage (issue #32): what an owner's keys did, per day, model and key, read from the limiter's
// day counts, the LLM ledger and the task history; and per-key Prometheus counters.
export { registerKeyMetrics } from './metrics.ts';
export { readUsage, type DayUsage, type KeyUsage, type ModelUsage, type Usage, type UsageFigures } from './report.ts';
export { UsageStore, type KeyRow, type UsageRange, type UsageTaskTypes } from './store.ts';
