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
}

/** One rendition as it landed in storage (extra fields the spec allows). */
export interface RenditionOutput {
  name: string;
  path: string;
  width: number;
  height: number;
  bitrate: number;
  size: number;
  signed?: boolean;
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
  return { name: r.name, path: key, width: r.width, height: r.height, bitrate: r.bitrate, size };
}
