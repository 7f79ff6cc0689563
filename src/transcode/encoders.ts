// The encoders' arguments and the segment timing they follow (keyframes where segments cut).
import { value, type AudioTrack } from './probe.ts';
import type { Rendition } from './renditions.ts';

export interface SegmentTiming {
  /** Seconds per segment: `frames` at the rendition's frame rate. */
  segment: number;
  /** The HLS muxer's `hls_time`: just under `segment` (see CUT_SLACK_SECS). */
  cutAt: number;
  /** Frames per segment: a whole number of keyframe intervals. */
  frames: number;
  /** Keyframe interval in frames; it divides `frames`, so a keyframe starts every segment. */
  gop: number;
}

/**
 * hlsenc cuts at the first keyframe at or after `hls_time` times the segment's number: a
 * product, so any slack below the segment adds up segment after segment. The half frame
 * this used to be put the 6th cut of a 29.25 fps rendition three frames early, where an x264
 * scene-cut keyframe started that segment early and the next one ran 4.034 s of a 4 s
 * target (issue #19, sample 07). 10 us covers what can put a cut keyframe's time below the
 * exact frame time: a 90 kHz TS timestamp's rounding (5.6 us) and the option's microseconds
 * (0.5 us); 10 us a segment add up to one frame (60 fps) only after 1,600 segments, and then
 * the cut comes on an earlier keyframe of the regular pattern, never later.
 */
const CUT_SLACK_SECS = 10e-6;

/**
 * Segment timing for one rendition. Segments are a whole number of frames no longer than
 * the requested duration (at 29.97 fps, 179 frames = 5.973 s, not 180 = 6.006 s), so every
 * #EXTINF stays within targetSegmentSizeSecs; with a profile's `gop`, a whole number of
 * equal GOPs within it, so every keyframe interval is the same and every cut has a keyframe
 * without forcing one (what SVT-AV1 needs: ffmpeg 5.1's libsvtav1 ignores -force_key_frames).
 */
export function segmentTiming(segmentSecs: number, r: Rendition): SegmentTiming {
  const fps = value(r.fps);
  const most = Math.max(1, Math.floor(segmentSecs * fps + 1e-6));
  const frames = gopsInSegment(most, Math.min(r.gopFrames ?? most, most));
  const segment = frames / fps;
  return { segment, cutAt: segment - CUT_SLACK_SECS, frames, gop: keyframeInterval(r, frames) };
}

/**
 * The longest segment of equal GOPs within `most` frames: as many GOPs of the asked length
 * as fit, or as many GOPs as the asked length needs, each a little shorter; whichever is
 * longer (6 s at 29.97 with gop "2": 3 x 59 = 177 frames, not 2 x 60 = 120; with a gop of
 * 2 frames: 89 x 2 = 178, not 90 x 1). Either loses fewer frames than the other's count of
 * GOPs, so at most about the square root of `most`.
 */
function gopsInSegment(most: number, asked: number): number {
  const whole = Math.floor(most / asked) * asked;
  const count = Math.ceil(most / asked);
  const shorter = Math.floor(most / count) * count;
  return shorter > whole ? shorter : whole;
}

/** The longest keyframe interval within the profile's `gop` that divides a segment of `frames`. */
function keyframeInterval(r: Rendition, frames: number): number {
  let gop = Math.max(1, Math.min(r.gopFrames ?? frames, frames));
  while (frames % gop !== 0) gop--;
  return gop;
}

/**
 * Keyframes forced where segments cut. The keyframe interval (a divisor of the segment)
 * already puts them there; forcing keeps them there for encoders that would start a GOP
 * elsewhere. ffmpeg 5.1's libsvtav1 ignores forced keyframes, so AV1 relies on its keyint.
 */
export function keyframeArgs(r: Rendition, t: SegmentTiming): string[] {
  if (r.codec === 'av1') return [];
  const early = 0.5 / value(r.fps);
  return ['-force_key_frames', `expr:gte(t,n_forced*${t.segment.toFixed(6)}-${early.toFixed(6)})`];
}

/** How a rendition is encoded: rate control, keyframe interval, the codec's own options. */
export function videoCodecArgs(
  r: Rendition,
  o: {
    /** The x264 preset setting; the other encoders map it to theirs. */
    preset: string;
    /** Frames per segment (SegmentTiming.frames): the GOP divides it. */
    frames: number;
    hdrSource: boolean;
  },
): string[] {
  const gop = keyframeInterval(r, o.frames);
  const maxrate = Math.round(r.bitrate * 1.5);
  const vbv = ['-maxrate', String(maxrate), '-bufsize', String(r.bitrate * 2)];
  // Scene-cut keyframes off: a keyframe just before a cut makes hlsenc cut there and the
  // next segment longer than the target; keyframes come from the interval and the forcing.
  switch (r.codec) {
    case 'hevc':
      return [
        '-c:v',
        'libx265',
        ...x26xRate(r, vbv),
        '-g',
        String(gop),
        '-preset',
        o.preset,
        // hvc1 is the sample entry Apple players require for HEVC in MP4.
        '-tag:v',
        'hvc1',
        // Closed GOPs with IDR keyframes: each segment decodes on its own (open GOP's CRA
        // frames leave leading pictures that need the previous segment).
        '-forced-idr',
        '1',
        '-x265-params',
        `log-level=error:scenecut=0:open-gop=0${r.noBFrames ? ':bframes=0' : ''}`,
      ];
    case 'av1':
      return [...av1Args(r, { gop, preset: o.preset, maxrate, vbv }), ...bt709(o.hdrSource)];
    case 'vp9':
      return [...vp9Args(r, { gop, preset: o.preset, maxrate, vbv }), ...bt709(o.hdrSource)];
    default: {
      const args = ['-c:v', 'libx264', ...x26xRate(r, vbv), '-g', String(gop), '-sc_threshold', '0'];
      args.push('-preset', o.preset);
      if (r.profile) args.push('-profile:v', r.profile);
      if (r.noBFrames) args.push('-bf', '0');
      return [...args, ...bt709(o.hdrSource)];
    }
  }
}

