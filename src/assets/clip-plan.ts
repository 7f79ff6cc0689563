import { UnsupportedMediaError } from '../lib/errors.ts';

// How a clip is cut from its source's frames (issue #28): which frames it holds, and which runs
// of them can be copied as they are and which must be encoded again. Pure: clip-cut.ts lists
// the frames with ffprobe and runs ffmpeg on the plan.

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
  /** Seconds it covers: to the next part's first frame, or past its own last frame. */
  duration: number;
}

export interface ClipPlan {
  parts: ClipPart[];
  /** The clip's first frame's time in the source (audio is cut from here). */
  start: number;
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

function part(frames: SourceFrame[], how: ClipPart['how'], first: number, end: number): ClipPart {
  const at = frames[first]?.t ?? 0;
  const before = first > 0 ? interval(frames, first - 1) : 0;
  return {
    how,
    seek: how === 'copy' ? at + EPSILON / 2 : Math.max(0, at - before / 2),
    from: at,
    frames: end - first,
    duration: endOf(frames, end) - at,
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
 * The clip of [start, end) seconds, cut at the frame boundaries nearest `start` and `end`: each
 * end within half a frame of the time asked, so the clip's length is within one frame of
 * end - start (a frame that starts exactly at `start` is the first; one that starts exactly at
 * `end` is left out). With `copyable` (a codec the encoder can continue, clip-cut.ts), the
 * whole GOPs inside the range are copied and only the frames before the first keyframe (and
 * after the last whole GOP) are encoded: a smart cut. Without, or when no whole GOP is inside,
 * every frame is encoded. `frames` must reach past `end` unless the file ends there: a GOP that
 * ends with the file counts as whole.
 */
export function planClip(frames: SourceFrame[], range: { start: number; end: number }, copyable: boolean): ClipPlan {
  const a = nearestBoundary(frames, range.start);
  const b = nearestBoundary(frames, range.end);
  if (b <= a) throw new UnsupportedMediaError('the clip holds no frame of the source: its range is too short');
  const keys: number[] = [];
  for (let i = a; i < b; i++) if (frames[i]?.key) keys.push(i);
  const parts = copyable ? smartParts(frames, keys, a, b) : [];
  const plan = parts.length > 0 ? parts : [part(frames, 'encode', a, b)];
  return {
    parts: plan,
    start: frames[a]?.t ?? 0,
    duration: endOf(frames, b) - (frames[a]?.t ?? 0),
    frames: b - a,
  };
}

/** Encode up to the first keyframe, copy the whole GOPs, encode what is left; none when nothing can be copied. */
function smartParts(frames: SourceFrame[], keys: number[], a: number, b: number): ClipPart[] {
  const first = keys[0];
  const last = keys.at(-1);
  if (first === undefined || last === undefined) return [];
  // The last GOP is whole when the frame after the clip starts a new one, or the file ends.
  const copyEnd = b === frames.length || frames[b]?.key ? b : last;
  if (copyEnd <= first) return [];
  const parts: ClipPart[] = [];
  if (first > a) parts.push(part(frames, 'encode', a, first));
  parts.push(part(frames, 'copy', first, copyEnd));
  if (b > copyEnd) parts.push(part(frames, 'encode', copyEnd, b));
  return parts;
}
