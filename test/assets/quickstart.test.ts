import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type BrowserPlayer, startBrowserPlayer } from '../helpers/browser.ts';
import { TEST_ENCODE_ENV } from '../helpers/encode-defaults.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { makeClip } from '../helpers/media.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

// Issue #27 acceptance: the README's quick start needs nothing of one's own. A service on
// its embedded defaults (no S3 anywhere), one request with a URL, and the asset's
// playbackUrl plays in headless Chromium with hls.js, straight from the built-in store (the
// page is on another origin, so the /media answers' CORS is part of what is tested). The
// same for POST /api/transcode without `storage`: its outputs get URLs that play.

let server: TestServer;
let web: TestHttp;
let player: BrowserPlayer | undefined;
let skip = '';
let key = '';

before(async () => {
  const clip = await makeClip({ width: 384, height: 216, seconds: 4 });
  web = await startHttp({ '/clip.mp4': serveFile(clip) });
  server = await startTestServer({});
  key = await server.key('quickstart');
  const started = await startBrowserPlayer();
  if ('skip' in started) skip = started.skip;
  else player = started;
});

after(async () => {
  await player?.close();
  await server?.stop();
  await web?.close();
});

const SMALL = [{ name: '216p0', width: 384, height: 216, bitrate: 400_000 }];

describe('quick start on the built-in store', () => {
  it('an asset made from a URL plays from its playbackUrl', async (t) => {
    const created = await server.call('POST', '/api/asset/upload/url', {
      key,
      body: { name: 'clip', url: web.url('/clip.mp4'), profiles: SMALL },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const id = created.body.asset.id as string;
    const asset = await waitFor(async () => {
      const got = await server.call('GET', `/api/asset/${id}`, { key });
      if (got.body.status?.phase === 'failed') throw new Error(got.body.status.errorMessage);
      return got.body.status?.phase === 'ready' ? got.body : undefined;
    }, 120_000);
    assert.ok(asset.playbackUrl.startsWith(`${server.url}/media/`), asset.playbackUrl);
    const playlist = await fetch(asset.playbackUrl);
    assert.equal(playlist.status, 200);
    assert.equal(playlist.headers.get('access-control-allow-origin'), '*');
    if (!player) return t.skip(skip);
    const played = await player.playHls(asset.playbackUrl);
    assert.equal(played.error, undefined, played.log.join('\n'));
    assert.ok(played.played > 0.5, `played ${played.played} s`);
    assert.equal(played.videoHeight, 216);
  });

  it('a transcode without storage writes to the built-in store, and its outputs carry URLs that play', async (t) => {
    const created = await server.call('POST', '/api/transcode', {
      key,
      body: {
        input: { url: web.url('/clip.mp4') },
        outputs: { hls: { path: '/out/hls' }, mp4: { path: '/out/mp4' } },
        profiles: SMALL,
      },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assert.equal(created.body.params['transcode-file'].storage, undefined);
    const task = await waitFor(async () => {
      const got = await server.call('GET', `/api/task/${created.body.id}`, { key });
      if (got.body.status.phase === 'failed') throw new Error(got.body.status.errorMessage);
      return got.body.status.phase === 'completed' ? got.body : undefined;
    }, 120_000);
    const out = task.output.transcodeFile;
    assert.equal(out.hls.path, '/out/hls/index.m3u8');
    assert.equal(out.hls.url, `${server.url}/media/task/${task.id}/out/hls/index.m3u8`);
    const mp4 = out.mp4[0];
    assert.ok(mp4.url.endsWith(`/media/task/${task.id}${mp4.path}`), mp4.url);
    const file = await fetch(mp4.url, { headers: { range: 'bytes=0-99' } });
    assert.equal(file.status, 206);
    assert.equal((await file.arrayBuffer()).byteLength, 100);
    if (!player) return t.skip(skip);
    const played = await player.playHls(out.hls.url);
    assert.equal(played.error, undefined, played.log.join('\n'));
    assert.ok(played.played > 0.5, `played ${played.played} s`);
  });
});

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The README's "Try it" commands after `make start`, which the test's own server stands in for. */
function quickStart(): string {
  const readme = readFileSync(new URL('README.md', `file://${ROOT}`), 'utf8');
  const section = readme.slice(readme.indexOf('## Try it'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  const [first, ...rest] = block.split('\n');
  assert.match(first ?? '', /^make start\b/, 'the quick start begins with make start');
  return rest.join('\n');
}

/** A free port that is not the default one. */
async function freePort(): Promise<number> {
  for (;;) {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    await new Promise((resolve) => server.close(resolve));
    if (typeof address === 'object' && address && address.port !== 8080) return address.port;
  }
}

/** Runs `script` in bash, stopping at the first failing command, in the project's folder. */
function bash(script: string, env: Record<string, string>): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn('bash', ['-euo', 'pipefail', '-c', script], {
    cwd: ROOT,
    env: { ...process.env, ...TEST_ENCODE_ENV, ...env },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, out, err })));
}

describe('the README quick start, as written, on a port other than 8080', () => {
  it("needs nothing of one's own: ./mediaplane sample uploads a video, and the asset plays", async (t) => {
    const script = quickStart();
    // The curl lines follow PORT; only its default says 8080.
    for (const line of script.split('\n').filter((l) => !l.trimStart().startsWith('#')))
      assert.ok(
        !line.includes('8080') || line.startsWith('PORT=$' + '{MEDIAPLANE_PORT:-8080}'),
        `8080 hard-coded: ${line}`,
      );
    const port = await freePort();
    // A service on its defaults but the port: private URLs refused, as after make start.
    const local = await startTestServer({ settings: { port, allowPrivateUrls: false } });
    try {
      const env = { MEDIAPLANE_PORT: String(port), MEDIAPLANE_DATA_DIR: local.dataDir };
      const run = await bash(`${script}\nprintf '\\n%s\\n' "$KEY"`, env);
      assert.equal(run.code, 0, `${run.out}\n${run.err}`);
      const [shown, myKey] = run.out.trim().split('\n');
      const first = JSON.parse(shown ?? '') as { id: string; status: { phase: string } };
      assert.ok(['waiting', 'processing', 'ready'].includes(first.status.phase), shown);
      assert.match(run.err, /made a 10 s 1280x720 test video with ffmpeg and uploaded it/);
      const asset = await waitFor(async () => {
        const got = await local.call('GET', `/api/asset/${first.id}`, { key: myKey ?? '' });
        if (got.body.status?.phase === 'failed') throw new Error(got.body.status.errorMessage);
        return got.body.status?.phase === 'ready' ? got.body : undefined;
      }, 240_000);
      assert.ok(asset.playbackUrl.startsWith(`http://127.0.0.1:${port}/media/`), asset.playbackUrl);
      assert.equal((await fetch(asset.playbackUrl)).status, 200);
      if (!player) return t.skip(skip);
      const played = await player.playHls(asset.playbackUrl);
      assert.equal(played.error, undefined, played.log.join('\n'));
      assert.ok(played.played > 0.5, `played ${played.played} s`);
      assert.equal(played.videoHeight, 720);
    } finally {
      await local.stop();
    }
  });
});
