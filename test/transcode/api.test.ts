import assert from 'node:assert/strict';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { makeClip } from '../helpers/media.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { startTestServer, waitFor, type TestServer } from '../helpers/server.ts';

// The transcoding pipeline as a client sees it (issue 3): POST /api/transcode on a server
// running the API and a worker in this process, an HTTP input and the local S3 server, then
// GET /api/task/{id} until the task settles. No timed assertions: the waits only bound how
// long a broken build may hang.

// Long enough that ffmpeg reports progress a few times before the end, thumbnails branch included.
const SECONDS = 12;
let server: TestServer;
let s3: TestS3;
let web: TestHttp;
let key: string;
let clip: string;
/** Every response body the client saw, to grep for the secret at the end. */
const seen: string[] = [];

before(async () => {
  [s3, clip] = await Promise.all([startS3(), makeClip({ width: 854, height: 480, seconds: SECONDS })]);
  web = await startHttp({ '/clip.mp4': serveFile(clip) });
  // One encoder thread: gentle on a shared 2-core machine, and the encode lasts long enough
  // for progress to be written while it runs and for a cancel to find ffmpeg at work.
  server = await startTestServer({
    roles: { api: true, worker: true },
    // The fixed ladder: the outputs asserted below are its two rungs (the per-title ladder
    // drops 360p0 for this easy test pattern: test/transcode/per-title.test.ts covers it).
    settings: { allowPrivateUrls: true, ffmpegThreads: 1, perTitle: false },
  });
  key = await server.key('alice');
});
after(async () => {
  await server?.stop();
  await Promise.all([s3?.close(), web?.close()]);
});

interface WireTask {
  id: string;
  status: { phase: string; progress?: number; errorMessage?: string; retries?: number };
  output?: {
    transcodeFile?: {
      hls?: { path: string };
      mp4?: { path: string; width?: number; height?: number }[];
      input_video: { duration: number; size: number };
    };
  };
}

async function call(method: string, p: string, body?: unknown): Promise<{ status: number; body: WireTask }> {
  const res = await server.call(method, p, { key, ...(body === undefined ? {} : { body }) });
  seen.push(JSON.stringify(res.body));
  return res as { status: number; body: WireTask };
}

