// A clip of a variable-frame-rate source (a screen capture, a browser recording) ends where it
// should: cut from 1.0 s to 3.0 s, it lasts 2.0 s, its first picture is the one on screen at
// 1.0 s and its last frame shows up to the end, also where the source holds one picture across
// each end for much longer than its other frames. The sources are made here with ffmpeg (an
// H.264 MP4 and a VP9 WebM with millisecond frame times, as browsers record), and the cut is
// clip-cut.ts's, run on them with real ffmpeg. A smart cut that ends on copied GOPs with
// B-frames (whose last packet in decode order is not the last frame shown) lasts its range too.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { cutClip } from '../../src/assets/clip-cut.ts';
import { loadConfig } from '../../src/config/index.ts';
import { probe } from '../../src/transcode/index.ts';
import { frameAt as frameAtFile, psnr } from '../helpers/media.ts';

const run = promisify(execFile);
const work = mkdtempSync(path.join(tmpdir(), 'mediaplane-clip-vfr-'));
const config = loadConfig({ env: {}, overrides: {} });

// testsrc2 at 10 fps (every frame a different picture), re-timed: about 0.1 s apart with a
// jitter of up to 30 ms, one frame held from 0.73 s to 1.13 s (on screen at 1.0 s, its nearest
// boundary 0.13 s away) and one from 2.8 s to 3.4 s (on screen at 3.0 s).
const TIMES = '(N*0.1+0.3*gte(N\\,8)+0.5*gte(N\\,26)+0.03*mod(N*N\\,5)/4)/TB';

