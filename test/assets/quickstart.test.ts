import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type BrowserPlayer, startBrowserPlayer } from '../helpers/browser.ts';
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
