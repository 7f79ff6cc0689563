import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { Type } from '@sinclair/typebox';
import { createLogger } from '../../src/lib/log.ts';
import { UnsupportedMediaError, UpstreamUnavailableError } from '../../src/lib/errors.ts';
import { checkedHandler, Worker, type JobHandler } from '../../src/tasks/index.ts';
import { databaseKinds, startTestServer, transcodeBody, waitFor, type TestServer } from '../helpers/server.ts';
import { sleep } from '../helpers/sleep.ts';

// The queue and worker with stand-in job handlers (the pipeline has its own tests): what
// matters here is what a client sees of a job's life: phases, progress, retries, cancel.

for (const { kind, skip } of await databaseKinds()) {
  describe(`worker and queue (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let key: string;
    const workers: Worker[] = [];

    function startWorker(handler: JobHandler, opts: { concurrency?: number; id?: string } = {}): Worker {
      const core = server.running.core;
      const w = new Worker({
        db: core.db,
        queue: core.queue,
        handlers: { 'transcode-file': handler },
        log: createLogger({ level: 'silent' }),
        scratchRoot: join(server.dataDir, 'scratch'),
        concurrency: opts.concurrency ?? 1,
        pollMs: 50,
        heartbeatMs: 200,
        retryBackoffMs: 20,
        progressEveryMs: 50,
        ...(opts.id ? { workerId: opts.id } : {}),
      });
      workers.push(w);
      return w;
    }
    async function stopWorkers() {
      await Promise.all(workers.splice(0).map((w) => w.stop(500)));
    }
    const create = async () =>
      (await server.call('POST', '/api/transcode', { key, body: transcodeBody() })).body.id as string;
    const get = async (id: string) => (await server.call('GET', `/api/task/${id}`, { key })).body;
    const phase = (id: string, want: string) =>
      waitFor(async () => ((await get(id)).status.phase === want ? get(id) : null), 15_000, `phase ${want}`);

    before(async () => {
      server = await startTestServer({
        database: kind,
        roles: { api: true, worker: false },
        settings: { maxRetries: 2, leaseMs: 1000, maxQueuedPerOwner: 1000 },
      });
      key = await server.key('alice');
    });
    // A failed test must not leave its worker claiming the next test's tasks.
    afterEach(() => stopWorkers());
    after(() => server.stop());

    it('runs a job to completion with rising progress and removes its scratch dir', async () => {
      let scratch = '';
      let release = () => {};
      const gate = new Promise<void>((r) => (release = r));
      await startWorker(async (_p, ctx) => {
        scratch = ctx.scratchDir;
        assert.ok(existsSync(ctx.scratchDir));
        ctx.progress(0.5);
        await gate;
        return { input_video: { duration: 1, size: 2 } };
      }).start();
      const id = await create();
      const running = await waitFor(
        async () => {
          const t = await get(id);
          return t.status.phase === 'running' && t.status.progress === 0.5 ? t : null;
        },
        10_000,
        'progress 0.5',
      );
      assert.equal(running.status.progress, 0.5);
      release();
      const done = await phase(id, 'completed');
      assert.equal(done.status.progress, 1);
      assert.deepEqual(done.output, { transcodeFile: { input_video: { duration: 1, size: 2 } } });
      // The credentials are gone from the stored row once nothing can run the task again.
      const [row] = await server.running.core.db.query<{ params: string }>(
        'SELECT params::text AS params FROM tasks WHERE id = $1',
        [id],
      );
      assert.ok(row && !row.params.includes('credentials') && !row.params.includes('sEcReT'), row?.params);
      assert.deepEqual(done.params['transcode-file'].storage.credentials, {
        accessKeyId: '***',
        secretAccessKey: '***',
      });
      assert.ok(!existsSync(scratch), 'scratch dir removed');
      await stopWorkers();
    });

    it('retries a retryable failure with backoff, then fails with the message after the limit', async () => {
      let calls = 0;
      await startWorker(async () => {
        calls++;
        throw new UpstreamUnavailableError('storage answered 503; will retry');
      }).start();
      const id = await create();
      const failed = await phase(id, 'failed');
      assert.equal(calls, 3, 'first run plus two retries');
      assert.equal(failed.status.retries, 2);
      assert.equal(failed.status.errorMessage, 'storage answered 503; will retry');
      await stopWorkers();
    });

    it('fails a non-retryable error at once, and retry requeues it', async () => {
      let calls = 0;
      await startWorker(async () => {
        calls++;
        if (calls === 1) throw new UnsupportedMediaError('the input is not a video: no video stream found');
        return { input_video: { duration: 1, size: 1 } };
      }).start();
      const id = await create();
      const failed = await phase(id, 'failed');
      assert.equal(calls, 1);
      assert.equal(failed.status.errorMessage, 'the input is not a video: no video stream found');
      assert.equal(failed.status.retries, undefined);
      const retried = await server.call('POST', `/api/task/${id}/retry`, { key });
      assert.equal(retried.body.status.phase, 'waiting');
      const done = await phase(id, 'completed');
      assert.equal(done.status.errorMessage, undefined);
      assert.equal(calls, 2);
      await stopWorkers();
    });

    it('an unexpected error fails the task with a generic message (no internals on the wire)', async () => {
      await startWorker(async () => {
        throw new TypeError("Cannot read properties of undefined (reading 'secret')");
      }).start();
      const id = await create();
      const failed = await phase(id, 'failed');
      assert.equal(failed.status.errorMessage, 'internal error while running the task');
      await stopWorkers();
    });

    it('a task whose stored params no longer fit its type fails with a message naming the field; the worker goes on', async () => {
      // The task type's schema of its stored params (transcode-file's is in transcode/handler.ts).
      const schema = Type.Object({
        outputs: Type.Object({ hls: Type.Object({ path: Type.String() }) }),
        targetSegmentSizeSecs: Type.Optional(Type.Number()),
      });
      const ran: string[] = [];
      const bad = await create();
      const good = await create();
      // A row as another version of the service (or a hand) might have left it; no worker runs yet.
      await server.running.core.db.query(
        `UPDATE tasks SET params = (params - 'outputs') || '{"targetSegmentSizeSecs": "six"}' WHERE id = $1`,
        [bad],
      );
      await startWorker(
        checkedHandler(schema, async (params, ctx) => {
          ran.push(`${ctx.taskId} ${params.outputs.hls.path}`);
          return { input_video: { duration: 1, size: 1 } };
        }),
      ).start();
      const failed = await phase(bad, 'failed');
      assert.match(failed.status.errorMessage, /^the task's stored params do not fit its type/);
      assert.match(failed.status.errorMessage, /outputs: is required/);
      assert.match(failed.status.errorMessage, /targetSegmentSizeSecs: must be a number/);
      assert.equal(failed.status.retries, undefined, 'not retried: the row will not fit the next time either');
      await phase(good, 'completed');
      assert.deepEqual(ran, [`${good} /out/hls`], 'the handler ran for the good task only');
      await stopWorkers();
    });

    it('cancel reaches a running job through its AbortSignal', async () => {
      let aborted = false;
      let started = false;
      await startWorker(async (_p, ctx) => {
        started = true;
        try {
          await sleep(30_000, ctx.signal);
        } catch (err) {
          aborted = true;
          throw err;
        }
        return {};
      }).start();
      const id = await create();
      await waitFor(async () => started, 10_000, 'job start');
      const t0 = Date.now();
      const res = await server.call('POST', `/api/task/${id}/cancel`, { key });
      assert.equal(res.body.status.phase, 'cancelled');
      await waitFor(async () => aborted, 5_000, 'abort');
      assert.ok(Date.now() - t0 < 5_000);
      await sleep(300);
      assert.equal((await get(id)).status.phase, 'cancelled', 'the worker did not overwrite the cancel');
      await stopWorkers();
    });

    it('takes back a task whose worker stopped heartbeating, once its lease expires', async () => {
      const id = await create();
      const claimed = await server.running.core.queue.claim('worker-that-died', 1);
      assert.deepEqual(
        claimed.map((t) => t.id),
        [id],
      );
      let ranAt = 0;
      await startWorker(async () => {
        ranAt = Date.now();
        return { input_video: { duration: 0, size: 0 } };
      }).start();
      const t0 = Date.now();
      const done = await phase(id, 'completed');
      assert.ok(ranAt - t0 >= 500, 'not taken before the lease ran out');
      assert.equal(done.status.retries, 1, 'a dead worker counts as one retry');
      await stopWorkers();
    });

    it('on shutdown, hands a running job back to the queue untouched', async () => {
      let started = false;
      const w = startWorker(async (_p, ctx) => {
        started = true;
        await sleep(30_000, ctx.signal);
        return {};
      });
      await w.start();
      const id = await create();
      await waitFor(async () => started, 10_000, 'job start');
      await w.stop(100);
      workers.splice(workers.indexOf(w), 1);
      const t = await get(id);
      assert.equal(t.status.phase, 'waiting');
      assert.equal(t.status.retries, undefined);
      assert.deepEqual(readdirSync(join(server.dataDir, 'scratch')), [], 'scratch cleaned');
      // It is then finished by another worker.
      await startWorker(async () => ({ input_video: { duration: 0, size: 0 } })).start();
      await phase(id, 'completed');
      await stopWorkers();
    });

    it('two workers never run the same job', async () => {
      const runs: string[] = [];
      const handler: JobHandler = async (_p, ctx) => {
        runs.push(ctx.taskId);
        await sleep(20);
        return {};
      };
      await startWorker(handler, { concurrency: 3, id: 'w1' }).start();
      await startWorker(handler, { concurrency: 3, id: 'w2' }).start();
      const ids = await Promise.all(Array.from({ length: 24 }, () => create()));
      for (const id of ids) await phase(id, 'completed');
      assert.equal(runs.length, 24);
      assert.deepEqual([...new Set(runs)].sort(), [...ids].sort());
      await stopWorkers();
    });
  });
}
