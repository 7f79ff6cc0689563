// The `upload` task's handler (issue #27) with real ffmpeg: the source fetched from a URL
// (kept in the store) or taken from the store where an upload put it, its size and hashes,
// its videoSpec as Livepeer's SDK reads it, and the HLS, MP4 and thumbnail files in the
// built-in store under the asset's prefix.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { copyFile, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { VideoSpec$inboundSchema } from 'livepeer/models/components/asset.js';
import pino from 'pino';
import { createUploadHandler } from '../../src/assets/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import { UnsupportedMediaError, ValidationError } from '../../src/lib/errors.ts';
import { FolderStore } from '../../src/storage/builtin/folder.ts';
import type { JobContext } from '../../src/tasks/index.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { makeClip, sample } from '../helpers/media.ts';

const config = loadConfig({ env: {}, overrides: { allowPrivateUrls: true, x264Preset: 'ultrafast' } });

let dir: string;
let store: FolderStore;
let web: TestHttp;
let clip: string;
const AUDIO = sample('11_audio_only_aac_lc_mono_8khz_fdkaac.m4a');
const handler = () => createUploadHandler({ config, store, log: pino({ level: 'silent' }) });

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mp-asset-handler-'));
  store = new FolderStore(path.join(dir, 'media'));
  clip = await makeClip({ width: 320, height: 240, seconds: 2 });
  const text = path.join(dir, 'text.mp4');
  await writeFile(text, 'this is a text file, not a video\n'.repeat(100));
  web = await startHttp({ '/clip.mp4': serveFile(clip), '/text.mp4': serveFile(text) });
});
after(async () => {
  await web?.close();
  await rm(dir, { recursive: true, force: true });
});

let runs = 0;
async function context(): Promise<JobContext & { reports: number[] }> {
  const scratchDir = await mkdtemp(path.join(dir, 'scratch-'));
  const reports: number[] = [];
  return {
    taskId: `t${++runs}`,
    attempt: 1,
    signal: AbortSignal.timeout(120_000),
    scratchDir,
    progress: (f) => reports.push(f),
    log: pino({ level: 'silent' }),
    reports,
  };
}
/** A fresh playback id per test: 16 lowercase letters and digits. */
const playbackIdOf = (n: number) => `testasset${String(n).padStart(7, '0')}`;
const file = (key: string) => path.join(dir, 'media', key);
const exists = (key: string) =>
  stat(file(key)).then(
    (s) => s.isFile() && s.size > 0,
    () => false,
  );
const hashes = (bytes: Buffer) => [
  { hash: createHash('md5').update(bytes).digest('hex'), algorithm: 'md5' },
  { hash: createHash('sha256').update(bytes).digest('hex'), algorithm: 'sha256' },
];
const params = (playbackId: string, over: Record<string, unknown> = {}) => ({
  assetId: '5f7e2b1a-0000-4000-8000-000000000001',
  playbackId,
  input: { key: `asset/${playbackId}/source` },
  ...over,
});