/** A 6 s source of `kind` with those frame times and a sine tone. */
async function makeSource(kind: 'mp4' | 'webm'): Promise<string> {
  const file = path.join(work, `source.${kind}`);
  const video =
    kind === 'mp4'
      ? ['-c:v', 'libx264', '-preset', 'veryfast', '-g', '10', '-pix_fmt', 'yuv420p', '-video_track_timescale', '1000']
      : ['-c:v', 'libvpx-vp9', '-deadline', 'realtime', '-cpu-used', '8', '-g', '10', '-b:v', '500k'];
  await run('ffmpeg', [
    ...['-v', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=10'],
    ...['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', '6'],
    ...['-vf', `settb=1/1000,setpts=${TIMES}`, '-fps_mode', 'passthrough', '-enc_time_base:v', '1/1000'],
    ...video,
    ...['-c:a', kind === 'mp4' ? 'aac' : 'libopus', '-shortest', file],
  ]);
  return file;
}

/** The video frames' presentation times and durations (seconds), in order, by ffprobe. */
async function frameTimes(file: string): Promise<Array<{ t: number; duration: number }>> {
  const { stdout } = await run('ffprobe', [
    ...['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'packet=pts_time,duration_time'],
    ...['-of', 'csv=p=0', file],
  ]);
  return stdout
    .trim()
    .split('\n')
    .map((line) => line.split(',').map(Number))
    .map(([t = Number.NaN, duration = Number.NaN]) => ({ t, duration }))
    .sort((a, b) => a.t - b.t);
}

/** Frame `index` of `file` as a PNG named `name` in this file's folder. */
const frameAt = (file: string, index: number, name: string): Promise<string> =>
  frameAtFile(file, index, path.join(work, `${name}.png`));

/** Cuts [start, end) of `input` into `name`.mp4 as the clip task does. */
async function cut(input: string, range: { start: number; end: number }, name: string) {
  const output = path.join(work, `${name}.mp4`);
  const scratchDir = mkdtempSync(path.join(work, `${name}-`));
  const signal = AbortSignal.timeout(300_000);
  const media = await probe(input, { ffprobePath: config.ffprobePath, signal });
  const result = await cutClip(config, { input, media, range, output, scratchDir, signal, progress: () => {} });
  return { output, result };
}

after(() => rmSync(work, { recursive: true, force: true }));

/** Seconds of `file`'s video stream, by ffprobe. */
async function videoSeconds(file: string): Promise<number> {
  const { stdout } = await run('ffprobe', [
    ...['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=duration', '-of', 'csv=p=0', file],
  ]);
  return Number(stdout.trim());
}

describe('a smart cut whose last GOP is copied with its B-frames', () => {
  it('lasts the range too: the last frame in presentation order shows up to the end', async () => {
    const source = path.join(work, 'bframes.mp4');
    await run('ffmpeg', [
      ...['-v', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=30', '-t', '6'],
      ...['-c:v', 'libx264', '-preset', 'veryfast', '-g', '30', '-keyint_min', '30', '-sc_threshold', '0'],
      ...['-bf', '2', '-pix_fmt', 'yuv420p', source],
    ]);
    // 1.3 s to 4.0 s: the frames up to 2.0 s encoded, the GOPs of 2-3 s and 3-4 s copied.
    const { output, result } = await cut(source, { start: 1.3, end: 4 }, 'bframes-clip');
    assert.equal(result.method, 'smart');
    const seconds = await videoSeconds(output);
    assert.ok(Math.abs(seconds - 2.7) <= 0.001, `the clip's video lasts ${seconds} s`);
  });
});

for (const kind of ['mp4', 'webm'] as const) {
  describe(`a clip of a variable-frame-rate ${kind} from 1.0 s to 3.0 s`, () => {
    let source = '';
    let frames: Array<{ t: number; duration: number }> = [];
    let clip = '';

    before(async () => {
      source = await makeSource(kind);
      frames = await frameTimes(source);
      clip = (await cut(source, { start: 1, end: 3 }, `clip-${kind}`)).output;
    });

    it("the source's frames really fall at irregular times", () => {
      const gaps = frames.slice(1).map((f, i) => Math.round((f.t - (frames[i]?.t ?? 0)) * 1000));
      assert.ok(new Set(gaps).size >= 4, `frame intervals (ms): ${gaps.join(' ')}`);
      assert.ok(Math.max(...gaps) >= 4 * Math.min(...gaps), `frame intervals (ms): ${gaps.join(' ')}`);
    });

    it('lasts 2.0 s, by ffprobe of the clip and of its video, its last frame shown up to the end', async () => {
      const { stdout } = await run('ffprobe', [
        ...['-v', 'error', '-show_entries', 'format=duration:stream=codec_type,duration', '-of', 'json', clip],
      ]);
      const probed = JSON.parse(stdout) as {
        format: { duration: string };
        streams: Array<{ codec_type: string; duration: string }>;
      };
      // Within a millisecond: a typical frame of the source is 100 ms, the held ones 400 and 600.
      assert.ok(Math.abs(Number(probed.format.duration) - 2) <= 0.001, `the clip lasts ${probed.format.duration} s`);
      const video = probed.streams.find((s) => s.codec_type === 'video');
      assert.ok(Math.abs(Number(video?.duration) - 2) <= 0.001, `its video lasts ${video?.duration} s`);
      const last = (await frameTimes(clip)).at(-1);
      assert.ok(last && Math.abs(last.t + last.duration - 2) <= 0.001, `its last frame: ${JSON.stringify(last)}`);
    });

    it('its first picture is the one on screen at 1.0 s, and its last the one on screen just before 3.0 s', async () => {
      const onScreen = (x: number) => frames.findLastIndex((f) => f.t <= x);
      const at1 = onScreen(1);
      // The frame on screen at 1.0 s started well before it, and the next starts well after.
      assert.ok((frames[at1]?.t ?? 1) < 0.9 && (frames[at1 + 1]?.t ?? 0) > 1.1, JSON.stringify(frames[at1]));
      const first = await frameAt(clip, 0, `first-${kind}`);
      const same = await psnr(first, await frameAt(source, at1, `src-${at1}-${kind}`));
      assert.ok(same > 35, `the first picture against the source's frame on screen at 1.0 s: ${same} dB`);
      const next = await psnr(first, await frameAt(source, at1 + 1, `src-${at1 + 1}-${kind}`));
      assert.ok(next < same - 10, `the frame after it is told apart: ${next} dB against ${same} dB`);
      const count = (await frameTimes(clip)).length;
      const lastPicture = await frameAt(clip, count - 1, `last-${kind}`);
      const end = await psnr(lastPicture, await frameAt(source, onScreen(2.999), `src-end-${kind}`));
      assert.ok(end > 35, `the last picture against the source's frame on screen before 3.0 s: ${end} dB`);
    });
  });
}
