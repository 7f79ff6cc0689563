import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { TaskEventRow } from '../../src/tasks/index.ts';
import { processGone, processesInside } from '../../src/tasks/processes.ts';
import { pdeathsigWorks } from '../../src/lib/tied-process.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { makeClip } from '../helpers/media.ts';
import { testPostgres } from '../helpers/postgres.ts';
import { spawnWorkerChild } from '../helpers/worker-process.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { databaseFor, startTestServer, transcodeBody, waitFor, type TestServer } from '../helpers/server.ts';
import { processTable } from './procfs.ts';

// Issue #20 end to end: a worker process running the production transcode handler is
// SIGKILLed in the middle of an encode. Its ffmpeg must die with it (checked by pid), the
// task must never have two encoders at once, the next worker on the same scratch root removes
// the dead run's directory, and the task runs again before the tasks queued after it.

const skip = !(await testPostgres())
  ? 'no PostgreSQL server available (apt-get install postgresql)'
  : !pdeathsigWorks() && 'setpriv --pdeathsig is not available';
const LEASE_MS = 1500;

describe('a worker SIGKILLed mid-encode', { skip }, () => {
  let server: TestServer;
  let s3: TestS3;
  let web: TestHttp;
  let dataDir: string;
  const children: ChildProcess[] = [];

  function spawnWorker(preset: string): Promise<ChildProcess> {
    return spawnWorkerChild(
      {
        WORKER_HANDLER: 'transcode',
        DATABASE_URL: server.databaseUrl ?? '',
        MEDIAPLANE_DATA_DIR: dataDir,
        MEDIAPLANE_ALLOW_PRIVATE_URLS: 'true',
        MEDIAPLANE_LEASE_MS: String(LEASE_MS),
        MEDIAPLANE_HEARTBEAT_MS: '300',
        MEDIAPLANE_POLL_MS: '100',
        MEDIAPLANE_X264_PRESET: preset,
      },
      children,
    );
  }

  before(async () => {
    const [long, short] = await Promise.all([
      makeClip({ width: 1280, height: 720, seconds: 10 }),
      makeClip({ width: 320, height: 180, seconds: 2 }),
    ]);
    [s3, web] = await Promise.all([
      startS3(),
      startHttp({ '/long.mp4': serveFile(long), '/short.mp4': serveFile(short) }),
    ]);
    server = await startTestServer({
      databaseUrl: await databaseFor('postgres'),
      roles: { api: true, worker: false },
      settings: { leaseMs: LEASE_MS },
    });
    dataDir = mkdtempSync(join(tmpdir(), 'mp-crash-worker-'));
  });
  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    await server?.stop();
    await Promise.all([s3?.close(), web?.close()]);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('leaves no ffmpeg alive, never two encoders of the task at once; the next worker removes its scratch and runs the task before those queued after it', async () => {
    const key = await server.key('alice');
    const bucket = await s3.createBucket();
    const submit = async (name: string): Promise<string> => {
      const body = transcodeBody({
        input: { url: web.url(`/${name}.mp4`) },
        storage: {
          type: 's3',
          endpoint: s3.endpoint,
          bucket,
          credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: s3.credentials.secretAccessKey },
        },
        outputs: { hls: { path: `/${name}/hls` }, mp4: { path: `/${name}/mp4` } },
      });
      const res = await server.call('POST', '/api/transcode', { key, body });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.id as string;
    };
    const scratch = join(dataDir, 'scratch');
    const runDir = (id: string, attempt: number) => join(scratch, `${id}-${attempt}`);

    // A slow preset, so the kill lands in the middle of the encode.
    const first = await spawnWorker('slow');
    const id = await submit('long');
    const encoders = async (): Promise<number[]> => {
      const dirs = readdirSync(scratch)
        .filter((d) => d.startsWith(id))
        .map((d) => join(scratch, d));
      const inside = new Set(await processesInside(dirs));
      return processTable()
        .filter((p) => inside.has(p.pid) && p.comm === 'ffmpeg' && cwdInside(p.pid, dirs))
        .map((p) => p.pid);
    };
    let most = 0;
    const sampling = setInterval(() => {
      void encoders()
        .then((e) => {
          most = Math.max(most, e.length);
        })
        .catch(() => undefined);
    }, 20);
    try {
      const [encoder] = await waitFor(
        async () => {
          const e = await encoders();
          return e.length > 0 ? e : null;
        },
        30_000,
        'the first worker to start encoding',
      );
      assert.ok(encoder);
      const later = [await submit('short'), await submit('short')];
      await new Promise((r) => setTimeout(r, 500));
      first.kill('SIGKILL');
      const killedAt = Date.now();
      await waitFor(() => processGone(encoder), 2000, `ffmpeg ${encoder} to die with its worker`);
      const encoderLived = Date.now() - killedAt;
      assert.ok(existsSync(runDir(id, 1)), 'the dead run left its scratch');

      // Restarted once the dead worker's lease ran out (a busy worker would reap it then).
      await waitFor(
        async () =>
          (await server.running.core.db.query(`SELECT 1 FROM tasks WHERE id = $1 AND lease_until < now()`, [id]))
            .length > 0,
        10_000,
        'the lease to run out',
      );
      await spawnWorker('ultrafast');
      await waitFor(async () => !existsSync(runDir(id, 1)), 5000, "the dead run's scratch to be removed");

      for (const t of [id, ...later])
        await waitFor(
          async () => {
            const task = (await server.call('GET', `/api/task/${t}`, { key })).body;
            assert.notEqual(task.status.phase, 'failed', task.status.errorMessage);
            return task.status.phase === 'completed' ? task : null;
          },
          60_000,
          `task ${t} to complete`,
        );

      assert.ok(encoderLived < 1000, `ffmpeg outlived its worker by ${encoderLived} ms`);
      assert.equal(most, 1, 'at most one encoder of the task at any time');
      assert.deepEqual(readdirSync(scratch), [], 'no scratch left');
      assert.deepEqual(await claimOrder(server, [id, ...later]), [`${id}:2`, `${later[0]}:1`, `${later[1]}:1`]);
      const task = (await server.call('GET', `/api/task/${id}`, { key })).body;
      assert.equal(task.status.retries, 1);
      const keys = await s3.keys(bucket);
      assert.ok(keys.includes('long/hls/index.m3u8') && keys.some((k) => k.startsWith('long/mp4/')), keys.join());
    } finally {
      clearInterval(sampling);
    }
  });
});

/** Whether the process's working directory is inside one of `dirs` (the encoder runs in its out dir). */
function cwdInside(pid: number, dirs: string[]): boolean {
  try {
    const cwd = readlinkSync(`/proc/${pid}/cwd`);
    return dirs.some((d) => cwd.startsWith(`${d}/`));
  } catch {
    return false;
  }
}

/** `id:attempt` of each claim of these tasks after their first run, in the order they were claimed. */
async function claimOrder(server: TestServer, ids: string[]): Promise<string[]> {
  const events = await server.running.core.db.query<Pick<TaskEventRow, 'task'>>(
    `SELECT task FROM task_events WHERE task_id = ANY($1::uuid[]) AND event = 'task.updated'
       AND task->>'phase' = 'running' ORDER BY created_at, id`,
    [ids],
  );
  const seen = new Set<string>();
  const order: string[] = [];
  for (const { task } of events) {
    const run = `${task.id}:${task.attempts}`;
    if (!seen.has(run)) order.push(run);
    seen.add(run);
  }
  return order.filter((r) => r !== `${ids[0]}:1`);
}
