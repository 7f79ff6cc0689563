import type { PieceSpec } from '../../tasks/index.ts';
import { segmentTiming } from '../encoders.ts';
import { AAC_FRAME_SAMPLES, AUDIO_RATE, type AudioWindow, type ChunkWindow } from '../outputs/index.ts';
import { hasVideo, type MediaInfo } from '../probe.ts';
import type { Rendition } from '../renditions.ts';
import { PIECE_TYPES, type AudioJob, type ChunkJob, type PieceJob, type StitchJob } from './types.ts';

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

/** Whole AAC frames an audio piece encodes before its first kept sample: the encoder's state settles there. */
export const AUDIO_PREROLL_FRAMES = 8;

/**
 * The audio pieces of an input of `duration`. A single run's audio playlists cut at the first
 * packet at or past each multiple of `hls_time` (the segment less an AAC frame: command.ts)
 * from their first packet, the priming one, so their segments drift from the video's by up
 * to half a frame each; an audio piece starts where such a cut falls, after a whole number
 * of segments (`pieceSecs` rounded to whole segments): piece i keeps the samples
 * [b_i, b_(i+1)), every bound a whole AAC frame, and holds exactly the single run's
 * segments of its span. A tail shorter than a segment joins the piece before it.
 */
export function planAudio(o: { duration: number; segmentSecs: number; pieceSecs: number }): AudioWindow[] {
  const perPiece = Math.max(1, Math.round(o.pieceSecs / o.segmentSecs));
  // hls_time as ffmpeg reads it (microseconds, command.ts writes 6 decimals), in AAC frames per segment.
  const hlsTimeUs = Math.round(Number((o.segmentSecs - AAC_FRAME_SAMPLES / AUDIO_RATE).toFixed(6)) * 1e6);
  const frameUs = (AAC_FRAME_SAMPLES * 1e6) / AUDIO_RATE;
  // The packet (counted from the priming one) that starts segment n: the first at or past n * hls_time.
  const cutPacket = (n: number): number => Math.ceil((n * hlsTimeUs) / frameUs - 1e-9);
  const bound = (i: number): number => (i === 0 ? 0 : (cutPacket(i * perPiece) - 1) * AAC_FRAME_SAMPLES);
  const total = o.duration * AUDIO_RATE;
  let count = 1;
  while (bound(count) < total && total - bound(count) >= (hlsTimeUs / 1e6) * AUDIO_RATE) count++;
  return Array.from({ length: count }, (_, i) => ({
    startSample: bound(i),
    keepSamples: i === count - 1 ? undefined : bound(i + 1) - bound(i),
    prerollFrames: i === 0 ? 0 : prerollFrames(bound(i)),
    firstSegment: i * perPiece,
  }));
}

/** Seconds on which every common source rate (8 to 96 kHz, 11.025 to 88.2 kHz) has a whole sample. */
const SOURCE_GRID_SAMPLES = AUDIO_RATE / 25;

/**
 * The pre-roll of a piece starting at `start`: at least AUDIO_PREROLL_FRAMES whole frames, and
 * as many more as put the encode's first sample on a whole 1/25 s, where a source of another
 * rate has a whole sample too: its decode is then cut there exactly, and the resampler puts the
 * piece's samples on the single run's grid (a start between two source samples would shift
 * them by a fraction of a sample). `start` is a multiple of 128 samples, so one of 15 fits.
 */
function prerollFrames(start: number): number {
  for (let m = AUDIO_PREROLL_FRAMES; m < AUDIO_PREROLL_FRAMES + 15; m++)
    if ((start - m * AAC_FRAME_SAMPLES) % SOURCE_GRID_SAMPLES === 0 && start - m * AAC_FRAME_SAMPLES >= 0) return m;
  return AUDIO_PREROLL_FRAMES;
}

/** Whether a probed input may be split at all: a video, with a known duration, and no subtitle tracks (left to a single run). */
export function splittable(media: MediaInfo): boolean {
  return hasVideo(media) && media.duration > 0 && media.subtitles.length === 0;
}

/**
 * The pieces, in the order they are queued: the audio pieces interleaved with the chunks
 * (audio 1, chunk 1, audio 2, chunk 2, ...) so the first of each end early and the early
 * playlists start, and the stitch, which runs once every other piece is done. Weights are
 * shares of the parent's progress: encoding time, roughly.
 */
export function pieceSpecs(
  job: PieceJob,
  plan: ChunkPlan,
  o: { inputSize: number; audio: readonly AudioWindow[] },
): PieceSpec[] {
  const audio = job.media.audioTracks.length > 0 ? audioSpecs(job, o.audio, 0.04) : [];
  const stitchWeight = 0.04;
  const count = plan.windows.length;
  const chunkWeight = (1 - (audio.length > 0 ? 0.04 : 0) - stitchWeight) / count;
  const chunks = plan.windows.map((window, index): PieceSpec => {
    const end = window.keepSecs === undefined ? job.duration : window.startSecs + window.keepSecs;
    const params: ChunkJob = { ...job, chunk: { index, count, window } };
    return {
      type: PIECE_TYPES.chunk,
      params,
      label: `video ${window.startSecs.toFixed(1)}-${end.toFixed(1)} s (chunk ${index + 1} of ${count})`,
      weight: chunkWeight,
    };
  });
  const pieces: PieceSpec[] = [];
  for (let i = 0; i < Math.max(audio.length, chunks.length); i++) pieces.push(...[audio[i], chunks[i]].filter(isSpec));
  const stitch: StitchJob = {
    ...job,
    chunks: count,
    chunkSecs: plan.chunkSecs,
    inputSize: o.inputSize,
    audioPieces: audio.length,
  };
  pieces.push({ type: PIECE_TYPES.stitch, params: stitch, label: 'stitch', weight: stitchWeight, last: true });
  return pieces;
}

/** The audio pieces' specs, `weight` shared among them. */
function audioSpecs(job: PieceJob, windows: readonly AudioWindow[], weight: number): PieceSpec[] {
  const count = windows.length;
  return windows.map((window, index): PieceSpec => {
    const start = window.startSample / AUDIO_RATE;
    const end = window.keepSamples === undefined ? job.duration : start + window.keepSamples / AUDIO_RATE;
    const params: AudioJob = { ...job, audio: { index, count, window } };
    return {
      type: PIECE_TYPES.audio,
      params,
      label: `audio ${start.toFixed(1)}-${end.toFixed(1)} s (piece ${index + 1} of ${count})`,
      weight: weight / count,
    };
  });
}

function isSpec(s: PieceSpec | undefined): s is PieceSpec {
  return s !== undefined;
}
