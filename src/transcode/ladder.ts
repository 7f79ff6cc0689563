import { UnsupportedMediaError } from '../lib/errors.ts';
import type { Encoder, OutputFolders } from './outputs/index.ts';
import { profileProblems, writtenBy } from './profile-rules.ts';
import { value, type ProbeResult, type Rational } from './probe.ts';
import type { ProfileSpec, Rendition } from './renditions.ts';

export type { Rendition } from './renditions.ts';

export interface LadderOptions {
  profiles?: readonly ProfileSpec[] | undefined;
  maxFps: number;
  /** The job's outputs: the profiles must meet the rules of each format written (profile-rules.ts). */
  outputs?: OutputFolders | undefined;
  /** An output with TS segments is written, whatever `outputs` says (the plan tests ask so). */
  tsSegments?: boolean;
}

const CODECS: Partial<Record<Encoder, Rendition['codec']>> = { 'H.264': 'h264', HEVC: 'hevc', AV1: 'av1', VP9: 'vp9' };

// spec/API.md "Default ladder": 360p0 (640x360, 1 Mbps) and 720p0 (1280x720, 4 Mbps) where
// they are below the source, plus one at the source's own resolution.
const DEFAULT_RUNGS = [
  { short: 360, bitrate: 1_000_000 },
  { short: 720, bitrate: 4_000_000 },
] as const;

/** Plans the renditions: the caller's profiles, or the default ladder; never upscaled. */
export function planLadder(probe: ProbeResult, opts: LadderOptions): Rendition[] {
  const cap = sourceVideoBitrate(probe);
  const planned = opts.profiles?.length
    ? opts.profiles.map((p) => fromProfile(p, probe, opts))
    : defaultLadder(probe, opts.maxFps);
  return planned.map((r) => ({ ...r, bitrate: cap ? Math.min(r.bitrate, cap) : r.bitrate }));
}

function defaultLadder(probe: ProbeResult, maxFps: number): Rendition[] {
  const { width, height } = probe.video;
  const short = Math.min(width, height);
  const fps = capFps(probe.video.fps, maxFps);
  const rungs = DEFAULT_RUNGS.filter((r) => r.short < short).map((r) => {
    const dims = fitShortSide(width, height, r.short);
    return base(`${r.short}p0`, dims, r.bitrate, fps);
  });
  const own = { width: even(width), height: even(height) };
  rungs.push(base(`${Math.min(own.width, own.height)}p0`, own, sourceRungBitrate(own.width * own.height), fps));
  // Issue #31: the per-title ladder (per-title/) tunes these under their bitrates as caps.
  return rungs.map((r) => ({ ...r, perTitle: 'ladder' as const }));
}

/**
 * The profile's encoder, or why it cannot be had. The API refuses these with a 422 before
 * queueing (api/validate-transcode.ts); checked again for tasks queued elsewhere.
 */
function codecOf(p: ProfileSpec, opts: LadderOptions): Rendition['codec'] {
  const outputs = writtenBy(opts.outputs ?? {});
  const problem = profileProblems(p, (f) => outputs(f) || (opts.tsSegments === true && f.segments === 'ts'))[0];
  if (problem) throw new UnsupportedMediaError(`profile ${p.name}: ${problem.failure}`);
  const codec = CODECS[p.encoder ?? 'H.264'];
  // profileProblems refuses an encoder no format takes: this is one a format takes but ffmpeg here does not.
  if (!codec) throw new UnsupportedMediaError(`profile ${p.name}: the ${p.encoder} encoder is not supported`);
  return codec;
}

function fromProfile(p: ProfileSpec, probe: ProbeResult, opts: LadderOptions): Rendition {
  const codec = codecOf(p, opts);
  const src = probe.video;
  // A landscape profile applied to a portrait video means the same size turned (phones).
  const turn = p.width > p.height !== src.width > src.height && p.width !== p.height && src.width !== src.height;
  const box = turn ? { width: p.height, height: p.width } : { width: p.width, height: p.height };
  const dims = fitInBox(src.width, src.height, box);
  const srcFps = value(src.fps);
  // fps may be fractional (29.97) with fpsDen 1, or 30000 with fpsDen 1001: both are num/den.
  const asked = p.fps ? { num: p.fps, den: p.fpsDen ?? 1 } : undefined;
  const fps = asked && value(asked) > 0 && value(asked) < srcFps ? asked : src.fps;
  const gopSecs = p.gop !== undefined ? Number(p.gop) : NaN;
  return {
    ...base(p.name, dims, p.bitrate, fps),
    codec,
    ...h264Profile(codec === 'h264' || codec === 'hevc' ? p.profile : undefined),
    // "intra" is Livepeer's every-frame-a-keyframe GOP (go-livepeer's GOPIntraOnly).
    gopFrames:
      p.gop === 'intra'
        ? 1
        : Number.isFinite(gopSecs) && gopSecs > 0
          ? Math.max(codec === 'av1' ? 2 : 1, Math.round(gopSecs * value(fps)))
          : undefined,
    crf: p.quality,
    // A profile keeps its bitrate unless it opts in to the per-title choice (issue #31).
    ...(p.perTitle ? { perTitle: 'profile' as const } : {}),
  };
}

/** The x264 profile asked; its B-frame rule also holds for HEVC. AV1 and VP9 take neither. */
function h264Profile(p: ProfileSpec['profile']): Pick<Rendition, 'profile' | 'noBFrames'> {
  return {
    profile: p === 'H264Baseline' ? 'baseline' : p === 'H264Main' ? 'main' : p ? 'high' : undefined,
    noBFrames: p === 'H264ConstrainedHigh' || p === 'H264Baseline',
  };
}

function base(name: string, dims: { width: number; height: number }, bitrate: number, fps: Rational): Rendition {
  return {
    name,
    ...dims,
    bitrate,
    fps,
    codec: 'h264',
    profile: 'high',
    noBFrames: false,
    gopFrames: undefined,
    crf: undefined,
  };
}

/** Scales so the shorter side is `short`, aspect kept, both sides even. */
function fitShortSide(w: number, h: number, short: number): { width: number; height: number } {
  const k = short / Math.min(w, h);
  return { width: even(w * k), height: even(h * k) };
}

/** The largest size inside `box` with the source's aspect, never above the source. */
function fitInBox(w: number, h: number, box: { width: number; height: number }): { width: number; height: number } {
  const k = Math.min(box.width / w, box.height / h, 1);
  return { width: even(w * k), height: even(h * k) };
}

/** 4:2:0 chroma needs even sides; 161x121 becomes 160x120 (rounded down never upscales). */
function even(x: number): number {
  return Math.max(2, Math.floor(x / 2) * 2);
}

function capFps(fps: Rational, maxFps: number): Rational {
  return value(fps) <= maxFps + 0.01 ? fps : { num: Math.round(maxFps * 1000), den: 1000 };
}

/** About 4 Mbps at 720p, growing less than linearly with the pixel count (7.4 Mbps at 1080p). */
function sourceRungBitrate(pixels: number): number {
  return Math.round((4_000_000 * (pixels / (1280 * 720)) ** 0.75) / 1000) * 1000;
}

/** What the source's video carries: its stream bitrate, or the file's less the audio. */
export function sourceVideoBitrate(probe: ProbeResult): number | undefined {
  if (probe.video.bitrate) return probe.video.bitrate;
  if (probe.bitrate) return Math.max(probe.bitrate - (probe.audio?.bitrate ?? 0), 100_000);
  return undefined;
}
