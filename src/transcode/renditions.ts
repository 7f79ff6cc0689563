import type { Rational } from './probe.ts';

// A rendition as the caller asks for it, as the ladder plans it and as it lands in storage.
// A leaf module (issue #26): the output formats (outputs/) and the ladder both use these
// words, and neither may import the other's module for them.

/** One rendition asked for by the caller; without any, ladder.ts plans one from the source. */
export interface ProfileSpec {
  name: string;
  width: number;
  height: number;
  /** Bits per second. */
  bitrate: number;
  fps?: number;
  fpsDen?: number;
  /** Keyframe interval in seconds as a decimal string, or "intra" (every frame a keyframe). */
  gop?: string;
  profile?: 'H264Baseline' | 'H264Main' | 'H264High' | 'H264ConstrainedHigh';
  encoder?: 'H.264' | 'HEVC' | 'AV1' | 'VP8' | 'VP9';
  /** CRF, 0 to 51. */
  quality?: number;
  /**
   * Issue #31: let the per-title ladder choose this rung's rate, with `bitrate` as its cap
   * (capped CRF). Off by default: a profile keeps its bitrate.
   */
  perTitle?: boolean;
}

/** One output rendition as ffmpeg will encode it. */
export interface Rendition {
  name: string;
  width: number;
  height: number;
  /** Video bits per second (the audio's 128 kb/s comes on top). */
  bitrate: number;
  fps: Rational;
  codec: 'h264' | 'hevc' | 'av1' | 'vp9';
  /** x264 profile; ConstrainedHigh is High without B-frames. */
  profile: 'baseline' | 'main' | 'high' | undefined;
  noBFrames: boolean;
  /** Keyframe interval in frames asked by the profile's `gop` (seconds); never above the segment. */
  gopFrames: number | undefined;
  crf: number | undefined;
  /**
   * Issue #31: the per-title ladder may choose this rung's rate under `bitrate`: a rung of the
   * default ladder (`ladder`: dropped when it adds nothing) or a profile that opted in
   * (`profile`: always kept). Absent: ABR at `bitrate`.
   */
  perTitle?: 'ladder' | 'profile' | undefined;
  /** What the per-title ladder chose: capped CRF at `choice.crf` under the cap `bitrate`, or ABR at the cap. */
  choice?: PerTitleChoice | undefined;
  /** The largest keyframe the analysis predicts at this size, in bits (the VBV buffer holds one). */
  keyframeBits?: number | undefined;
}

/** The per-title ladder's choice for one rung (plain JSON: chunk pieces keep renditions in their params). */
export interface PerTitleChoice {
  /** The constant rate factor (x264's 0-51 scale) of the capped CRF encode; absent when the rung hits its cap. */
  crf?: number;
  /** The analysis' prediction of the rung's average video bitrate, at most its cap. */
  predictedBitrate: number;
  /**
   * The most the rung may spend a second (its peak): the fixed ladder's or the profile's
   * bitrate, lowered to the source's, but never below what refills one keyframe a segment.
   */
  cap: number;
  /**
   * At the target CRF the title would spend about its cap or more (a hard title): the rung is
   * ABR at its cap, as the fixed ladder encodes it, quality below the target.
   */
  hitsCap: boolean;
  /** SSIM (luma) of the analysis' probe encode at this CRF: the quality aimed at, when not capped. */
  predictedSsim?: number;
}

/** One rendition as it landed in storage (extra fields the spec allows). */
export interface RenditionOutput {
  name: string;
  path: string;
  width: number;
  height: number;
  /** The video bitrate chosen: the planned one, or for a per-title rung its predicted average. */
  bitrate: number;
  size: number;
  signed?: boolean;
  /** Issue #31: how the per-title ladder encoded this rung, and why (absent: ABR at `bitrate`). */
  perTitle?: PerTitleChoice;
}

/** An audio-only file or rendition: an audio-only input's `audio.m4a`, an alternate audio track. */
export interface AudioOutput {
  name: string;
  path: string;
  bitrate: number;
  size: number;
  language?: string;
  default?: boolean;
  signed?: boolean;
}

/** A subtitle track as a rendition of an HLS tree: its media playlist and its WebVTT file. */
export interface SubtitleOutput {
  path: string;
  file: string;
  language?: string;
  default: boolean;
}

/** One HLS tree (TS or fMP4 segments): its master playlist and what the master lists. */
export interface HlsOutput {
  path: string;
  renditions?: RenditionOutput[];
  audio?: AudioOutput[];
  subtitles?: SubtitleOutput[];
}

export function renditionOutput(r: Rendition, key: string, size: number): RenditionOutput {
  const base = { name: r.name, path: key, width: r.width, height: r.height };
  if (!r.choice) return { ...base, bitrate: r.bitrate, size };
  return { ...base, bitrate: r.choice.predictedBitrate, size, perTitle: r.choice };
}

/**
 * How a rung spends its bits, for log lines: its bitrate (ABR, the fixed ladder), a capped CRF
 * with the predicted bitrate, or its cap (a per-title rung too hard for the target CRF, which
 * has no CRF of its own).
 */
export function rateText(r: Rendition): string {
  const c = r.choice;
  if (!c) return `${r.bitrate} b/s`;
  if (c.crf === undefined) return `${c.cap} b/s (hits its cap)`;
  return `crf ${c.crf} ~${c.predictedBitrate} b/s (cap ${c.cap})`;
}
