import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/index.ts';
import { type MediaplaneError, UnsupportedMediaError } from '../../src/lib/errors.ts';
import { FileInput, LocalDirStore } from '../../src/storage/index.ts';
import { runPipeline, type TranscodeFileOutput } from '../../src/transcode/index.ts';
import { parseMediaPlaylist } from '../../src/transcode/playlist.ts';
import { decodeErrors, ffprobe, moovBeforeMdat, sample } from '../helpers/media.ts';

// Each real-world sample of ../shared/samples either completes with playable outputs or
// fails with the documented message (docs/transcode.md, "Supported inputs").

const config = loadConfig({ env: {}, overrides: { x264Preset: 'ultrafast' } });
const dirs: string[] = [];
after(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

async function transcode(name: string): Promise<{ out: TranscodeFileOutput; dir: string }> {
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'mp-sample-'));
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-sample-out-'));
  dirs.push(scratch, dir);
  const out = await runPipeline(config, {
    source: new FileInput(sample(name)),
    store: new LocalDirStore(dir),
    outputs: { hls: { path: '/hls' }, mp4: { path: '/mp4' } },
    scratchDir: scratch,
    signal: new AbortController().signal,
    progress: () => undefined,
  });
  return { out, dir };
}

/** The top rendition's MP4: its video size and stream kinds, and a clean decode of HLS and MP4. */
async function checkPlayable(
  dir: string,
  out: TranscodeFileOutput,
): Promise<{ width: number; height: number; codecs: string[] }> {
  const top = out.mp4?.at(-1);
  assert.ok(top);
  const mp4 = path.join(dir, top.path);
  // The reads, decodes and the probe are independent: they run side by side.
  const [head, mp4Errors, hlsErrors, probed] = await Promise.all([
    readFile(mp4),
    decodeErrors(mp4),
    decodeErrors(path.join(dir, 'hls/index.m3u8')),
    ffprobe(mp4),
  ]);
  assert.ok(moovBeforeMdat(head));
  assert.equal(mp4Errors, '');
  assert.equal(hlsErrors, '');
  const v = probed.streams.find((s) => s.codec_type === 'video');
  assert.ok(v && !v.side_data_list?.some((d) => d.rotation), 'no rotation flag left: the pixels are turned');
  assert.ok(
    !probed.format.tags?.location && !Object.keys(probed.format.tags ?? {}).some((k) => /location|xyz/i.test(k)),
    'no GPS',
  );
  const pl = parseMediaPlaylist(await readFile(path.join(dir, `hls/${top.name}/index.m3u8`), 'utf8'));
  const sum = pl.segments.reduce((a, s) => a + s.duration, 0);
  assert.ok(
    Math.abs(sum - out.input_video.duration) <= 0.5,
    `segments ${sum} s vs input ${out.input_video.duration} s`,
  );
  return { width: v.width ?? 0, height: v.height ?? 0, codecs: probed.streams.map((s) => s.codec_name) };
}

