import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { databaseFor, startTestServer, transcodeBody, waitFor, type TestServer } from '../helpers/server.ts';
import { testPostgres } from '../helpers/postgres.ts';
import { spawnWorkerChild } from '../helpers/worker-process.ts';

// Several worker processes against one PostgreSQL server (the embedded database is
// single-process by design; the same lease logic is tested in-process in worker.test.ts).

const skip = (await testPostgres()) ? false : 'no PostgreSQL server available (apt-get install postgresql)';

describe('worker processes sharing one PostgreSQL', { skip }, () => {
  let server: TestServer;
  let key: string;
  let runLog: string;
  const children: ChildProcess[] = [];

  function spawnWorker(env: Record<string, string> = {}): Promise<ChildProcess> {
    return spawnWorkerChild(
      {
        DATABASE_URL: server.databaseUrl ?? '',
        MEDIAPLANE_DATA_DIR: mkdtempSync(join(tmpdir(), 'mediaplane-worker-')),
        MEDIAPLANE_LEASE_MS: '1500',
        MEDIAPLANE_HEARTBEAT_MS: '300',
        MEDIAPLANE_POLL_MS: '100',
        MEDIAPLANE_RETRY_BACKOFF_MS: '50',
        WORKER_RUN_LOG: runLog,
        ...env,
      },
      children,
    );
  }
  const runs = () =>
    readFileSync(runLog, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(' ') as [string, string, string]);
  const get = async (id: string) => (await server.call('GET', `/api/task/${id}`, { key })).body;

  before(async () => {
    server = await startTestServer({
      databaseUrl: await databaseFor('postgres'),
      roles: { api: true, worker: false },
      settings: { maxQueuedPerOwner: 1000 },
    });
    key = await server.key('alice');
    runLog = join(server.dataDir, 'runs.log');
    writeFileSync(runLog, '');
  });
  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    await server.stop();
  });

  it('a worker killed mid-job (SIGKILL) does not lose the task: another finishes it after the lease expires', async () => {
    const first = await spawnWorker({ WORKER_JOB_MS: '60000' });
    const id = (await server.call('POST', '/api/transcode', { key, body: transcodeBody() })).body.id as string;
    await waitFor(
      async () => runs().some(([e, t]) => e === 'start' && t === id),
      15_000,
      'first worker to start the job',
    );
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    const second = await spawnWorker({ WORKER_JOB_MS: '200' });
    const done = await waitFor(
      async () => {
        const t = await get(id);
        return t.status.phase === 'completed' ? t : null;
      },
      20_000,
      'the task to complete',
    );
    assert.equal(done.output.transcodeFile.worker, second.pid, 'the second worker finished it');
    assert.equal(done.status.retries, 1);
    assert.deepEqual(
      runs()
        .filter(([e, t]) => e === 'start' && t === id)
        .map(([, , pid]) => Number(pid)),
      [first.pid, second.pid],
    );
    second.kill('SIGTERM');
    await new Promise((r) => second.once('exit', r));
  });

  it('two worker processes never run the same job at once', async () => {
    writeFileSync(runLog, '');
    const [a, b] = await Promise.all([
      spawnWorker({ WORKER_JOB_MS: '150', MEDIAPLANE_WORKER_CONCURRENCY: '2' }),
      spawnWorker({ WORKER_JOB_MS: '150', MEDIAPLANE_WORKER_CONCURRENCY: '2' }),
    ]);
    const ids: string[] = [];
    for (let i = 0; i < 16; i++)
      ids.push((await server.call('POST', '/api/transcode', { key, body: transcodeBody() })).body.id);
    await waitFor(
      async () => {
        for (const id of ids) if ((await get(id)).status.phase !== 'completed') return false;
        return true;
      },
      30_000,
      'all tasks to complete',
    );
    const starts = runs().filter(([e]) => e === 'start');
    assert.equal(starts.length, 16, 'each task ran exactly once');
    assert.deepEqual(new Set(starts.map(([, t]) => t)), new Set(ids));
    const pids = new Set(starts.map(([, , pid]) => Number(pid)));
    assert.deepEqual(pids, new Set([a.pid, b.pid]), 'both workers took jobs');
    for (const c of [a, b]) c.kill('SIGTERM');
  });
});
