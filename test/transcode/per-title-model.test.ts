import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rateControl, segmentTiming, TARGET_CRF, videoCodecArgs } from '../../src/transcode/encoders.ts';
import { planLadder, type Rendition } from '../../src/transcode/ladder.ts';
import { parseFramecrc, type ProbeSize, sampleWindows } from '../../src/transcode/per-title/analyze.ts';
import { choiceFor, predictRung, rungCrf, usefulRungs } from '../../src/transcode/per-title/predict.ts';
import { parseProbe } from '../../src/transcode/probe.ts';
import { renditionOutput } from '../../src/transcode/renditions.ts';

// Issue #31's pure parts: the windows sampled, the probes' packets read, the prediction, the
// rungs kept, and the rate control that keeps a keyframe whole whatever the average.

const rung = (over: Partial<Rendition>): Rendition => ({
  name: '720p0',
  width: 1280,
  height: 720,
  bitrate: 4_000_000,
  fps: { num: 25, den: 1 },
  codec: 'h264',
  profile: 'high',
  noBFrames: false,
  gopFrames: undefined,
  crf: undefined,
  ...over,
});

const probe = (width: number, height: number, inter: number, key: number): ProbeSize => ({
  width,
  height,
  interBitsPerSec: inter,
  keyframeBits: key,
  ssim: 0.99,
  frames: 50,
});

describe('per-title analysis: windows and packets', () => {
  it('samples at most 10% of a video, in windows of at most 2 s spread over it', () => {
    for (const duration of [3, 5, 8, 30, 120, 3600]) {
      const w = sampleWindows(duration);
      const sampled = w.reduce((s, x) => s + x.length, 0);
      assert.ok(w.length >= 1 && w.length <= 8, `${duration} s: ${w.length} windows`);
      assert.ok(sampled <= duration * 0.1 + 1e-9, `${duration} s: ${sampled} s sampled`);
      for (const x of w) assert.ok(x.start >= 0 && x.start + x.length <= Math.max(duration, x.length) + 1e-9);
    }
    const hour = sampleWindows(3600);
    assert.equal(hour.length, 8);
    assert.ok((hour.at(-1)?.start ?? 0) > 3000, 'the last window near the end');
  });
  it("reads framecrc's packets per stream, keyframes by their missing flags", () => {
    const text = [
      '#software: Lavf59.27.100',
      '#tb 0: 1/25',
      '0,          0,          0,        1,     3030, 0x0b8f8a43, S=1,        8',
      '1,          0,          0,        1,      700, 0x0b8f8a43, S=1,        8',
      '0,          1,          1,        1,       18, 0x2d56060e, F=0x0, S=1,        8',
      '1,          1,          1,        1,        9, 0x2d56060e, F=0x0',
      '',
    ].join('\n');
    assert.deepEqual(parseFramecrc(text), [
      [
        { size: 3030, key: true },
        { size: 18, key: false },
      ],
      [
        { size: 700, key: true },
        { size: 9, key: false },
      ],
    ]);
  });
});

