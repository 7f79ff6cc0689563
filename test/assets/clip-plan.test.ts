import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { framesOf } from '../../src/assets/clip-cut.ts';
import { planClip, type SourceFrame } from '../../src/assets/clip-plan.ts';
import { UnsupportedMediaError } from '../../src/lib/errors.ts';

// How a clip's frames are chosen and split into encoded and copied parts (issue #28): the
// boundaries nearest the asked times, whole GOPs copied, the rest encoded.

/** `seconds` of frames at `fps` with a keyframe every `gop` frames, times rounded as a container would (µs). */
function frames(o: { fps: number; seconds: number; gop: number; offset?: number }): SourceFrame[] {
  return Array.from({ length: Math.round(o.fps * o.seconds) }, (_, i) => ({
    t: Math.round(((o.offset ?? 0) + i / o.fps) * 1e6) / 1e6,
    key: i % o.gop === 0,
  }));
}

const summary = (p: ReturnType<typeof planClip>) => p.parts.map((x) => `${x.how}:${x.frames}`).join(' ');

describe('planClip', () => {
  const src = frames({ fps: 30, seconds: 6, gop: 30 });

  it('encodes up to the first keyframe, copies the whole GOPs, encodes the rest', () => {
    const plan = planClip(src, { start: 1.3, end: 3.7 }, true);
    assert.equal(summary(plan), 'encode:21 copy:30 encode:21');
    assert.equal(plan.frames, 72);
    assert.equal(plan.start, 1.3);
    assert.ok(Math.abs(plan.duration - 2.4) < 1e-6);
    const [head, copy, tail] = plan.parts;
    // An encoded part seeks half a frame early; a copied one just after its keyframe.
    assert.ok(head && copy && tail);
    assert.ok(Math.abs(head.seek - (1.3 - 1 / 60)) < 1e-6, `${head.seek}`);
    assert.ok(copy.seek > 2 && copy.seek < 2 + 1 / 60, `${copy.seek}`);
    assert.ok(Math.abs(copy.duration - 1) < 1e-6);
  });

  it('copies the last GOP when the clip ends where the next one starts, or with the file', () => {
    assert.equal(summary(planClip(src, { start: 1.3, end: 4 }, true)), 'encode:21 copy:60');
    assert.equal(summary(planClip(src, { start: 2, end: 6 }, true)), 'copy:120');
    assert.equal(summary(planClip(src, { start: 2, end: 60 }, true)), 'copy:120', 'an end past the file stops with it');
  });

  it('encodes the whole range when no GOP is whole inside it, or the codec cannot be continued', () => {
    assert.equal(summary(planClip(src, { start: 1.3, end: 2.9 }, true)), 'encode:48');
    assert.equal(summary(planClip(src, { start: 1.3, end: 3.7 }, false)), 'encode:72');
  });

  it('cuts at the frame boundaries nearest the times asked: within half a frame at each end', () => {
    // Frames 7 ms late (a WebM whose audio starts first): 1.3 s is nearer frame 39 (1.307).
    const late = frames({ fps: 30, seconds: 6, gop: 30, offset: 0.007 });
    const plan = planClip(late, { start: 1.3, end: 3.7 }, false);
    assert.equal(plan.start, 1.307);
    assert.equal(plan.frames, 72);
    // 1.32 s is nearer 1.333 than 1.3; 1.31 nearer 1.3.
    assert.ok(Math.abs(planClip(src, { start: 1.32, end: 2 }, false).start - 40 / 30) < 1e-6);
    assert.equal(planClip(src, { start: 1.31, end: 2 }, false).start, 1.3);
  });

  it('follows variable frame times', () => {
    const vfr: SourceFrame[] = [0, 0.03, 0.1, 0.5, 0.52, 0.9, 1.0, 1.4].map((t, i) => ({
      t,
      key: i === 0 || i === 5 || i === 7,
    }));
    const plan = planClip(vfr, { start: 0.1, end: 1.4 }, true);
    assert.equal(summary(plan), 'encode:3 copy:2');
    assert.ok(Math.abs(plan.duration - 1.3) < 1e-9);
  });

  it('cuts inside a frame held across an end for much longer than a typical frame: exact, the first one encoded', () => {
    // Frames 0.1 s apart, but one shown from 0.7 s to 1.1 s and one from 2.8 s to 3.4 s.
    const times = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0];
    const held = [...times, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8, 3.4, 3.5].map((t, i) => ({ t, key: i % 5 === 0 }));
    const plan = planClip(held, { start: 1, end: 3 }, true);
    assert.equal(plan.start, 1, 'the frame on screen at 1.0 s shows from 1.0 s');
    assert.equal(plan.firstFrame, 0.7);
    assert.equal(plan.lastFrame, 2.8);
    assert.ok(Math.abs(plan.duration - 2) < 1e-9, `${plan.duration}`);
    assert.equal(plan.frames, 19);
    const [head] = plan.parts;
    assert.equal(head?.how, 'encode', 'a frame cut short is never copied');
    assert.ok(Math.abs((head?.trim ?? 0) - 0.3) < 1e-9 && Math.abs((head?.duration ?? 0) - 0.3) < 1e-9);
    assert.equal(summary(plan), 'encode:3 copy:15 encode:1');
    // Near a boundary (within half a frame at 24 fps) the cut still moves to it.
    const near = planClip(held, { start: 1.11, end: 2.79 }, false);
    assert.equal(near.start, 1.1);
    assert.ok(Math.abs(near.duration - 1.7) < 1e-9, `${near.duration}`);
  });

  it('refuses a range that holds no frame', () => {
    assert.throws(() => planClip(src, { start: 1.3, end: 1.31 }, true), UnsupportedMediaError);
  });
});

describe('framesOf', () => {
  it("reads ffprobe's packets and decoded frames, in presentation order, from the file's start", () => {
    const packets =
      'pts_time=0.100000|flags=K_\npts_time=0.166667|flags=__\npts_time=0.133333|flags=__\npts_time=N/A|flags=__\npts_time=0.05|flags=_D\n';
    assert.deepEqual(framesOf(packets, 0.1), [
      { t: 0, key: true },
      { t: 0.033333, key: false },
      { t: 0.066667, key: false },
    ]);
    const decoded =
      'key_frame=1|best_effort_timestamp_time=0.000000\nkey_frame=0|best_effort_timestamp_time=0.042000\n';
    assert.deepEqual(framesOf(decoded, 0), [
      { t: 0, key: true },
      { t: 0.042, key: false },
    ]);
  });
});