/** x264/x265: CRF or average bitrate, both under the VBV cap. */
function x26xRate(r: Rendition, vbv: string[]): string[] {
  return [...(r.crf !== undefined ? ['-crf', String(r.crf)] : ['-b:v', String(r.bitrate)]), ...vbv];
}

/** Tone-mapped HDR is BT.709 SDR: say so, or players take the source's tags. */
function bt709(hdrSource: boolean): string[] {
  return hdrSource ? ['-color_primaries', 'bt709', '-color_trc', 'bt709', '-colorspace', 'bt709'] : [];
}

/** The profile's CRF (x264's 0-51 scale) on the 0-63 scale of SVT-AV1 and libvpx; 0 means "unset" to libsvtav1. */
function crf63(crf: number): number {
  return Math.max(1, Math.round((crf * 63) / 51));
}

interface RateAndSpeed {
  gop: number;
  preset: string;
  maxrate: number;
  vbv: string[];
}

// SVT-AV1 presets (0 slowest, 13 fastest) for the x264 preset setting. At the default
// (veryfast -> 10) a 720p30 rendition encodes near real time on 2 cores (bench/transcode.ts
// reports the factor); 12 is what ultrafast asks for, for tests and previews.
const SVT_AV1_PRESETS: Readonly<Record<string, number>> = {
  ultrafast: 12,
  superfast: 11,
  veryfast: 10,
  faster: 9,
  fast: 8,
  medium: 7,
  slow: 6,
  slower: 5,
  veryslow: 4,
};

function av1Args(r: Rendition, o: RateAndSpeed): string[] {
  // Capped CRF (crf with maxrate) or VBR at the profile's bitrate. ffmpeg 5.1 maps -g to
  // SVT's intra period; scene-change keyframes are off by default in SVT-AV1 1.4.
  const rate =
    r.crf !== undefined
      ? ['-crf', String(crf63(r.crf)), '-maxrate', String(o.maxrate)]
      : ['-b:v', String(r.bitrate), ...o.vbv];
  return ['-c:v', 'libsvtav1', ...rate, '-g', String(o.gop), '-preset', String(SVT_AV1_PRESETS[o.preset] ?? 10)];
}

// libvpx-vp9 deadline and cpu-used for the x264 preset setting. "good" takes 2x to 5x real
// time for 720p30 on 2 cores at any cpu-used; "realtime" at 6 to 8 takes 0.4x to 1.1x. In
// realtime VBR libvpx adds keyframes at scene changes of its own (keyint_min does not stop
// it); harmless to the cuts (a keyframe must lie within CUT_SLACK_SECS x the segment's
// number before a cut to move it) and they help the picture there.
const VP9_SPEEDS: Readonly<Record<string, readonly [deadline: string, cpuUsed: number]>> = {
  ultrafast: ['realtime', 8],
  superfast: ['realtime', 7],
  veryfast: ['realtime', 6],
  faster: ['good', 5],
  fast: ['good', 4],
  medium: ['good', 3],
  slow: ['good', 2],
  slower: ['good', 1],
  veryslow: ['good', 0],
};

function vp9Args(r: Rendition, o: RateAndSpeed): string[] {
  // Constrained quality (crf with the cap as -b:v) or VBR at the profile's bitrate.
  const rate =
    r.crf !== undefined
      ? ['-crf', String(crf63(r.crf)), '-b:v', String(o.maxrate)]
      : ['-b:v', String(r.bitrate), ...o.vbv];
  const [deadline, cpuUsed] = VP9_SPEEDS[o.preset] ?? ['realtime', 6];
  return [
    '-c:v',
    'libvpx-vp9',
    ...rate,
    '-g',
    String(o.gop),
    '-deadline',
    deadline,
    '-cpu-used',
    String(cpuUsed),
    '-row-mt',
    '1',
  ];
}

/** The audio renditions' bitrate and format: AAC-LC stereo at 48 kHz, what every player takes. */
export const AUDIO_BITRATE = 128_000;
export const AAC_ARGS = ['-c:a', 'aac', '-b:a', String(AUDIO_BITRATE), '-ac', '2', '-ar', '48000'] as const;
/** AAC-LC, the codec of every audio rendition (RFC 6381). */
export const AAC_CODECS = 'mp4a.40.2';
/** One AAC frame (1024 samples at 48 kHz): audio cuts land up to this late, so ask this early. */
export const AAC_FRAME_SECS = 1024 / 48000;

/** Language and title tags for the MP4s' audio tracks (the only tags outputs keep). */
export function trackLabels(tracks: readonly AudioTrack[]): string[] {
  return tracks.flatMap((a, k) => [
    ...(a.language ? [`-metadata:s:a:${k}`, `language=${a.language}`] : []),
    `-disposition:a:${k}`,
    a.default ? 'default' : '0',
  ]);
}