async function post(bucket: string, url: string): Promise<WireTask> {
  const res = await call('POST', '/api/transcode', {
    input: { url },
    // A copy: the AWS SDK marks the helper's own credentials object with a `$source` field.
    storage: {
      type: 's3',
      endpoint: s3.endpoint,
      bucket,
      credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: s3.credentials.secretAccessKey },
    },
    outputs: { hls: { path: 'out/hls' }, mp4: { path: 'out/mp4' } },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

/** Polls the task (waitFor: every ~50 ms) until `done` says so, keeping every status seen. */
async function poll(
  id: string,
  done: (t: WireTask) => boolean,
  timeoutMs = 60_000,
): Promise<{ task: WireTask; history: WireTask['status'][] }> {
  const history: WireTask['status'][] = [];
  const task = await waitFor(
    async () => {
      const res = await call('GET', `/api/task/${id}`);
      assert.equal(res.status, 200);
      history.push(res.body.status);
      return done(res.body) ? res.body : undefined;
    },
    timeoutMs,
    `task ${id} to settle`,
  );
  return { task, history };
}

const settled = (t: WireTask): boolean => ['completed', 'failed', 'cancelled'].includes(t.status.phase);

/** ffmpeg processes whose command line names `dir` (the task's scratch folder), from /proc. */
async function ffmpegUnder(dir: string): Promise<{ pid: number; args: string[] }[]> {
  const found: { pid: number; args: string[] }[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const args = await readFile(`/proc/${entry}/cmdline`, 'utf8').then(
      (s) => s.split('\0'),
      () => [],
    );
    if (path.basename(args[0] ?? '') === 'ffmpeg' && args.some((a) => a.includes(dir)))
      found.push({ pid: Number(entry), args });
  }
  return found;
}

describe('POST /api/transcode through the API and a worker', () => {
  it('completes with progress rising while it runs, the spec output and the objects in the bucket', async () => {
    const bucket = await s3.createBucket();
    const created = await post(bucket, web.url('/clip.mp4'));
    assert.ok(['pending', 'waiting'].includes(created.status.phase));
    const { task, history } = await poll(created.id, settled);
    assert.equal(task.status.phase, 'completed', task.status.errorMessage);
    assert.equal(task.status.progress, 1);

    const running = history.filter((s) => s.phase === 'running').map((s) => s.progress ?? 0);
    assert.ok(
      running.some((p) => p > 0 && p < 1),
      `progress seen while running: ${running.join(',')}`,
    );
    for (let i = 1; i < running.length; i++)
      assert.ok((running[i] ?? 0) >= (running[i - 1] ?? 0), `progress went down: ${running.join(',')}`);

    const out = task.output?.transcodeFile;
    assert.ok(out, 'output.transcodeFile');
    assert.equal(out.hls?.path, '/out/hls/index.m3u8');
    assert.match(out.hls?.path ?? '', /\/index\.m3u8$/);
    assert.deepEqual(
      out.mp4?.map((m) => m.path),
      ['/out/mp4/360p0.mp4', '/out/mp4/480p0.mp4'],
    );
    assert.deepEqual(
      out.mp4?.map((m) => `${m.width}x${m.height}`),
      ['640x360', '854x480'],
    );
    assert.ok(Math.abs(out.input_video.duration - SECONDS) < 0.1, `duration ${out.input_video.duration}`);
    assert.equal(out.input_video.size, (await stat(clip)).size);

    const keys = await s3.keys(bucket);
    for (const k of [
      'out/hls/index.m3u8',
      'out/hls/360p0/index.m3u8',
      'out/hls/360p0/0.ts',
      'out/hls/480p0/index.m3u8',
      'out/hls/480p0/1.ts',
      'out/mp4/360p0.mp4',
      'out/mp4/480p0.mp4',
    ]) {
      assert.ok(keys.includes(k), `${k} in ${keys.join(' ')}`);
    }
    const master = (await s3.get(bucket, 'out/hls/index.m3u8')).body.toString();
    assert.match(master, /360p0\/index\.m3u8/);
    assert.match(master, /480p0\/index\.m3u8/);
  });

  it('fails a 404 input at once with words a user understands, and does not retry it', async () => {
    const bucket = await s3.createBucket();
    const created = await post(bucket, web.url('/missing.mp4'));
    const { task } = await poll(created.id, settled);
    assert.equal(task.status.phase, 'failed');
    assert.match(
      task.status.errorMessage ?? '',
      /the input http:\/\/127\.0\.0\.1:\d+\/missing\.mp4 was not found \(HTTP 404 Not Found\)/,
    );
    assert.ok(!task.status.retries, `retries ${task.status.retries}`);
    // Once by the download, and once more at most by the chunking probe beside it (issue #30): never retried.
    const asked = web.hits.filter((h) => h === '/missing.mp4').length;
    assert.ok(asked >= 1 && asked <= 2, `asked ${asked} times`);
    assert.deepEqual(await s3.keys(bucket), [], 'nothing uploaded');
  });

  it('cancels a running transcode: phase cancelled and its ffmpeg gone', async () => {
    const bucket = await s3.createBucket();
    const created = await post(bucket, web.url('/clip.mp4'));
    const scratch = path.join(server.dataDir, 'scratch', `${created.id}-`);
    // The encoder is the ffmpeg with -stats_period (the decode check before it has none).
    const encoder = await waitFor(
      async () => {
        const procs = await ffmpegUnder(scratch);
        return procs.find((p) => p.args.includes('-stats_period'));
      },
      60_000,
      'the encoding ffmpeg to start',
    );
    const res = await call('POST', `/api/task/${created.id}/cancel`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.status.phase, 'cancelled');

    await waitFor(async () => (await ffmpegUnder(scratch)).length === 0, 15_000, `ffmpeg ${encoder.pid} to be killed`);
    const { task } = await poll(created.id, settled);
    assert.equal(task.status.phase, 'cancelled');
    await waitFor(
      async () => !(await readdir(path.join(server.dataDir, 'scratch'))).some((d) => d.startsWith(created.id)),
      15_000,
      'the scratch folder to be removed',
    );
  });

  it('never shows or logs the S3 secret', () => {
    const secret = s3.credentials.secretAccessKey;
    assert.ok(seen.length > 10 && server.logs.lines.length > 5, 'there were responses and log lines to look at');
    assert.ok(
      seen.some((b) => b.includes('"secretAccessKey":"***"')),
      'the credentials show as ***',
    );
    for (const b of seen) assert.ok(!b.includes(secret), `secret in a response: ${b.slice(0, 300)}`);
    for (const line of server.logs.lines)
      assert.ok(!line.includes(secret), `secret in a log line: ${line.slice(0, 300)}`);
  });
});