describe('the upload handler', () => {
  it('a URL: fetched and kept as the source, hashed, probed, HLS + MP4 + thumbnails in the store', async () => {
    const pid = playbackIdOf(1);
    const ctx = await context();
    const out = await handler()(params(pid, { input: { url: web.url('/clip.mp4') }, staticMp4: true }), ctx);
    const bytes = await readFile(clip);
    assert.equal(out.type, 'video');
    assert.equal(out.size, bytes.length);
    assert.deepEqual(out.hash, hashes(bytes), "the hashes are node:crypto's of the file");
    assert.deepEqual(out.source, { key: `asset/${pid}/source` });
    assert.deepEqual(await readFile(file(`asset/${pid}/source`)), bytes, 'the source is kept, byte for byte');
    assert.deepEqual(await readdir(ctx.scratchDir).then((f) => f.includes('source')), false, 'moved, not copied');
    assert.equal(out.hls?.key, `asset/${pid}/hls/index.m3u8`);
    assert.match(await readFile(file(out.hls?.key ?? ''), 'utf8'), /^#EXTM3U/);
    assert.ok(out.mp4 && out.mp4.length > 0, 'staticMp4: MP4 renditions');
    for (const m of out.mp4 ?? []) {
      assert.match(m.key, new RegExp(`^asset/${pid}/mp4/.+\\.mp4$`));
      assert.equal((await stat(file(m.key))).size, m.size);
      assert.ok(m.width && m.height && m.bitrate);
    }
    assert.equal(out.thumbnails?.key, `asset/${pid}/hls/thumbnails/thumbnails.vtt`);
    assert.ok(await exists(out.thumbnails?.key ?? ''), 'the storyboard');
    assert.ok(await exists(out.thumbnails?.poster ?? ''), 'the poster');
    // The videoSpec as Livepeer's SDK models it: its own schema reads it whole.
    assert.deepEqual(VideoSpec$inboundSchema.parse(out.videoSpec), out.videoSpec, 'no field the SDK does not know');
    const spec = out.videoSpec;
    assert.equal(spec.format, 'mp4');
    assert.ok(Math.abs((spec.duration ?? 0) - 2) < 0.1, `duration ${spec.duration}`);
    assert.ok((spec.bitrate ?? 0) > 0);
    const [video, audio, ...more] = spec.tracks;
    assert.equal(more.length, 0);
    assert.deepEqual(
      { ...video, bitrate: undefined },
      {
        type: 'video',
        codec: 'h264',
        width: 320,
        height: 240,
        pixelFormat: 'yuv420p',
        fps: 30,
        bitDepth: 8,
        bitrate: undefined,
      },
    );
    assert.equal(audio?.type, 'audio');
    assert.equal(audio?.codec, 'aac');
    assert.equal(audio?.sampleRate, 48000);
    assert.equal(audio?.channels, 1);
    assert.equal(ctx.reports.at(-1), 1);
    assert.ok(
      ctx.reports.every((f, i) => i === 0 || f >= (ctx.reports[i - 1] ?? 0)),
      `progress only goes forward (the download, then the encode): ${ctx.reports.join(' ')}`,
    );
  });

  it('an upload: read where the store keeps it, left in place; HLS only without staticMp4', async () => {
    const pid = playbackIdOf(2);
    await store.putFile(`asset/${pid}/source`, clip, { contentType: 'video/mp4', signal: AbortSignal.timeout(5000) });
    const out = await handler()(params(pid), await context());
    const bytes = await readFile(clip);
    assert.deepEqual(out.hash, hashes(bytes));
    assert.deepEqual(await readFile(file(`asset/${pid}/source`)), bytes, 'the source is untouched');
    assert.ok(await exists(`asset/${pid}/hls/index.m3u8`));
    assert.equal(out.mp4, undefined);
    assert.equal(await stat(file(`asset/${pid}/mp4`)).catch(() => undefined), undefined, 'no mp4 folder');
  });

  it('audio alone is an audio asset: audio tracks, HLS, no thumbnails', async () => {
    const pid = playbackIdOf(3);
    await copyFile(AUDIO, path.join(dir, 'audio.m4a'));
    await store.putFile(`asset/${pid}/source`, path.join(dir, 'audio.m4a'), {
      contentType: 'audio/mp4',
      signal: AbortSignal.timeout(5000),
      move: true,
    });
    const out = await handler()(params(pid), await context());
    assert.equal(out.type, 'audio');
    assert.deepEqual(
      out.videoSpec.tracks.map((t) => t.type),
      ['audio'],
    );
    assert.equal(out.videoSpec.tracks[0]?.sampleRate, 8000);
    assert.ok(await exists(out.hls?.key ?? ''));
    assert.equal(out.thumbnails, undefined);
    assert.deepEqual(VideoSpec$inboundSchema.parse(out.videoSpec), out.videoSpec);
  });

  it('a file that is no video fails with words a user understands, and keeps nothing', async () => {
    const pid = playbackIdOf(4);
    await assert.rejects(handler()(params(pid, { input: { url: web.url('/text.mp4') } }), await context()), (err) => {
      assert.ok(err instanceof UnsupportedMediaError);
      assert.match(err.message, /not a video/);
      return true;
    });
    assert.deepEqual(await readdir(file(`asset/${pid}`)).catch(() => []), []);
  });

  it('stored params that do not fit fail at once, naming the field', async () => {
    const run = async (p: Record<string, unknown>) => handler()(p, await context());
    await assert.rejects(
      run(params('Not/AnId')),
      (err) => err instanceof ValidationError && /playbackId/.test(err.message),
    );
    await assert.rejects(
      run(params(playbackIdOf(5), { input: { key: `asset/${playbackIdOf(6)}/source` } })),
      (err) => err instanceof ValidationError && /input\.key/.test(err.message),
    );
    await assert.rejects(
      run(params(playbackIdOf(5), { c2pa: true })),
      (err) => err instanceof ValidationError && /C2PA signing is not configured/.test(err.message),
    );
  });
});