describe('per-title prediction', () => {
  const probes = [probe(1280, 720, 2_000_000, 400_000), probe(320, 180, 250_000, 50_000)] as const;
  it('is the larger probe at its own size, and between the probes on a log-log line', () => {
    const top = predictRung(probes, { width: 1280, height: 720 }, 2);
    assert.equal(top.bitrate, 2_000_000 + 400_000 / 2);
    assert.equal(top.keyframeBits, 400_000);
    const mid = predictRung(probes, { width: 640, height: 360 }, 2);
    // 8x from 180p to 720p over 16x the pixels: 2.83x from 180p to 360p.
    assert.ok(Math.abs(mid.bitrate - (250_000 * 8 ** 0.5 + (50_000 * 8 ** 0.5) / 2)) < 2);
    // Two CRF steps of 6 halve the bits.
    assert.equal(predictRung(probes, { width: 1280, height: 720 }, 2, 0.5).bitrate, 1_100_000);
  });
  it('aims smaller rungs at a lower CRF: they are shown scaled up', () => {
    const top = { width: 1920, height: 1080 };
    assert.equal(rungCrf(top, top, 21), 21);
    assert.equal(rungCrf({ width: 1280, height: 720 }, top, 21), 19);
    assert.equal(rungCrf({ width: 640, height: 360 }, top, 21), 15);
    assert.equal(rungCrf({ width: 640, height: 360 }, { width: 1280, height: 720 }, 21), 17);
    assert.equal(rungCrf({ width: 160, height: 90 }, { width: 3840, height: 2160 }, 21), 12);
  });
  it('encodes an easy rung as capped CRF, and a rung near its cap as ABR at the cap', () => {
    const easy = choiceFor({ bitrate: 300_000, keyframeBits: 1 }, { cap: 4_000_000, crf: 21, ssim: 0.991 });
    assert.deepEqual(easy, {
      crf: 21,
      predictedBitrate: 300_000,
      cap: 4_000_000,
      hitsCap: false,
      predictedSsim: 0.991,
    });
    const hard = choiceFor({ bitrate: 3_700_000, keyframeBits: 1 }, { cap: 4_000_000, crf: 21, ssim: 0.991 });
    assert.deepEqual(hard, { predictedBitrate: 4_000_000, cap: 4_000_000, hitsCap: true });
    // At 0.85 of the cap it is still capped CRF: it spends what it needs, up to the cap.
    const near = choiceFor({ bitrate: 3_400_000, keyframeBits: 1 }, { cap: 4_000_000, crf: 21, ssim: 0.991 });
    assert.equal(near.crf, 21);
    assert.equal(near.hitsCap, false);
  });
  it('drops a default rung whose upper neighbour costs about as much, never a profile or the top', () => {
    const at = (name: string, width: number, predicted: number, perTitle: 'ladder' | 'profile' = 'ladder') =>
      rung({
        name,
        width,
        height: (width * 9) / 16,
        perTitle,
        choice: { crf: 21, predictedBitrate: predicted, cap: 4_000_000, hitsCap: false },
      });
    const still = [at('360p0', 640, 40_000), at('720p0', 1280, 70_000), at('1080p0', 1920, 120_000)];
    assert.deepEqual(
      usefulRungs(still).map((r) => r.name),
      ['1080p0'],
    );
    const film = [at('360p0', 640, 600_000), at('720p0', 1280, 1_900_000), at('1080p0', 1920, 3_500_000)];
    assert.deepEqual(
      usefulRungs(film).map((r) => r.name),
      ['360p0', '720p0', '1080p0'],
    );
    const asked = [at('lo', 640, 40_000, 'profile'), at('hi', 1280, 70_000, 'profile')];
    assert.equal(usefulRungs(asked).length, 2);
  });
  it('of two rungs capped alike, keeps a smaller one that fits its cap over a larger one starved by it', () => {
    // A 311 kb/s source caps every rung at 311 kb/s (sample 14).
    const capped = (name: string, width: number) =>
      rung({
        name,
        width,
        height: (width * 9) / 16,
        perTitle: 'ladder',
        choice: { predictedBitrate: 311_000, cap: 311_000, hitsCap: true },
      });
    const ladder = [capped('360p0', 640), capped('720p0', 1280)];
    const names = (needs: [string, number][]) => usefulRungs(ladder, new Map(needs)).map((r) => r.name);
    assert.deepEqual(
      names([
        ['360p0', 322_000],
        ['720p0', 487_000],
      ]),
      ['360p0'],
    );
    // Both starved (a screen recording's rungs): the top stays, as without the needs.
    assert.deepEqual(
      names([
        ['360p0', 395_000],
        ['720p0', 650_000],
      ]),
      ['720p0'],
    );
    assert.deepEqual(names([]), ['720p0']);
  });
});

