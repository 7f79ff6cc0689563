// Per-key Prometheus counters (issue #32), only where MEDIAPLANE_METRICS_PER_KEY is on: a
// series per API key is unbounded label cardinality, so it is the operator's choice.
//
// They are read from api_key_days at scrape time rather than counted in memory: the request
// path pays nothing for them, and every API and gateway process reports the same totals of
// the whole cluster (as mediaplane_tasks does): aggregate them with max by (key_id), not sum.

import { Counter, type Registry } from 'prom-client';
import type { Queryable } from '../db/index.ts';

/** Adds mediaplane_key_requests_total and mediaplane_key_tokens_total to `registry`. */
export function registerKeyMetrics(db: Queryable, registry: Registry): void {
  // One query per scrape feeds both counters: the one collected first reads, the other takes its rows.
  let pending: Promise<Array<{ key_id: string; owner: string; requests: number; tokens: number }>> | undefined;
  const read = () => {
    pending ??= db
      .query<{ key_id: string; owner: string; requests: number; tokens: number }>(
        `SELECT key_id::text, owner, sum(requests)::float8 AS requests, sum(tokens)::float8 AS tokens
         FROM api_key_days GROUP BY key_id, owner`,
      )
      .finally(() => setTimeout(() => (pending = undefined), 0));
    return pending;
  };
  const counter = (name: string, help: string, field: 'requests' | 'tokens') =>
    new Counter({
      name,
      help,
      labelNames: ['key_id', 'owner'],
      registers: [registry],
      async collect() {
        const rows = await read();
        this.reset();
        for (const r of rows) this.inc({ key_id: r.key_id, owner: r.owner }, r[field]);
      },
    });
  counter(
    'mediaplane_key_requests_total',
    'Requests each API key made that the limiter let through (all processes, from the database)',
    'requests',
  );
  counter(
    'mediaplane_key_tokens_total',
    'LLM tokens billed to each API key (all processes, from the database)',
    'tokens',
  );
}
