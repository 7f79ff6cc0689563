import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeErrors, ffprobe, makeClip } from '../helpers/media.ts';
import { testPostgres } from '../helpers/postgres.ts';
import { spawnWorkerChild } from '../helpers/worker-process.ts';
import { startS3, storeSettings, type TestS3 } from '../helpers/s3.ts';
import { databaseFor, startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

// Issue #28, faults: a `clip` task whose worker is SIGKILLed mid-way runs again like any task
// once the lease runs out, on another worker, and its asset comes out whole. The built-in store
// is a bucket and API and workers are separate processes (separate data dirs) on one
// PostgreSQL, so the clip task also reads its source asset's file from the bucket.

const skip = (await testPostgres()) ? false : 'no PostgreSQL server available (apt-get install postgresql)';
const LEASE_MS = 1500;

describe('a clip task whose worker is killed mid-way', { skip }, () => {
  let s3: TestS3;
  let server: TestServer;
  let storeEnv: Record<string, string>;
  const children: ChildProcess[] = [];
  const dirs: string[] = [];

  /** A worker process running the production handlers, with `preset`; resolves once it polls. */
  function spawnWorker(preset: string): Promise<ChildProcess> {
    const dataDir = mkdtempSync(join(tmpdir(), 'mediaplane-clip-worker-'));
    dirs.push(dataDir);
    return spawnWorkerChild(
      {
        ...storeEnv,
        WORKER_HANDLER: 'transcode',
        DATABASE_URL: server.databaseUrl ?? '',
        MEDIAPLANE_DATA_DIR: dataDir,
        MEDIAPLANE_POLL_MS: '100',
        MEDIAPLANE_LEASE_MS: String(LEASE_MS),
        MEDIAPLANE_HEARTBEAT_MS: '300',
        MEDIAPLANE_X264_PRESET: preset,
      },
      children,
    );
  }

  before(async () => {
    s3 = await startS3();
    const bucket = await s3.createBucket();
    const store = storeSettings(s3, bucket);
    storeEnv = {
      MEDIAPLANE_STORE_URL: store.storeUrl,
      MEDIAPLANE_STORE_ENDPOINT: store.storeEndpoint,
      MEDIAPLANE_STORE_REGION: store.storeRegion,
      MEDIAPLANE_STORE_ACCESS_KEY_ID: store.storeAccessKeyId,
      MEDIAPLANE_STORE_SECRET_ACCESS_KEY: store.storeSecretAccessKey,
    };
    server = await startTestServer({
      databaseUrl: await databaseFor('postgres'),
      roles: { api: true, worker: false },
      settings: { ...store, leaseMs: LEASE_MS },
    });
  });
  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    await server?.stop();
    await s3?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('runs again on another worker and makes the whole clip', async () => {
    const key = await server.key('alice');
    const asset = async (id: string) => (await server.call('GET', `/api/asset/${id}`, { key })).body;
    const readyAsset = (id: string) =>
      waitFor(
        async () => {
          const a = await asset(id);
          assert.notEqual(a.status?.phase, 'failed', a.status?.errorMessage);
          return a.status?.phase === 'ready' ? a : undefined;
        },
        180_000,
        `asset ${id} to be ready`,
      );

    // The source, made by a quick worker that then stops.
    const uploader = await spawnWorker('ultrafast');
    const file = await makeClip({ width: 640, height: 360, seconds: 10 });
    const created = await server.call('POST', '/api/asset/request-upload', { key, body: { name: 'long' } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assert.equal((await fetch(created.body.url, { method: 'PUT', body: readFileSync(file) })).status, 200);
    const source = await readyAsset(created.body.asset.id);
    uploader.kill('SIGTERM');

    // A slow preset, so the kill lands while the clip is being made.
    const first = await spawnWorker('slow');
    const clip = await server.call('POST', '/api/clip', {
      key,
      body: { playbackId: source.playbackId, startTime: 500, endTime: 9500 },
    });
    assert.equal(clip.status, 200, JSON.stringify(clip.body));
    const taskId = clip.body.task.id as string;
    const task = async () => (await server.call('GET', `/api/task/${taskId}`, { key })).body;
    await waitFor(
      async () => {
        const t = await task();
        return t.status.phase === 'running' && (t.status.progress ?? 0) > 0.35;
      },
      60_000,
      'the clip task to be making the ladder',
    );
    first.kill('SIGKILL');
    const killed = await task();
    assert.equal(killed.status.phase, 'running', 'the kill landed mid-way');
    assert.equal((await asset(clip.body.asset.id)).status.phase, 'processing');

    await spawnWorker('ultrafast');
    const made = await readyAsset(clip.body.asset.id);
    const done = await task();
    assert.equal(done.status.phase, 'completed');
    assert.equal(done.status.retries, 1, 'the task ran twice');
    assert.ok(Math.abs(made.videoSpec.duration - 9) <= 1 / 30, `videoSpec.duration ${made.videoSpec.duration}`);
    const downloaded = join(dirs[0] ?? tmpdir(), 'clip.mp4');
    writeFileSync(downloaded, Buffer.from(await (await fetch(made.downloadUrl)).arrayBuffer()));
    const probed = await ffprobe(downloaded);
    assert.ok(Math.abs(Number(probed.format.duration) - 9) <= 1 / 30, `ffprobe: ${probed.format.duration}`);
    assert.equal(await decodeErrors(made.playbackUrl), '', 'the HLS of the clip decodes cleanly');
    // The source was only read.
    const again = await asset(source.id);
    assert.equal(again.status.phase, 'ready');
    assert.deepEqual(again.hash, source.hash);
  });
});
