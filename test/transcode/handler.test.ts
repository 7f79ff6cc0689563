import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config/index.ts';
import {
  CancelledError,
  StorageDeniedError,
  UnsupportedMediaError,
  ValidationError,
  isRetryable,
} from '../../src/lib/errors.ts';
import type { JobContext } from '../../src/tasks/types.ts';
import {
  createTranscodeHandler,
  type OutputFolders,
  type RenditionOutput,
  type TranscodeJob,
} from '../../src/transcode/index.ts';
import { parseMediaPlaylist } from '../../src/transcode/playlist.ts';
import { decodeErrors, ffprobe, makeClip, moovBeforeMdat } from '../helpers/media.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';

const config = loadConfig({ env: {}, overrides: { allowPrivateUrls: true, x264Preset: 'ultrafast' } });
const handler = createTranscodeHandler({ config });

let s3: TestS3;
let web: TestHttp;
let clip: string;
let portrait: string;
const scratch: string[] = [];

before(async () => {
  [s3, clip, portrait] = await Promise.all([
    startS3(),
    makeClip({ width: 854, height: 480, seconds: 10, fps: '30000/1001' }),
    makeClip({ width: 480, height: 270, seconds: 3, rotate: 90, audio: false }),
  ]);
  const notVideo = path.join(os.tmpdir(), `mp-not-video-${process.pid}.mp4`);
  await writeFile(notVideo, 'this is a text file, not a video\n'.repeat(100));
  web = await startHttp({
    '/clip.mp4': serveFile(clip),
    '/portrait.mp4': serveFile(portrait),
    '/text.mp4': serveFile(notVideo),
  });
});
after(async () => {
  await Promise.all([s3?.close(), web?.close(), ...scratch.map((d) => rm(d, { recursive: true, force: true }))]);
});

async function context(signal = new AbortController().signal): Promise<JobContext & { reports: number[] }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-job-'));
  scratch.push(dir);
  const reports: number[] = [];
  return {
    taskId: 't',
    attempt: 1,
    signal,
    scratchDir: dir,
    progress: (f) => reports.push(f),
    log: pino({ level: 'silent' }),
    reports,
  };
}

function params(bucket: string, url: string, outputs: OutputFolders): TranscodeJob {
  return {
    input: { url },
    storage: { type: 's3', endpoint: s3.endpoint, bucket, credentials: s3.credentials },
    outputs,
    ...{},
  };
}

async function download(bucket: string, key: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-dl-'));
  scratch.push(dir);
  const file = path.join(dir, path.basename(key));
  await writeFile(file, (await s3.get(bucket, key)).body);
  return file;
}