describe('rate control: a keyframe always fits (the gray start of issue #31)', () => {
  // The case: a 720p card whose source carries 12 kb/s caps the rung at 12 kb/s; its
  // 24 kbit VBV buffer could not hold one keyframe, and the picture was gray for 4 s.
  const card = rung({ bitrate: 12_000 });
  it('keeps a buffer for a keyframe and a peak that refills it within a segment, whatever the average', () => {
    const rc = rateControl(card, 6);
    assert.ok(rc.bufsize >= 1280 * 720 * 0.5, `bufsize ${rc.bufsize}`);
    assert.ok(rc.maxrate >= rc.bufsize / 6, `maxrate ${rc.maxrate}`);
    // ABR's opening guess at 12 kb/s crushes the first keyframe whatever the buffer: capped CRF instead.
    assert.equal(rc.crf, TARGET_CRF);
    assert.equal(rc.bitrate, undefined);
  });
  it('leaves a rung whose bitrate can afford keyframes as it was: ABR under 1.5x peaks and a 2 s buffer', () => {
    assert.deepEqual(rateControl(rung({}), 6), {
      crf: undefined,
      bitrate: 4_000_000,
      maxrate: 6_000_000,
      bufsize: 8_000_000,
    });
  });
  it('gives a per-title rung capped CRF with its cap as the peak, and the analysis keyframe when larger', () => {
    const r = rung({
      perTitle: 'ladder',
      keyframeBits: 900_000,
      choice: { crf: 21, predictedBitrate: 1, cap: 4_000_000, hitsCap: false },
    });
    assert.deepEqual(rateControl(r, 2), { crf: 21, bitrate: undefined, maxrate: 4_000_000, bufsize: 4_000_000 });
    // A source at 20 kb/s: the cap is the keyframe floor (900 kbit a 2 s segment).
    const low = { ...r, bitrate: 20_000, choice: { crf: 21, predictedBitrate: 1, cap: 450_000, hitsCap: false } };
    assert.deepEqual(rateControl(low, 2), { crf: 21, bitrate: undefined, maxrate: 450_000, bufsize: 900_000 });
    const t = segmentTiming(2, low);
    const args = videoCodecArgs(low, { preset: 'veryfast', frames: t.frames, hdrSource: false }).join(' ');
    assert.ok(args.includes('-crf 21 -maxrate 450000 -bufsize 900000'), args);
  });
});

describe('the default ladder is tunable, a profile only when it asks', () => {
  const media = parseProbe({
    format: { duration: '10', size: '1000', format_name: 'mov' },
    streams: [
      {
        codec_type: 'video',
        codec_name: 'h264',
        width: 1280,
        height: 720,
        pix_fmt: 'yuv420p',
        r_frame_rate: '25/1',
        avg_frame_rate: '25/1',
      },
    ],
  });
  it('marks the rungs, and the output shows the choice with its cap', () => {
    if (!media.video) throw new Error('no video');
    const probed = { ...media, video: media.video };
    assert.deepEqual(
      planLadder(probed, { maxFps: 60 }).map((r) => r.perTitle),
      ['ladder', 'ladder'],
    );
    const profiles = [
      { name: 'a', width: 640, height: 360, bitrate: 500_000 },
      { name: 'b', width: 640, height: 360, bitrate: 500_000, perTitle: true },
    ];
    assert.deepEqual(
      planLadder(probed, { maxFps: 60, profiles }).map((r) => r.perTitle),
      [undefined, 'profile'],
    );
    const chosen = rung({
      choice: { crf: 21, predictedBitrate: 700_000, cap: 4_000_000, hitsCap: false, predictedSsim: 0.99 },
    });
    assert.deepEqual(renditionOutput(chosen, '/x.mp4', 10), {
      name: '720p0',
      path: '/x.mp4',
      width: 1280,
      height: 720,
      bitrate: 700_000,
      size: 10,
      perTitle: { crf: 21, predictedBitrate: 700_000, hitsCap: false, predictedSsim: 0.99, cap: 4_000_000 },
    });
    assert.equal(renditionOutput(rung({}), '/x.mp4', 10).perTitle, undefined);
  });
});
