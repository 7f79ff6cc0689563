// What the gateway adds to GET /metrics: completions by outcome, tokens, time to first token,
// failovers, and the orchestrators it knows. The model label only takes models some
// orchestrator offers (counted after candidates were found), and the orchestrator label only
// configured or registered ones, so a client cannot grow them.

import { Counter, Gauge, Histogram, type Registry as MetricsRegistry } from 'prom-client';
import type { Usage } from '../protocol/index.ts';
import type { OrchestratorPool } from './pool.ts';

/** How a completion that reached an orchestrator ended. */
export type CompletionOutcome = 'completed' | 'failed' | 'cancelled' | 'refused';

export interface GatewayMetrics {
  firstToken(model: string, seconds: number): void;
  /** An orchestrator failed before the client got anything; the request goes on to the next, if any. */
  failedBeforeFirstToken(model: string, orchestrator: string): void;
  finished(model: string, outcome: CompletionOutcome, usage?: Usage): void;
}

export function gatewayMetrics(metrics: MetricsRegistry, pool: OrchestratorPool): GatewayMetrics {
  const registers = [metrics];
  const completions = new Counter({
    name: 'mediaplane_llm_completions_total',
    help: 'Chat completions by model and outcome (completed, failed, cancelled by the client, refused for credit)',
    labelNames: ['model', 'outcome'],
    registers,
  });
  const tokens = new Counter({
    name: 'mediaplane_llm_tokens_total',
    help: 'Tokens of completed answers, as the engine counted them (kind: prompt or completion)',
    labelNames: ['model', 'kind'],
    registers,
  });
  const failovers = new Counter({
    name: 'mediaplane_llm_failovers_total',
    help: 'Orchestrators that failed a request before the client got any of it (streaming: its first token; otherwise the whole answer); it went on to the next, if there was one',
    labelNames: ['model', 'orchestrator'],
    registers,
  });
  const ttft = new Histogram({
    name: 'mediaplane_llm_time_to_first_token_seconds',
    help: 'From the request reaching the gateway to its first token from an orchestrator',
    labelNames: ['model'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
  new Gauge({
    name: 'mediaplane_llm_orchestrators',
    help: 'Orchestrators this gateway knows, by state (up: answered its last poll and not marked down after a failure)',
    labelNames: ['state'],
    registers,
    collect() {
      const now = Date.now();
      const up = pool.all().filter((o) => o.reachable && o.downUntil <= now).length;
      this.set({ state: 'up' }, up);
      this.set({ state: 'down' }, pool.all().length - up);
    },
  });
  new Gauge({
    name: 'mediaplane_llm_inflight',
    help: 'Completions this gateway is relaying now',
    registers,
    collect() {
      this.set(pool.all().reduce((n, o) => n + o.inflight, 0));
    },
  });
  return {
    firstToken: (model, seconds) => ttft.observe({ model }, seconds),
    failedBeforeFirstToken: (model, orchestrator) => failovers.inc({ model, orchestrator }),
    finished(model, outcome, usage) {
      completions.inc({ model, outcome });
      if (!usage) return;
      tokens.inc({ model, kind: 'prompt' }, usage.prompt_tokens);
      tokens.inc({ model, kind: 'completion' }, usage.completion_tokens);
    },
  };
}