describe('transcode handler (HTTP input, S3 output)', () => {
  it('writes the spec layout: master, rendition playlists, segments, faststart MP4s', async () => {
    const bucket = await s3.createBucket();
    const ctx = await context();
    const out = await handler(
      params(bucket, web.url('/clip.mp4'), { hls: { path: '/out/hls' }, mp4: { path: 'out/mp4' } }),
      ctx,
    );

    const keys = await s3.keys(bucket);
    for (const k of [
      'out/hls/index.m3u8',
      'out/hls/360p0/index.m3u8',
      'out/hls/360p0/0.ts',
      'out/hls/480p0/index.m3u8',
      'out/mp4/360p0.mp4',
      'out/mp4/480p0.mp4',
    ]) {
      assert.ok(keys.includes(k), `${k} in ${keys.join(' ')}`);
    }
    assert.ok(!keys.some((k) => k.includes('720p0')), 'never upscaled');
    assert.equal(out.hls?.path, '/out/hls/index.m3u8');
    assert.deepEqual(
      out.mp4?.map((m) => m.path),
      ['/out/mp4/360p0.mp4', '/out/mp4/480p0.mp4'],
    );
    assert.ok(Math.abs(out.input_video.duration - 10) < 0.1);
    assert.ok(out.input_video.size > 0);
    const first = out.mp4?.[0] as RenditionOutput | undefined;
    assert.equal(first?.width, 640);
    assert.equal(first?.height, 360);

    const master = (await s3.get(bucket, 'out/hls/index.m3u8')).body.toString();
    assert.match(
      master,
      /BANDWIDTH=\d+,AVERAGE-BANDWIDTH=\d+,RESOLUTION=640x360,CODECS="avc1\.(42E0|4D40|6400)[0-9A-F]{2},mp4a\.40\.2",FRAME-RATE=29\.970/,
    );
    assert.match(master, /RESOLUTION=854x480/);
    assert.equal((await s3.head(bucket, 'out/hls/index.m3u8')).contentType, 'application/vnd.apple.mpegurl');
    assert.equal((await s3.head(bucket, 'out/hls/360p0/0.ts')).contentType, 'video/mp2t');
    assert.equal((await s3.head(bucket, 'out/mp4/360p0.mp4')).contentType, 'video/mp4');

    for (const r of ['360p0', '480p0']) {
      const pl = parseMediaPlaylist((await s3.get(bucket, `out/hls/${r}/index.m3u8`)).body.toString());
      assert.ok(pl.ended);
      assert.ok(pl.targetDuration <= 6, `target ${pl.targetDuration}`);
      for (const s of pl.segments) assert.ok(s.duration <= 6 + 1e-6, `segment ${s.uri} is ${s.duration} s`);
      const total = pl.segments.reduce((a, s) => a + s.duration, 0);
      assert.ok(Math.abs(total - 10) <= 0.5, `segments sum to ${total}`);
      assert.deepEqual(
        pl.segments.map((s) => s.uri),
        pl.segments.map((_, i) => `${i}.ts`),
      );
      for (const s of pl.segments) assert.ok(keys.includes(`out/hls/${r}/${s.uri}`));
    }
    const mp4 = await download(bucket, 'out/mp4/480p0.mp4');
    assert.ok(moovBeforeMdat((await s3.get(bucket, 'out/mp4/480p0.mp4')).body));
    const probed = await ffprobe(mp4);
    assert.deepEqual(
      probed.streams.map((s) => s.codec_name),
      ['h264', 'aac'],
    );
    assert.equal(await decodeErrors(mp4), '');

    assert.ok(ctx.reports.length >= 2, `progress reports ${ctx.reports.join(',')}`);
    assert.deepEqual(
      [...ctx.reports].sort((a, b) => a - b),
      ctx.reports,
      'progress never goes down',
    );
    assert.equal(ctx.reports.at(-1), 1);
  });

  it('keeps a portrait phone video portrait (rotation applied to the pixels) and writes fMP4', async () => {
    const bucket = await s3.createBucket();
    const out = await handler(
      params(bucket, web.url('/portrait.mp4'), { hls: { path: 'v' }, fmp4: { path: 'f' } }),
      await context(),
    );
    assert.deepEqual(
      out.hls?.renditions?.map((r) => `${r.width}x${r.height}`),
      ['270x480'],
    );
    const seg = await download(bucket, 'v/270p0/0.ts');
    const v = (await ffprobe(seg)).streams.find((s) => s.codec_type === 'video');
    assert.equal(v?.width, 270);
    assert.equal(v?.height, 480);
    const keys = await s3.keys(bucket);
    assert.ok(
      keys.includes('f/index.m3u8') && keys.includes('f/270p0/init.mp4') && keys.includes('f/270p0/0.m4s'),
      keys.join(' '),
    );
    assert.match((await s3.get(bucket, 'f/270p0/index.m3u8')).body.toString(), /#EXT-X-MAP:URI="init.mp4"/);
  });

  it('refuses bad storage credentials at once, naming the bucket and not the secret', async () => {
    const bucket = await s3.createBucket();
    const p = params(bucket, web.url('/clip.mp4'), { hls: { path: 'x' } });
    const secret = 'wrong-secret-value-123';
    p.storage = {
      type: 's3',
      endpoint: s3.endpoint,
      bucket,
      credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: secret },
    };
    const before = web.hits.length;
    const err = await handler(p, await context()).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(err instanceof StorageDeniedError, String(err));
    assert.equal(isRetryable(err), false);
    assert.match(err.message, new RegExp(`bucket "${bucket}"`));
    assert.ok(!err.message.includes(secret));
    assert.equal(web.hits.length, before, 'nothing downloaded');
  });

  it('fails a task whose stored params no longer fit transcode-file, naming each field, before any download', async () => {
    const bucket = await s3.createBucket();
    // As a row written by another version might hold them: a profile with an encoder unknown
    // here, and an input URL that is no string.
    const stored = {
      ...params(bucket, web.url('/clip.mp4'), { hls: { path: 'x' } }),
      input: { url: 42 },
      profiles: [{ name: 'p', width: 640, height: 360, bitrate: 1_000_000, encoder: 'H.266' }],
    };
    const before = web.hits.length;
    const err = await handler(stored, await context()).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(err instanceof ValidationError, String(err));
    assert.equal(isRetryable(err), false);
    assert.match(err.message, /^the task's stored params do not fit its type/);
    assert.match(err.message, /input\.url: must be a string/);
    assert.match(err.message, /profiles\[0\]\.encoder: must be one of "H\.264"/);
    assert.equal(web.hits.length, before, 'nothing downloaded');
  });

  it('fails a file that is not a video with words a user understands', async () => {
    const bucket = await s3.createBucket();
    const err = await handler(params(bucket, web.url('/text.mp4'), { hls: { path: 'x' } }), await context()).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(err instanceof UnsupportedMediaError, String(err));
    assert.match(err.message, /not a video/);
    assert.deepEqual(await s3.keys(bucket), []);
  });

  it('stops ffmpeg on cancel and reports CancelledError', async () => {
    const bucket = await s3.createBucket();
    const ctrl = new AbortController();
    const ctx = await context(ctrl.signal);
    const started = Date.now();
    const p = handler(params(bucket, web.url('/clip.mp4'), { hls: { path: 'x' }, mp4: { path: 'y' } }), {
      ...ctx,
      progress: (f) => f > 0.15 && ctrl.abort(),
    });
    const err = await p.then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(err instanceof CancelledError, String(err));
    assert.ok(Date.now() - started < 15_000);
    assert.ok(!(await s3.keys(bucket)).includes('x/index.m3u8'), 'no master playlist for a cancelled job');
  });
});
