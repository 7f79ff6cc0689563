import type { PieceSpec } from '../../tasks/index.ts';
import { segmentTiming } from '../encoders.ts';
import type { ChunkWindow } from '../outputs/index.ts';
import { hasVideo, type MediaInfo } from '../probe.ts';
import type { Rendition } from '../renditions.ts';
import { PIECE_TYPES, type ChunkJob, type PieceJob, type StitchJob } from './types.ts';

// Issue #30: whether a task is split, and into which pieces. Chunks cover whole segments:
// chunk i is [i*L, (i+1)*L) with L a whole number of segments, a segment being a whole
// number of frames of every rendition (encoders.ts segmentTiming), so every chunk starts on
// a segment cut of the single run and its frames are that run's frames.

export interface ChunkPlan {
  /** Seconds per segment, the same for every rendition. */
  segment: number;
  segmentsPerChunk: number;
  /** Seconds per chunk (L). */
  chunkSecs: number;
  windows: ChunkWindow[];
}

/** Decoded before a chunk and dropped: about this long, so the frame-rate filter settles on the whole run's grid. */
const LEAD_IN_SECS = 0.5;

/**
 * The chunks of a video of `duration`, or undefined when it is not split: too short (at
 * most `thresholdSecs`, or one chunk), or renditions whose segments differ in length (their
 * frame rates give different whole-frame segments: one cut grid cannot serve them all).
 */
export function planChunks(o: {
  duration: number;
  renditions: readonly Rendition[];
  segmentSecs: number;
  chunkSecs: number;
  thresholdSecs: number;
}): ChunkPlan | undefined {
  if (o.thresholdSecs <= 0 || !(o.duration > o.thresholdSecs) || o.renditions.length === 0) return undefined;
  const timings = o.renditions.map((r) => segmentTiming(o.segmentSecs, r));
  const segment = timings[0]?.segment ?? 0;
  if (!(segment > 0) || timings.some((t) => Math.abs(t.segment - segment) > 1e-9)) return undefined;
  const perChunk = Math.max(1, Math.round(o.chunkSecs / segment));
  const length = perChunk * segment;
  // A tail shorter than a segment (the container's duration is often the audio's, a few
  // frames past the video's) joins the chunk before it: a chunk of no frames writes nothing.
  const whole = Math.ceil(o.duration / length - 1e-6);
  const count = o.duration - (whole - 1) * length < segment ? whole - 1 : whole;
  if (count < 2) return undefined;
  // The lead-in is a whole number of frames of every rendition: a multiple of the segment's
  // largest common frame step (1 frame when all share a rate).
  const step = segment / timings.reduce((g, t) => gcd(g, t.frames), 0);
  const lead = Math.min(Math.ceil(LEAD_IN_SECS / step - 1e-9) * step, length);
  const windows = Array.from({ length: count }, (_, i): ChunkWindow => {
    const start = i * length;
    const skip = i === 0 ? 0 : lead;
    return {
      seekSecs: start - skip,
      skipSecs: skip,
      keepSecs: i === count - 1 ? undefined : length,
      startSecs: start,
      firstSegment: i * perChunk,
    };
  });
  return { segment, segmentsPerChunk: perChunk, chunkSecs: length, windows };
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** Whether a probed input may be split at all: a video, with a known duration, and no subtitle tracks (left to a single run). */
export function splittable(media: MediaInfo): boolean {
  return hasVideo(media) && media.duration > 0 && media.subtitles.length === 0;
}

/**
 * The pieces, in the order they are queued: the audio first (it runs beside the first
 * chunks and is short), the chunks, and the stitch, which runs once every other piece is
 * done. Weights are shares of the parent's progress: encoding time, roughly.
 */
export function pieceSpecs(job: PieceJob, plan: ChunkPlan, o: { inputSize: number }): PieceSpec[] {
  const pieces: PieceSpec[] = [];
  const hasAudio = job.media.audioTracks.length > 0;
  const count = plan.windows.length;
  const audioWeight = hasAudio ? 0.04 : 0;
  const stitchWeight = 0.04;
  const chunkWeight = (1 - audioWeight - stitchWeight) / count;
  if (hasAudio) pieces.push({ type: PIECE_TYPES.audio, params: { ...job }, label: 'audio', weight: audioWeight });
  for (const [index, window] of plan.windows.entries()) {
    const end = window.keepSecs === undefined ? job.duration : window.startSecs + window.keepSecs;
    const params: ChunkJob = { ...job, chunk: { index, count, window } };
    pieces.push({
      type: PIECE_TYPES.chunk,
      params,
      label: `video ${window.startSecs.toFixed(1)}-${end.toFixed(1)} s (chunk ${index + 1} of ${count})`,
      weight: chunkWeight,
    });
  }
  const stitch: StitchJob = { ...job, chunks: count, chunkSecs: plan.chunkSecs, inputSize: o.inputSize };
  pieces.push({ type: PIECE_TYPES.stitch, params: stitch, label: 'stitch', weight: stitchWeight, last: true });
  return pieces;
}
