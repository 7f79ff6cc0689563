import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type BrowserPlayer, type PlayResult, startBrowserPlayer } from '../helpers/browser.ts';
import { makeContent } from '../helpers/content.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

// Issue #31: a per-title ladder plays in a real browser. One transcode through the API (the
// request's `perTitle` on) of a small talking-head clip into the local S3 server; headless
// Chromium plays every level of the HLS master with hls.js and the DASH manifest with
// shaka-player. The task output shows each rung's choice. Without a Chromium, it skips.

let s3: TestS3 | undefined;
let web: TestHttp | undefined;
let server: TestServer | undefined;
let player: BrowserPlayer | undefined;
let skipReason = '';
let bucket = '';
let task: { output?: { transcodeFile?: { hls?: { renditions?: Record<string, unknown>[] } } } } = {};

before(async () => {
  s3 = await startS3();
  const started = await startBrowserPlayer(s3);
  if ('skip' in started) {
    skipReason = started.skip;
    return;
  }
  player = started;
  const clip = await makeContent({ kind: 'talking-head', width: 854, height: 480, seconds: 4, audio: true });
  web = await startHttp({ '/clip.mp4': serveFile(clip) });
  server = await startTestServer({ settings: { allowPrivateUrls: true, x264Preset: 'ultrafast' } });
  const key = await server.key('viewer');
  bucket = await s3.createBucket();
  const res = await server.call('POST', '/api/transcode', {
    key,
    body: {
      input: { url: web.url('/clip.mp4') },
      storage: {
        type: 's3',
        endpoint: s3.endpoint,
        bucket,
        credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: s3.credentials.secretAccessKey },
      },
      outputs: { hls: { path: '/v/hls' }, fmp4: { path: '/v/fmp4' } },
      targetSegmentSizeSecs: 2,
      perTitle: true,
    },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const api = server;
  task = await waitFor(
    async () => {
      const got = await api.call('GET', `/api/task/${res.body.id}`, { key });
      return ['completed', 'failed', 'cancelled'].includes(got.body.status?.phase) ? got.body : undefined;
    },
    180_000,
    'the transcode',
  );
});
after(async () => {
  await player?.close();
  await server?.stop();
  await Promise.all([s3?.close(), web?.close()]);
});

function assertPlayed(r: PlayResult, what: string): void {
  const context = `${what}: ${JSON.stringify({ ...r, levels: r.levels.length })}`;
  assert.equal(r.error, undefined, context);
  assert.ok(r.played >= 1 || r.ended, `played ${r.played} s, ${context}`);
}

describe('per-title ladder in Chromium', () => {
  it('lists each rung with its chosen bitrate, and hls.js plays every level; shaka-player the DASH', async (t) => {
    const play = player;
    if (!play) {
      t.skip(skipReason);
      return;
    }
    const rungs = task.output?.transcodeFile?.hls?.renditions ?? [];
    assert.ok(rungs.length >= 1, JSON.stringify(task));
    for (const r of rungs) {
      const chosen = r.perTitle as { cap: number; predictedBitrate: number } | undefined;
      assert.ok(chosen && chosen.predictedBitrate <= chosen.cap, `${String(r.name)}: ${JSON.stringify(r)}`);
      assert.equal(r.bitrate, chosen.predictedBitrate);
    }
    const url = (key: string) => play.mediaUrl(bucket, key);
    const first = await play.playHls(url('v/hls/index.m3u8'), { level: 0 });
    assertPlayed(first, 'level 0');
    assert.equal(first.levels.length, rungs.length);
    for (let i = 1; i < first.levels.length; i++)
      assertPlayed(await play.playHls(url('v/hls/index.m3u8'), { level: i }), `level ${i}`);
    assertPlayed(await play.playDash(url('v/fmp4/index.mpd')), 'index.mpd');
  });
});
