import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { settings } from '../../src/config/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { Queue, Worker, type JobHandler, type TaskRow } from '../../src/tasks/index.ts';
import { processGone } from '../../src/tasks/processes.ts';
import { RETRY_JITTER, retryDelayMs, worstCaseRetries } from '../../src/tasks/retry-policy.ts';
import { sweepScratch } from '../../src/tasks/scratch.ts';
import { pdeathsigWorks } from '../../src/lib/tied-process.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { makeClip } from '../helpers/media.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { databaseKinds, startTestServer, transcodeBody, waitFor, type TestServer } from '../helpers/server.ts';
import { startOutageProxy } from './outage-proxy.ts';
import { childrenOf } from './procfs.ts';

// Issue #20: what a crash leaves behind. Child processes die with their worker, the scratch of
// dead runs goes, a reclaimed task keeps its place, crashes and failures have budgets of their
// own, and the backoff outlasts a storage outage. The end-to-end SIGKILL of a worker mid-encode
// is in crash-encode.test.ts.

// Awaited before the first describe: a suite registered before a top-level await lets the
// runner start while the file still loads, and the PostgreSQL server's after-hook never runs.
const kinds = await databaseKinds();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const RUN_TS = fileURLToPath(new URL('../../src/transcode/run.ts', import.meta.url));
const MEDIA_INPUT_TS = fileURLToPath(new URL('../../src/transcode/media-input.ts', import.meta.url));
const defaults = {
  baseMs: settings.retryBackoffMs.default,
  maxMs: settings.retryBackoffMaxMs.default,
};

describe('the retry backoff', () => {
  it('doubles from the base, within +-25%, and stops growing at the cap', () => {
    const b = { baseMs: 1000, maxMs: 5000 };
    assert.equal(
      retryDelayMs(0, b, () => 0),
      750,
    );
    assert.equal(
      retryDelayMs(0, b, () => 0.5),
      1000,
    );
    assert.equal(
      retryDelayMs(1, b, () => 0.5),
      2000,
    );
    assert.equal(
      retryDelayMs(2, b, () => 0.999999),
      5000,
    );
    assert.equal(
      retryDelayMs(10, b, () => 0.5),
      5000,
      'capped',
    );
    assert.equal(
      retryDelayMs(10, b, () => 0),
      3750,
      'jitter applies under the cap too',
    );
    for (let i = 0; i < 1000; i++) {
      const d = retryDelayMs(1, b);
      assert.ok(d >= 2000 * (1 - RETRY_JITTER) && d <= 2000 * (1 + RETRY_JITTER), `${d}`);
    }
  });

  it('at default settings a 30 s storage outage costs at most 2 retries and a 60 s one at most 3, within the retry limit', () => {
    // worstCaseRetries: every run fails at once and every delay is the shortest the jitter
    // allows. The SDK's own retries inside a run only take time off the outage.
    assert.equal(worstCaseRetries(30_000, defaults), 2);
    assert.equal(worstCaseRetries(60_000, defaults), 3);
    assert.ok(worstCaseRetries(60_000, defaults) <= settings.maxRetries.default, 'a minute-long outage is survived');
    // The arithmetic behind it: 11.25 s + 22.5 s = 33.75 s >= 30 s; + 45 s = 78.75 s >= 60 s.
    assert.deepEqual(
      [0, 1, 2].map((n) => retryDelayMs(n, defaults, () => 0)),
      [11_250, 22_500, 45_000],
    );
    // Failures apart from crashes: the failure budget does not shrink with the crash budget.
    assert.ok(settings.maxCrashRetries.default >= 1);
  });
});

