import { UnsupportedMediaError } from '../lib/errors.ts';

// How a clip is cut from its source's frames (issue #28): which frames it holds, and which runs
// of them can be copied as they are and which must be encoded again. Pure: clip-cut.ts lists
// the frames with ffprobe and runs ffmpeg on the plan.
//
// Each end of the range moves to the frame boundary nearest it when one is within half a
// typical frame (a constant-rate source's of 24 fps or more always is: its clip holds whole
// frames; snapDistance). A variable-rate source (a screen capture, a browser recording) may
// hold one picture across the time asked for much longer than that: that frame is kept and
// cut to the range instead, so the clip starts with the picture on screen at its start, its
// last frame shows up to its end, and it lasts as long as asked.

/** One video frame of the source, in presentation order. */
export interface SourceFrame {
  /** Seconds from the start of the file (what ffmpeg's `-ss` counts from). */
  t: number;
  key: boolean;
}

/** A run of frames made one way: encoded again (from a decoder), or its packets copied. */
export interface ClipPart {
  how: 'encode' | 'copy';
  /**
   * Where ffmpeg seeks to (`-ss`). An encoded part: half a frame before its first frame (ffmpeg
   * decodes from the keyframe before and drops what shows earlier). A copied part: just after
   * its keyframe (ffmpeg copies from the keyframe at or before the seek, dropping nothing).
   */
  seek: number;
  /** Its first frame's time. */
  from: number;
  frames: number;
  /** Seconds it covers: to the next part's first frame, or to the clip's end. */
  duration: number;
  /**
   * Seconds its first frame shows for less than in the source: the frame on screen at the
   * clip's start, shown from there (0 for a frame that starts where the part does).
   */
  trim: number;
}

export interface ClipPlan {
  parts: ClipPart[];
  /** Where the clip starts in the source (audio is cut from here): its first frame's time, or where it is cut. */
  start: number;
  /** Its first frame's time in the source (before `start` when that frame is cut). */
  firstFrame: number;
  /** Its last frame's time in the source. */
  lastFrame: number;
  /** Seconds, up to where its last frame stops showing. */
  duration: number;
  frames: number;
}

/**
 * Times within a millisecond count as the same: container time bases round frame times (a
 * Matroska file keeps milliseconds), and a range given in milliseconds must find the frame it names.
 */
const EPSILON = 0.001;

/** Seconds the frame at `i` shows for: to the next frame, or as long as the one before it. */
function interval(frames: SourceFrame[], i: number): number {
  const at = frames[i];
  const next = frames[i + 1];
  const prev = frames[i - 1];
  if (at && next) return next.t - at.t;
  if (at && prev) return at.t - prev.t;
  return 1 / 30;
}

/** The boundary before frame `end`: its time, or (`end` past the last frame) where the last frame stops showing. */
function endOf(frames: SourceFrame[], end: number): number {
  const next = frames[end];
  if (next) return next.t;
  const last = frames[end - 1];
  return last ? last.t + interval(frames, end - 1) : 0;
}

/** Where a part's frames show: from its first frame's time or the clip's start, to the next frame or the clip's end. */
interface Shown {
  from: number;
  to: number;
}

function part(
  frames: SourceFrame[],
  how: ClipPart['how'],
  run: { first: number; end: number },
  shown: Shown,
): ClipPart {
  const at = frames[run.first]?.t ?? 0;
  const before = run.first > 0 ? interval(frames, run.first - 1) : 0;
  return {
    how,
    seek: how === 'copy' ? at + EPSILON / 2 : Math.max(0, at - before / 2),
    from: at,
    frames: run.end - run.first,
    duration: shown.to - shown.from,
    trim: Math.max(0, shown.from - at),
  };
}

/**
 * The frame boundary (a frame's start, or the end of the last frame) nearest `x`: its index,
 * `frames.length` for the end. Within EPSILON of each other, the earlier wins.
 */
function nearestBoundary(frames: SourceFrame[], x: number): number {
  let best = 0;
  for (let i = 1; i <= frames.length; i++)
    if (Math.abs(endOf(frames, i) - x) < Math.abs(endOf(frames, best) - x) - EPSILON) best = i;
  return best;
}

/**
 * How far a cut may move to a frame boundary: half a typical frame (the median interval), and
 * never more than half a frame at 24 fps. Every constant-rate video of 24 fps or more is cut
 * at whole frames; a sparse screen capture (a frame a second while nothing moves) is not
 * moved by half a second.
 */