const playable: [string, { size: string; codecs: string[]; renditions: string[] }][] = [
  // First, as the longest (25 s of 1080p without a duration in its container, measured by a
  // decode), so that the others run beside it (the tests run two at a time).
  [
    '07_chrome_screen_recording_h264_annexb_vfr_no_audio.mkv',
    { size: '1920x1080', codecs: ['h264'], renditions: ['360p0', '720p0', '1080p0'] },
  ],
  [
    '01_android12_phone_h264_aac_2160p60_rot90_portrait.mp4',
    { size: '2160x3840', codecs: ['h264', 'aac'], renditions: ['360p0', '720p0', '2160p0'] },
  ],
  [
    '03_android14_phone_hevc10_hlg_aac_1080p.mp4',
    { size: '1920x1080', codecs: ['h264', 'aac'], renditions: ['360p0', '720p0', '1080p0'] },
  ],
  [
    '04_android_phone_hevc_aac_rot90_with_metadata_track.mp4',
    { size: '1080x1920', codecs: ['h264', 'aac'], renditions: ['360p0', '720p0', '1080p0'] },
  ],
  [
    '05_pixel7_h264_video_only_no_audio_rot180.mp4',
    { size: '1920x1080', codecs: ['h264'], renditions: ['360p0', '720p0', '1080p0'] },
  ],
  ['08_bear_vp9_odd_resolution_161x121_no_audio.webm', { size: '160x120', codecs: ['h264'], renditions: ['120p0'] }],
  ['10_roadtrip_vp9_profile2_10bit_no_audio.webm', { size: '426x240', codecs: ['h264'], renditions: ['240p0'] }],
  [
    '13_butterfly_camera_h264_aac_720p30_7s.mp4',
    { size: '1280x720', codecs: ['h264', 'aac'], renditions: ['360p0', '720p0'] },
  ],
  // The per-title ladder (issue #31) drops a rung that saves a player no bandwidth: this
  // source carries 345 kb/s, and both rungs would spend all of it.
  [
    '14_big_buck_bunny_vp8_vorbis_720p24_30s.webm',
    { size: '1280x720', codecs: ['h264', 'aac'], renditions: ['720p0'] },
  ],
  // At the tests' ultrafast preset the 360p rung would spend its 1 Mbps cap, beside a 720p
  // rung capped at the source's 1.2 Mbps (at veryfast, the default, it spends 0.5 Mbps and stays).
  ['16_big_buck_bunny_h264_aac51_720p25_5s.mp4', { size: '1280x720', codecs: ['h264', 'aac'], renditions: ['720p0'] }],
];

// Two samples at a time: each test has its own folders, and one sample's single-threaded
// steps (the probes, the per-title analysis, the decode checks) overlap the other's encode.
describe('real-world samples', { concurrency: 2 }, () => {
  for (const [name, want] of playable) {
    it(`${name} completes with playable outputs`, async () => {
      const { out, dir } = await transcode(name);
      assert.deepEqual(
        out.mp4?.map((m) => m.name),
        want.renditions,
      );
      const got = await checkPlayable(dir, out);
      assert.equal(`${got.width}x${got.height}`, want.size);
      assert.deepEqual(got.codecs, want.codecs);
    });
  }

  it('11_audio_only_aac_lc_mono_8khz_fdkaac.m4a completes with an AAC rendition and audio.m4a', async () => {
    const { out, dir } = await transcode('11_audio_only_aac_lc_mono_8khz_fdkaac.m4a');
    assert.deepEqual(
      out.mp4?.map((m) => m.path),
      ['/mp4/audio.m4a'],
    );
    const m4a = path.join(dir, 'mp4/audio.m4a');
    const [m4aErrors, hlsErrors, probed] = await Promise.all([
      decodeErrors(m4a),
      decodeErrors(path.join(dir, 'hls/index.m3u8')),
      ffprobe(m4a),
    ]);
    assert.equal(m4aErrors, '');
    assert.equal(hlsErrors, '');
    assert.deepEqual(
      probed.streams.map((s) => s.codec_name),
      ['aac'],
    );
    // The container says 3.328 s; ffmpeg's decoder drops the fdkaac encoder's priming (two
    // 1024-sample frames at 8 kHz), so 3.072 s of sound come out.
    assert.ok(Math.abs(Number(probed.format.duration) - out.input_video.duration) <= 0.3);
  });

  const failing: [string, RegExp][] = [['12_BROKEN_vp9_invalid_bitstream.webm', /could not be decoded/]];
  for (const [name, message] of failing) {
    it(`${name} fails, not retried, with "${message.source}"`, async () => {
      const err = await transcode(name).then(
        () => null,
        (e: unknown) => e,
      );
      assert.ok(err instanceof UnsupportedMediaError, String(err));
      assert.equal((err as MediaplaneError).retryable, false);
      assert.match(err.message, message);
    });
  }
});