for (const { kind, skip } of kinds) {
  describe(`queue order and retry budgets (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let queue: Queue;
    const expire = (id: string) =>
      server.running.core.db.query(`UPDATE tasks SET lease_until = now() - interval '1 second' WHERE id = $1`, [id]);
    const create = async (): Promise<string> =>
      (
        await server.running.core.tasks.create({
          owner: 'alice',
          projectId: '00000000-0000-4000-8000-000000000000',
          type: 'transcode-file',
          params: transcodeBody(),
          requesterId: null,
          maxQueuedPerOwner: 1000,
        })
      ).id;
    const claimOne = async (worker: string): Promise<TaskRow> => {
      const [row, ...more] = await queue.claim(worker, 1);
      assert.ok(row && more.length === 0, 'one task claimed');
      return row;
    };

    before(async () => {
      server = await startTestServer({ database: kind, roles: { api: true, worker: false } });
      await server.key('alice');
      queue = new Queue(server.running.core.db, { leaseMs: 60_000, maxRetries: 1, maxCrashRetries: 2 });
    });
    afterEach(() =>
      server.running.core.db.query(`UPDATE tasks SET phase = 'cancelled' WHERE phase IN ('waiting', 'running')`),
    );
    after(() => server.stop());

    it('a task taken back from a dead worker runs before the tasks queued after it', async () => {
      const first = await create();
      assert.equal((await claimOne('dies')).id, first);
      const later = [await create(), await create()];
      const runs = [
        { id: first, attempt: 1 },
        { id: first, attempt: 2 },
        { id: later[0] ?? '', attempt: 1 },
      ];
      assert.deepEqual([...(await queue.liveRuns(runs))], [`${first}-1`], 'the live lease holds its run only');
      await expire(first);
      assert.deepEqual([...(await queue.liveRuns(runs))], [], 'an expired lease holds nothing');
      assert.equal(await queue.reapExpired(), 1);
      const order = [(await claimOne('next')).id, (await claimOne('next')).id, (await claimOne('next')).id];
      assert.deepEqual(order, [first, ...later]);
    });

    it('so does a task handed back at shutdown', async () => {
      const first = await create();
      await claimOne('stops');
      const later = await create();
      await queue.release(first, 'stops');
      assert.deepEqual([(await claimOne('next')).id, (await claimOne('next')).id], [first, later]);
    });

    it('crashes and failures have budgets of their own', async () => {
      const id = await create();
      const retry = { message: 'storage unreachable', retryable: true, backoffMs: 0 };
      // Two crashes (the crash budget), then a failure (the failure budget): all run again.
      for (let i = 0; i < 2; i++) {
        await claimOne('w');
        await expire(id);
        await queue.reapExpired();
      }
      await claimOne('w');
      assert.equal(await queue.fail(id, 'w', retry), 'waiting', 'crashes did not use up the failure budget');
      // The failure budget is spent: the next failure is final; a third crash would be too.
      await claimOne('w');
      assert.equal(await queue.fail(id, 'w', retry), 'failed');
      const row = await server.running.core.tasks.get('alice', id);
      assert.deepEqual([row.retries, row.crashes, row.attempts], [3, 2, 4]);
      await server.running.core.tasks.retry('alice', id);
      for (let i = 0; i < 3; i++) {
        await claimOne('w');
        await expire(id);
        await queue.reapExpired();
      }
      const crashed = await server.running.core.tasks.get('alice', id);
      assert.equal(crashed.phase, 'failed', 'the third crash after a retry renewed the budget');
      assert.match(crashed.error_message ?? '', /stopped responding 3 times/);
    });

    it('a worker that cannot renew its lease stops the job before the lease can run out, and hands the task back once the database answers', async () => {
      // Heartbeats fail (the database out of reach for this worker) while everything else works.
      class CutOffQueue extends Queue {
        override async heartbeat(): Promise<boolean> {
          throw new Error('connection terminated');
        }
      }
      const core = server.running.core;
      const cutOff = new CutOffQueue(core.db, { leaseMs: 1000, maxRetries: 1 });
      let claimedAt = 0;
      let stoppedAt = 0;
      const handler: JobHandler = (_p, ctx) =>
        new Promise((_resolve, reject) => {
          claimedAt = Date.now();
          ctx.signal.addEventListener('abort', () => {
            stoppedAt = Date.now();
            reject(ctx.signal.reason);
          });
        });
      const worker = new Worker({
        db: core.db,
        queue: cutOff,
        handlers: { 'transcode-file': handler },
        log: createLogger({ level: 'silent' }),
        scratchRoot: join(server.dataDir, 'scratch'),
        concurrency: 1,
        pollMs: 50,
        heartbeatMs: 200,
        retryBackoffMs: 20,
      });
      await worker.start();
      const key = await server.key('alice');
      const id = (await server.call('POST', '/api/transcode', { key, body: transcodeBody() })).body.id as string;
      await waitFor(async () => stoppedAt, 5000, 'the job to be stopped');
      await worker.stop(100);
      assert.ok(
        stoppedAt - claimedAt < 1000,
        `stopped ${stoppedAt - claimedAt} ms after the claim, before the lease ran out`,
      );
      const row = await core.tasks.get('alice', id);
      assert.equal(row.phase, 'waiting');
      assert.equal(row.crashes, 0, 'handed back, not counted as a crash');
    });
  });
}

describe('child processes and scratch of a dead worker', () => {
  const roots: string[] = [];
  after(() => {
    for (const r of roots) rmSync(r, { recursive: true, force: true });
  });

  it('a child process run by runProcess dies with its worker process (SIGKILL)', {
    skip: !pdeathsigWorks() && 'setpriv --pdeathsig is not available',
  }, async () => {
    // runProcess runs ffmpeg only with guarded inputs: one that waits for ever on a FIFO nobody writes.
    const dir = mkdtempSync(join(tmpdir(), 'mp-fifo-'));
    roots.push(dir);
    const fifo = join(dir, 'never-written');
    execFileSync('mkfifo', [fifo]);
    const script = `
      import { runProcess } from ${JSON.stringify(RUN_TS)};
      import { inputArgs } from ${JSON.stringify(MEDIA_INPUT_TS)};
      const args = ['-nostdin', ...inputArgs(${JSON.stringify(fifo)}), '-f', 'null', '-'];
      void runProcess('ffmpeg', args, { signal: new AbortController().signal, timeoutMs: 60_000 });
      setInterval(() => {}, 1000);`;
    const parent = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'ignore' });
    const [child] = await waitFor(
      async () => {
        const c = childrenOf(parent.pid ?? -1, 'ffmpeg');
        return c.length > 0 ? c : null;
      },
      10_000,
      'the ffmpeg child',
    );
    assert.ok(child);
    parent.kill('SIGKILL');
    const t0 = Date.now();
    await waitFor(() => processGone(child), 2000, `child ${child} to die with its parent`);
    assert.ok(Date.now() - t0 < 1000);
  });

  it('a sweep kills what still works in an unheld run directory and removes it; held and own runs stay', async () => {
    const root = mkdtempSync(join(tmpdir(), 'mp-scratch-'));
    roots.push(root);
    const id = (n: number) => `0000000${n}-0000-4000-8000-000000000000`;
    for (const d of [`${id(1)}-1`, `${id(1)}-2`, `${id(2)}-1`, `${id(3)}-4`, 'not-a-run'])
      mkdirSync(join(root, d, 'out'), { recursive: true });
    // A leftover encoder of run 1-1: working directory in it, no parent-death signal.
    const leftover = spawn('sleep', ['60'], { cwd: join(root, `${id(1)}-1`, 'out'), stdio: 'ignore', detached: true });
    leftover.unref();
    await sleep(100);
    const swept = await sweepScratch({
      root,
      liveRuns: async () => new Set([`${id(1)}-2`, `${id(2)}-7`] as const),
      ownRuns: new Set([`${id(3)}-4`] as const),
    });
    assert.deepEqual(swept.killed, [leftover.pid]);
    assert.deepEqual(swept.survivors, []);
    assert.ok(await processGone(leftover.pid ?? -1));
    assert.deepEqual(swept.removed.sort(), [`${id(1)}-1`, `${id(2)}-1`]);
    assert.deepEqual(readdirSync(root).sort(), [`${id(1)}-2`, `${id(3)}-4`, 'not-a-run']);
  });

  // Issue #25, hole 9: the sweep matched the stale directory as a substring of any argument
  // of any process, and SIGKILLed a process of `nobody` that named it.
  it("a sweep kills only this user's processes that work in the run directory as a path: not another user's, not a sibling's", {
    skip: process.getuid?.() !== 0 && 'starts a process as `nobody`, which needs root',
  }, async () => {
    const root = mkdtempSync(join(tmpdir(), 'mp-scratch-'));
    roots.push(root);
    const run = '00000001-0000-4000-8000-000000000000-1';
    const dir = join(root, run);
    mkdirSync(dir);
    // A shell that names `arg` in its command line and outlives the sweep (`; exit` keeps
    // the shell itself from exec-ing sleep).
    const holding = (arg: string, as: string[] = []) => {
      const [file = 'sh', ...args] = [...as, 'sh', '-c', 'sleep 60; exit 0', 'sh', arg];
      const p = spawn(file, args, { stdio: 'ignore', detached: true });
      p.unref();
      return p.pid ?? -1;
    };
    const nobody = ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', '--'];
    const theirs = holding(`${dir}/input.mp4`, nobody);
    const sibling = holding(`${root}/00000001-0000-4000-8000-000000000000-10/input.mp4`);
    const copy = holding(`${tmpdir()}/backup${dir}/input.mp4`);
    const ours = [
      holding(dir),
      holding(`${dir}/input.mp4`),
      holding(`-i=${dir}/input.mp4`),
      holding(`file:${dir}/out/%03d.ts`),
    ];
    const all = [theirs, sibling, copy, ...ours];
    try {
      await sleep(200);
      const swept = await sweepScratch({ root, liveRuns: async () => new Set(), ownRuns: new Set() });
      assert.deepEqual(swept.removed, [run]);
      assert.deepEqual(
        swept.killed.sort((a, b) => a - b),
        [...ours].sort((a, b) => a - b),
        'only our processes that name the directory as a path',
      );
      for (const pid of ours) assert.ok(await processGone(pid), `${pid} killed`);
      assert.equal(await processGone(theirs), false, "nobody's process lives");
      assert.equal(await processGone(sibling), false, 'the one in the sibling run-10 lives');
      assert.equal(await processGone(copy), false, 'the one in a copy of the path elsewhere lives');
    } finally {
      for (const pid of all) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
    }
  });
});

describe('a storage outage, scaled down 10x with the backoff', () => {
  let s3: TestS3;
  let web: TestHttp;
  let server: TestServer;
  const SCALE = 10;

  before(async () => {
    const clip = await makeClip({ width: 320, height: 180, seconds: 2 });
    [s3, web] = await Promise.all([startS3(), startHttp({ '/clip.mp4': serveFile(clip) })]);
    server = await startTestServer({
      settings: {
        retryBackoffMs: settings.retryBackoffMs.default / SCALE,
        retryBackoffMaxMs: settings.retryBackoffMaxMs.default / SCALE,
        // The worst case: no SDK retries inside a run to take time off the outage.
        s3MaxAttempts: 1,
        x264Preset: 'ultrafast',
      },
    });
  });
  after(async () => {
    await server?.stop();
    await Promise.all([s3?.close(), web?.close()]);
  });

  it('costs at most 2 retries for 30 s / 10, and the task completes', async () => {
    const proxy = await startOutageProxy(s3.endpoint);
    try {
      const bucket = await s3.createBucket();
      const key = await server.key('alice');
      const body = transcodeBody({
        input: { url: web.url('/clip.mp4') },
        storage: {
          type: 's3',
          endpoint: proxy.endpoint,
          bucket,
          credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: s3.credentials.secretAccessKey },
        },
        outputs: { hls: { path: '/hls' } },
      });
      proxy.down();
      const t0 = Date.now();
      const posted = await server.call('POST', '/api/transcode', { key, body });
      assert.equal(posted.status, 200, JSON.stringify(posted.body));
      const id = posted.body.id as string;
      setTimeout(() => proxy.up(), 30_000 / SCALE - (Date.now() - t0));
      const done = await waitFor(
        async () => {
          const t = (await server.call('GET', `/api/task/${id}`, { key })).body;
          return ['completed', 'failed'].includes(t.status.phase) ? t : null;
        },
        30_000,
        'the task to end',
      );
      assert.equal(done.status.phase, 'completed', done.status.errorMessage);
      assert.ok(proxy.refused > 0, 'the outage was met');
      assert.ok(done.status.retries >= 1 && done.status.retries <= 2, `retries: ${done.status.retries}`);
      assert.ok((await s3.keys(bucket)).includes('hls/index.m3u8'));
    } finally {
      await proxy.close();
    }
  });
});
