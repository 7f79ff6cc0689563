// A real worker process for the multi-process tests: the production Worker and queue with a
// stand-in job that logs when it starts and ends and takes WORKER_JOB_MS to run.
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { openCore } from '../../src/main.ts';
import { Worker } from '../../src/tasks/index.ts';

const runLog = process.env.WORKER_RUN_LOG ?? '';
const jobMs = Number(process.env.WORKER_JOB_MS ?? '1000');
const config = loadConfig({ env: process.env });
const core = await openCore(config, createLogger({ level: 'silent' }));
const worker = new Worker({
  db: core.db,
  queue: core.queue,
  log: createLogger({ level: 'silent' }),
  scratchRoot: join(config.dataDir, 'scratch'),
  concurrency: config.workerConcurrency,
  pollMs: config.pollMs,
  heartbeatMs: config.heartbeatMs,
  retryBackoffMs: config.retryBackoffMs,
  handlers: {
    'transcode-file': async (_params, ctx) => {
      appendFileSync(runLog, `start ${ctx.taskId} ${process.pid}\n`);
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, jobMs);
        ctx.signal.addEventListener(
          'abort',
          () => {
            clearTimeout(t);
            reject(ctx.signal.reason);
          },
          { once: true },
        );
      });
      appendFileSync(runLog, `done ${ctx.taskId} ${process.pid}\n`);
      return { input_video: { duration: 0, size: 0 }, worker: process.pid };
    },
  },
});
await worker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void worker
    .stop(1000)
    .then(() => core.db.close())
    .then(() => process.exit(0));
});