function snapDistance(frames: SourceFrame[]): number {
  const gaps = frames.slice(1).map((f, i) => f.t - (frames[i]?.t ?? 0));
  gaps.sort((x, y) => x - y);
  return Math.min(gaps[Math.floor(gaps.length / 2)] ?? 1 / 30, 1 / 24) / 2 + EPSILON;
}

/** The last frame that starts at or before `x` (on screen at `x`); -1 when none does. */
function onScreen(frames: SourceFrame[], x: number): number {
  let at = -1;
  for (const [i, f] of frames.entries()) if (f.t <= x + EPSILON) at = i;
  return at;
}

/** A cut of the range: the boundary index it falls at or in, and its time in the source. */
interface Cut {
  index: number;
  at: number;
}

/**
 * Where the range's end `x` cuts: the nearest frame boundary within `snap` (or the file's
 * end); else inside the frame on screen at `x`, which then stops showing at `x`.
 */
function endCut(frames: SourceFrame[], x: number, snap: number): Cut {
  const near = nearestBoundary(frames, x);
  const fileEnd = endOf(frames, frames.length);
  if (Math.abs(endOf(frames, near) - x) <= snap || x >= fileEnd || onScreen(frames, x) < 0)
    return { index: near, at: endOf(frames, near) };
  return { index: onScreen(frames, x) + 1, at: x };
}

/**
 * Where the range's start `x` cuts: the nearest frame boundary within `snap`; else at the
 * frame on screen at `x`, which then shows from `x`.
 */
function startCut(frames: SourceFrame[], x: number, snap: number): Cut {
  const near = nearestBoundary(frames, x);
  const on = onScreen(frames, x);
  if (Math.abs(endOf(frames, near) - x) <= snap || on < 0) return { index: near, at: endOf(frames, near) };
  return { index: on, at: x };
}

/**
 * The clip of [start, end) seconds: each end at the nearest frame boundary within half a
 * typical frame, so the clip's length is within one frame of end - start (a frame that starts
 * exactly at `start` is the first; one that starts exactly at `end` is left out), or cut inside
 * a frame held longer (see above), so it is exact. With `copyable` (a codec the encoder can
 * continue, clip-cut.ts), the whole GOPs inside the range are copied and only the frames
 * before the first keyframe (and after the last whole GOP) are encoded: a smart cut. A first
 * frame cut at the start is always encoded. Without, or when no whole GOP is inside, every
 * frame is encoded. `frames` must reach past `end` unless the file ends there: a GOP that ends
 * with the file counts as whole.
 */
export function planClip(frames: SourceFrame[], range: { start: number; end: number }, copyable: boolean): ClipPlan {
  const snap = snapDistance(frames);
  const from = startCut(frames, range.start, snap);
  const to = endCut(frames, range.end, snap);
  const [a, b] = [from.index, to.index];
  if (b <= a) throw new UnsupportedMediaError('the clip holds no frame of the source: its range is too short');
  const shown = { from: from.at, to: to.at };
  const firstFrame = frames[a]?.t ?? 0;
  // A first frame cut short starts an encoded part: a copied GOP keeps its frames' times.
  const keys: number[] = [];
  for (let i = firstFrame < from.at ? a + 1 : a; i < b; i++) if (frames[i]?.key) keys.push(i);
  const parts = copyable ? smartParts(frames, keys, { a, b }, shown) : [];
  const plan = parts.length > 0 ? parts : [part(frames, 'encode', { first: a, end: b }, shown)];
  const lastFrame = frames[b - 1]?.t ?? firstFrame;
  return { parts: plan, start: from.at, firstFrame, lastFrame, duration: to.at - from.at, frames: b - a };
}

/** Encode up to the first keyframe, copy the whole GOPs, encode what is left; none when nothing can be copied. */
function smartParts(frames: SourceFrame[], keys: number[], clip: { a: number; b: number }, shown: Shown): ClipPart[] {
  const { a, b } = clip;
  const first = keys[0];
  const last = keys.at(-1);
  if (first === undefined || last === undefined) return [];
  // The last GOP is whole when the frame after the clip starts a new one, or the file ends.
  const copyEnd = b === frames.length || frames[b]?.key ? b : last;
  if (copyEnd <= first) return [];
  // Each part shows from its first frame (the first part: from the clip's start) to the next part's.
  const run = (how: ClipPart['how'], i: number, end: number) =>
    part(
      frames,
      how,
      { first: i, end },
      { from: i === a ? shown.from : endOf(frames, i), to: end === b ? shown.to : endOf(frames, end) },
    );
  const parts: ClipPart[] = [];
  if (first > a) parts.push(run('encode', a, first));
  parts.push(run('copy', first, copyEnd));
  if (b > copyEnd) parts.push(run('encode', copyEnd, b));
  return parts;
}
