// A real worker process for the multi-process tests: the production Worker and queue with
// either a stand-in job that logs when it starts and ends and takes WORKER_JOB_MS to run, or
// (WORKER_HANDLER=transcode) the production transcode handler, as `mediaplane worker` runs it.
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../src/config/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { createWorker, openCore } from '../../src/main.ts';
import { type JobHandler, Worker } from '../../src/tasks/index.ts';
import { sleep } from './sleep.ts';

const runLog = process.env.WORKER_RUN_LOG ?? '';
const jobMs = Number(process.env.WORKER_JOB_MS ?? '1000');
const config = loadConfig({ env: process.env });
// WORKER_LOG_FILE: the worker's JSON log lines go there (the soak reads them), else nowhere.
const logFile = process.env.WORKER_LOG_FILE;
const log = logFile
  ? createLogger({ level: 'info', destination: pino.destination({ dest: logFile, append: true, sync: true }) })
  : createLogger({ level: 'silent' });
const core = await openCore(config, log);

const standIn: JobHandler = async (_params, ctx) => {
  appendFileSync(runLog, `start ${ctx.taskId} ${process.pid}\n`);
  await sleep(jobMs, ctx.signal);
  appendFileSync(runLog, `done ${ctx.taskId} ${process.pid}\n`);
  return { input_video: { duration: 0, size: 0 }, worker: process.pid };
};

const worker =
  process.env.WORKER_HANDLER === 'transcode'
    ? createWorker(core)
    : new Worker({
        db: core.db,
        queue: core.queue,
        log,
        scratchRoot: join(config.dataDir, 'scratch'),
        concurrency: config.workerConcurrency,
        pollMs: config.pollMs,
        heartbeatMs: config.heartbeatMs,
        retryBackoffMs: config.retryBackoffMs,
        retryBackoffMaxMs: config.retryBackoffMaxMs,
        handlers: { 'transcode-file': standIn },
      });
await worker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void worker
    .stop(1000)
    .then(() => core.db.close())
    .then(() => process.exit(0));
});
