// Where a long input is cut (transcode/chunked/plan.ts): the video chunks and the audio pieces.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { keptPackets } from '../../src/transcode/chunked/audio-piece.ts';
import { AUDIO_PREROLL_FRAMES, planAudio, planChunks } from '../../src/transcode/chunked/plan.ts';
import type { Rendition } from '../../src/transcode/renditions.ts';

const rung = (name: string, num: number, den = 1): Rendition => ({
  name,
  width: 640,
  height: 360,
  bitrate: 1_000_000,
  fps: { num, den },
  codec: 'h264',
  profile: 'high',
  noBFrames: false,
  gopFrames: undefined,
  crf: undefined,
});

describe('planChunks', () => {
  const base = { segmentSecs: 6, chunkSecs: 30, thresholdSecs: 120 };

  it('cuts whole segments of whole frames (29.97 fps: 179-frame segments)', () => {
    const plan = planChunks({ ...base, duration: 600, renditions: [rung('a', 30000, 1001)] });
    assert.ok(plan);
    assert.ok(Math.abs(plan.segment - (179 * 1001) / 30000) < 1e-9);
    assert.equal(plan.segmentsPerChunk, 5);
    const w = plan.windows[3];
    assert.ok(w);
    assert.ok(Math.abs(w.startSecs - 15 * plan.segment) < 1e-9);
    assert.equal(w.firstSegment, 15);
    assert.equal(w.keepSecs, plan.chunkSecs);
    // The lead-in is a whole number of frames, about half a second.
    const leadFrames = (w.skipSecs * 30000) / 1001;
    assert.ok(Math.abs(leadFrames - Math.round(leadFrames)) < 1e-6 && w.skipSecs >= 0.5 && w.skipSecs < 0.6);
    assert.equal(plan.windows.at(-1)?.keepSecs, undefined, 'the last chunk runs to the end');
    assert.equal(plan.windows[0]?.seekSecs, 0);
  });

  it('joins a tail shorter than a segment to the chunk before it', () => {
    const plan = planChunks({ ...base, duration: 180.02, renditions: [rung('a', 30)] });
    assert.equal(plan?.windows.length, 6);
    assert.equal(planChunks({ ...base, duration: 186.5, renditions: [rung('a', 30)] })?.windows.length, 7);
  });

  it('does not split at or below the threshold, nor renditions with different segment lengths', () => {
    assert.equal(planChunks({ ...base, duration: 120, renditions: [rung('a', 30)] }), undefined);
    assert.equal(planChunks({ ...base, thresholdSecs: 0, duration: 600, renditions: [rung('a', 30)] }), undefined);
    assert.equal(
      planChunks({ ...base, duration: 600, renditions: [rung('a', 30), rung('b', 30000, 1001)] }),
      undefined,
    );
    // 30 and 60 fps share 6 s segments: one grid, a lead-in whole in both.
    const plan = planChunks({ ...base, duration: 600, renditions: [rung('a', 30), rung('b', 60)] });
    assert.ok(plan);
    assert.ok(Math.abs(((plan.windows[1]?.skipSecs ?? 0) * 30) % 1) < 1e-9);
  });
});

describe('planAudio', () => {
  // The single run's audio playlists cut at the first packet (counted from the priming one) at
  // or past n * hls_time, hls_time being the segment less an AAC frame (3.978667 s for 4 s):
  // 186.5 frames a segment, so segment 5 starts at packet 933, whose samples start at 932 * 1024.
  it('starts each piece where the single run cuts a segment, on a whole AAC frame', () => {
    const windows = planAudio({ duration: 60, segmentSecs: 4, pieceSecs: 20 });
    assert.deepEqual(
      windows.map((w) => w.startSample),
      [0, 932 * 1024, 1865 * 1024],
    );
    assert.deepEqual(
      windows.map((w) => w.keepSamples),
      [932 * 1024, 933 * 1024, undefined],
    );
    assert.deepEqual(
      windows.map((w) => w.firstSegment),
      [0, 5, 10],
    );
    // A later piece's encode starts whole frames before it, on a whole 1/25 s (1920 samples):
    // a 44.1 kHz source has a whole sample there too, so its resampled samples are the single run's.
    for (const w of windows.slice(1)) {
      assert.ok(w.prerollFrames >= AUDIO_PREROLL_FRAMES && w.prerollFrames < AUDIO_PREROLL_FRAMES + 15);
      assert.equal((w.startSample - w.prerollFrames * 1024) % 1920, 0);
    }
    assert.equal(windows[0]?.prerollFrames, 0);
  });

  it('rounds the length to whole segments, joins a short tail, and keeps a short input whole', () => {
    assert.equal(planAudio({ duration: 60, segmentSecs: 4, pieceSecs: 19 })[1]?.firstSegment, 5);
    // 39.77 s to 41 s is shorter than a segment: it joins the piece before.
    assert.equal(planAudio({ duration: 41, segmentSecs: 4, pieceSecs: 20 }).length, 2);
    assert.equal(planAudio({ duration: 44, segmentSecs: 4, pieceSecs: 20 }).length, 3);
    assert.deepEqual(planAudio({ duration: 10, segmentSecs: 4, pieceSecs: 20 }), [
      { startSample: 0, keepSamples: undefined, prerollFrames: 0, firstSegment: 0 },
    ]);
  });

  it('keeps the priming packet in the first piece and drops the pre-roll of the others', () => {
    const [first, second, last] = planAudio({ duration: 60, segmentSecs: 4, pieceSecs: 20 });
    assert.ok(first && second && last);
    // Packet k of a piece's encode decodes to its input's samples [(k - 1) * 1024, k * 1024).
    assert.deepEqual(keptPackets(first), { first: 0, count: 933 });
    assert.deepEqual(keptPackets(second), { first: second.prerollFrames + 1, count: 933 });
    assert.deepEqual(keptPackets(last), { first: last.prerollFrames + 1, count: undefined });
  });
});
