import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config/index.ts';
import { createTranscodeHandler, type RenditionOutput } from '../../src/transcode/index.ts';
import { parseMediaPlaylist } from '../../src/transcode/playlist.ts';
import { TEST_ENCODE_SETTINGS } from '../helpers/encode-defaults.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { decodeErrors, ffprobe, makeClip, moovBeforeMdat } from '../helpers/media.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';

// Issue 3 acceptance: a 30 s 1080p clip with audio, HLS + MP4 to the local S3 server,
// completes with outputs that decode end to end. The tests' encode settings (ultrafast, no
// per-title analysis: encode-defaults.ts); presets and per-title ladders have tests of their own.

let s3: TestS3;
let web: TestHttp;
const dirs: string[] = [];
before(async () => {
  const clip = await makeClip({ width: 1920, height: 1080, seconds: 30, fps: '30' });
  [s3, web] = await Promise.all([startS3(), startHttp({ '/in.mp4': serveFile(clip) })]);
});
after(async () => {
  await Promise.all([s3?.close(), web?.close(), ...dirs.map((d) => rm(d, { recursive: true, force: true }))]);
});

it('a 30 s 1080p clip with audio becomes playable HLS and MP4 renditions in the bucket', async () => {
  const bucket = await s3.createBucket();
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'mp-accept-'));
  dirs.push(scratch);
  const handler = createTranscodeHandler({
    config: loadConfig({ env: {}, overrides: { allowPrivateUrls: true, ...TEST_ENCODE_SETTINGS } }),
  });
  // What the bucket holds the moment ffmpeg has exited (the pipeline logs "encoded").
  let atEncoded: Promise<string[]> | undefined;
  const streamed: Array<{ rendition: string; partsDuringEncode: number }> = [];
  const log = pino(
    { level: 'debug' },
    {
      write: (line: string) => {
        const l = JSON.parse(line);
        if (l.msg === 'encoded') atEncoded = s3.keys(bucket);
        if (l.msg === 'mp4 uploaded while encoding') streamed.push(l);
      },
    },
  );
  const out = await handler(
    {
      input: { url: web.url('/in.mp4') },
      storage: { type: 's3', endpoint: s3.endpoint, bucket, credentials: s3.credentials },
      outputs: { hls: { path: '/hls' }, mp4: { path: '/mp4' } },
    },
    {
      taskId: 'acc',
      attempt: 1,
      signal: new AbortController().signal,
      scratchDir: scratch,
      progress: () => undefined,
      log,
    },
  );
  // Segments go up while ffmpeg encodes, not all at the end: the first of each rendition
  // (done ~6 s into a 30 s clip) is in the bucket before the encode is over.
  const early = (await atEncoded) ?? [];
  for (const r of ['360p0', '720p0', '1080p0'])
    assert.ok(
      early.includes(`hls/${r}/0.ts`),
      `hls/${r}/0.ts uploaded during the encode; at its end the bucket held: ${early.join(' ')}`,
    );
  assert.deepEqual(
    (out.mp4 as RenditionOutput[] | undefined)?.map((m) => `${m.name} ${m.width}x${m.height}`),
    ['360p0 640x360', '720p0 1280x720', '1080p0 1920x1080'],
  );
  // An MP4 of more than a few parts goes up while ffmpeg writes it (streamed-mp4.ts).
  assert.ok(
    streamed.some((s) => s.rendition === '1080p0' && s.partsDuringEncode > 0),
    `1080p0.mp4 partly uploaded during the encode: ${JSON.stringify(streamed)}`,
  );
  assert.equal(Math.round(out.input_video.duration), 30);

  const keys = await s3.keys(bucket);
  // The master playlist as a player would fetch it: every variant decodes to the end. Its
  // files are fetched first, and its decode runs beside the checks of the MP4s.
  const hlsDir = path.join(scratch, 'hls');
  await Promise.all(
    keys
      .filter((x) => x.startsWith('hls/'))
      .map(async (k) => {
        const dest = path.join(scratch, k);
        await mkdir(path.dirname(dest), { recursive: true });
        await writeFile(dest, (await s3.get(bucket, k)).body);
      }),
  );
  await Promise.all([
    decodeErrors(path.join(hlsDir, 'index.m3u8')).then((errors) => assert.equal(errors, '')),
    ...['360p0', '720p0', '1080p0'].map(async (r) => {
      const pl = parseMediaPlaylist((await s3.get(bucket, `hls/${r}/index.m3u8`)).body.toString());
      assert.equal(pl.segments.length, 5);
      assert.equal(pl.type, 'VOD', 'published as a finished VOD playlist');
      assert.ok(pl.segments.every((s) => s.duration <= 6 + 1e-6));
      assert.ok(Math.abs(pl.segments.reduce((a, s) => a + s.duration, 0) - 30) <= 0.5);
      assert.ok(pl.segments.every((s) => keys.includes(`hls/${r}/${s.uri}`)));

      const local = path.join(scratch, `${r}.mp4`);
      const body = (await s3.get(bucket, `mp4/${r}.mp4`)).body;
      assert.ok(moovBeforeMdat(body));
      assert.equal(out.mp4?.find((m) => m.name === r)?.size, body.length, `${r}.mp4 size in the output`);
      await writeFile(local, body);
      assert.equal(await decodeErrors(local), '', `${r}.mp4 decodes cleanly`);
      const probed = await ffprobe(local);
      assert.ok(Math.abs(Number(probed.format.duration) - 30) < 0.2);
    }),
  ]);
});
