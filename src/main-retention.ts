import { purgeExpiredIdempotencyKeys } from './api/index.ts';
import { Sweeper } from './lib/sweep.ts';
import type { Config } from './config/index.ts';
import type { Db } from './db/index.ts';
import type { Logger } from './lib/log.ts';
import type { Queue, TaskStore } from './tasks/index.ts';
import type { AssetStore } from './assets/index.ts';
import type { BuiltinStore } from './storage/builtin/index.ts';
import { archiveRetentionJob } from './live/index.ts';
import { removeEndedPieces } from './transcode/index.ts';
import { purgeWebhookDeliveries, purgeWebhookLogs } from './webhooks/index.ts';

// Part of the composition root (main.ts): the retention sweep of the processes that run tasks.

/** How often a worker process sweeps old history: rows only age by the hour, and each sweep is cheap when nothing is due. */
const RETENTION_SWEEP_MS = 10 * 60_000;

/**
 * Retention (issue #25): deletes, a batch at a time, webhook logs past their retention, then
 * finished deliveries no log names and task events fanned out to webhooks with no delivery
 * left past theirs, then Idempotency-Keys past their 24 h. Work not yet done (an event not
 * fanned out, a delivery not yet made or given up) is never deleted.
 */
/** What the sweep reads of the service's core (main.ts Core). */
interface RetentionDeps {
  db: Db;
  config: Pick<Config, 'webhookLogRetentionMs' | 'taskEventsRetentionMs' | 'liveClipSecs'>;
  queue: Queue;
  log: Logger;
  assets: AssetStore;
  tasks: TaskStore;
  builtinStore: BuiltinStore;
}

export function createRetentionSweep(core: RetentionDeps, o: { everyMs?: number; batch?: number } = {}): Sweeper {
  const { db, config, queue } = core;
  const logs = { olderThanMs: config.webhookLogRetentionMs };
  const events = { olderThanMs: config.taskEventsRetentionMs };
  return new Sweeper({
    log: core.log.child({ role: 'retention' }),
    everyMs: o.everyMs ?? RETENTION_SWEEP_MS,
    batch: o.batch ?? 1000,
    jobs: [
      { name: 'webhook_logs', run: (limit) => purgeWebhookLogs(db, { ...logs, limit }) },
      { name: 'webhook_deliveries', run: (limit) => purgeWebhookDeliveries(db, { ...events, limit }) },
      { name: 'task_events', run: (limit) => queue.purgeEvents({ ...events, limit }) },
      { name: 'idempotency_keys', run: (limit) => purgeExpiredIdempotencyKeys(db, limit) },
      // Deleted assets whose files could not all be removed at once (issue #27).
      { name: 'asset_deletes', run: (limit) => core.assets.finishDeletes(limit) },
      // The pieces' files of chunked tasks that failed or were cancelled (issue #30).
      {
        name: 'split_pieces',
        run: (limit) => removeEndedPieces({ tasks: core.tasks, store: core.builtinStore }, { limit }),
      },
      // Live sessions' archived source past MEDIAPLANE_LIVE_CLIP_SECS (a recorded one's once its recording is made).
      archiveRetentionJob({ db, store: core.builtinStore, clipSecs: config.liveClipSecs }),
    ],
  });
}
