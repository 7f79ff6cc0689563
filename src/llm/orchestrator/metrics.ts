// What the orchestrator adds to GET /metrics. Every figure is read from its state when scraped
// (the same one /capabilities shows gateways), so generation itself does no extra work.

import { Counter, Gauge, type Registry as MetricsRegistry } from 'prom-client';
import { capabilities, type OrchestratorState } from './routes.ts';

export function orchestratorMetrics(metrics: MetricsRegistry, s: OrchestratorState): void {
  const registers = [metrics];
  const perModel = (
    name: string,
    help: string,
    value: (m: ReturnType<typeof capabilities>['models'][number]) => number,
  ): void => {
    new Gauge({
      name,
      help,
      labelNames: ['model'],
      registers,
      collect() {
        for (const m of capabilities(s).models) this.set({ model: m.id }, value(m));
      },
    });
  };
  perModel(
    'mediaplane_orchestrator_sequences_free',
    'Sequences (MAX_NUM_SEQS per model) free for a new request',
    (m) => m.free,
  );
  perModel('mediaplane_orchestrator_requests_queued', 'Requests waiting for a free sequence', (m) => m.queued);
  perModel('mediaplane_orchestrator_model_warm', '1 when the model is loaded, 0 when it loads on first use', (m) =>
    Number(m.warm),
  );
  new Gauge({
    name: 'mediaplane_orchestrator_requests_active',
    help: 'Requests generating now',
    registers,
    collect() {
      this.set(s.stats.active);
    },
  });
  new Counter({
    name: 'mediaplane_orchestrator_tokens_computed_total',
    help: 'Output tokens the engine computed since start (abandoned requests stop adding to it)',
    registers,
    collect() {
      // The engine keeps the count; a counter set to it at scrape time.
      this.reset();
      this.inc(s.engine.tokensComputed);
    },
  });
}
