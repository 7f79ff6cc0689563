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

/**
 * The quality the per-title ladder aims at, as an x264 CRF (issue #31): about the fixed
 * ladder's quality (1 Mbps at 360p, 4 Mbps at 720p) on the titles those bitrates suit, so that
 * the per-title ladder keeps it (mean VMAF within 1 point, no title 2 worse) while it saves on
 * the titles where the fixed rungs spend bits for nothing. bench/per-title.ts measured 21 at
 * +3.4 VMAF over the fixed ladder on average, more quality than it asks for; at 22 the titles
 * that keep all their rungs stay within 1.6 points of it (talking head -1.4, animation -1.5)
 * and the set takes 22% fewer bytes (bench/README.md).
 */
export const TARGET_CRF = 22;

/**
 * Bits per pixel one keyframe may need when the analysis measured nothing larger: 0.5 is a
 * detailed 720p keyframe of 58 KB at CRF 21, several times what a slide or test card needs.
 */
const KEYFRAME_BITS_PER_PIXEL = 0.5;

/** One keyframe's bits, and the peak rate that refills them within a segment. */
function keyframeFloor(r: Rendition, segmentSecs: number): { keyframe: number; floor: number } {
  const keyframe = Math.max(r.keyframeBits ?? 0, Math.round(r.width * r.height * KEYFRAME_BITS_PER_PIXEL));
  return { keyframe, floor: Math.round(keyframe / Math.max(segmentSecs, 0.1)) };
}

/** The most a rendition may spend a second: its bitrate, or the keyframe floor above a low one. */
export function rateCap(r: Rendition, segmentSecs: number): number {
  return Math.max(r.bitrate, keyframeFloor(r, segmentSecs).floor);
}

/** The VBV and what it caps: a CRF (capped CRF) or an average bitrate (ABR). */
export interface RateControl {
  crf: number | undefined;
  bitrate: number | undefined;
  maxrate: number;
  bufsize: number;
}

/**
 * A rendition's rate control (issue #31). The VBV buffer always holds one keyframe and the
 * peak rate refills it within a segment (a keyframe starts every segment): a low average
 * (a source at 12 kb/s caps its rungs there) says nothing about how big a keyframe must be.
 * With a 24 kbit buffer, x264 crushed a 720p card's keyframe and the picture came out gray
 * for 4 s. The per-title rungs are capped CRF, the cap their peak, or ABR at the cap where the
 * analysis says the title would spend it all anyway; the other rungs ABR at their bitrate (or
 * the profile's CRF) under 1.5x peaks, as before. Below the keyframe floor,
 * ABR's opening guess is the trouble even with a large buffer (measured: SSIM 0.79 on that
 * card's first frame with a 600 kbit buffer), so such a rung is capped CRF too, at the same cap.
 */
export function rateControl(r: Rendition, segmentSecs: number): RateControl {
  const { keyframe, floor } = keyframeFloor(r, segmentSecs);
  // Capped CRF: the cap is the peak, over a buffer of one second of it (the usual capped-CRF
  // setting): over a whole video the average stays under the cap, a short one may gain the
  // buffer's 0.9 s that x264 starts with (vbv-init).
  if (r.choice?.crf !== undefined) {
    const cap = Math.max(r.choice.cap, floor);
    return { crf: r.choice.crf, bitrate: undefined, maxrate: cap, bufsize: Math.max(cap, keyframe) };
  }
  const bufsize = Math.max(r.bitrate * 2, keyframe);
  const maxrate = Math.max(Math.round(r.bitrate * 1.5), floor);
  if (r.crf === undefined && r.bitrate < floor) return { crf: TARGET_CRF, bitrate: undefined, maxrate, bufsize };
  return { crf: r.crf, bitrate: r.crf === undefined ? r.bitrate : undefined, maxrate, bufsize };
}

/**
 * The most one segment of `r` can spend a second under its rate control: the VBV's peak rate,
 * plus its whole buffer emptied into that one segment. What a master may say of a rendition
 * whose segments are not all written yet (a split job's early playlists).
 */
export function segmentPeakBound(r: Rendition, segmentSecs: number): number {
  const rate = rateControl(r, segmentSecs);
  return Math.round(rate.maxrate + rate.bufsize / Math.max(segmentSecs, 0.1));
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
  const rate = rateControl(r, o.frames / value(r.fps));
  // Scene-cut keyframes off: a keyframe just before a cut makes hlsenc cut there and the
  // next segment longer than the target; keyframes come from the interval and the forcing.
  switch (r.codec) {
    case 'hevc':
      return [
        '-c:v',
        'libx265',
        ...x26xRate(rate),
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
      return [...av1Args({ gop, preset: o.preset, rate }), ...bt709(o.hdrSource)];
    case 'vp9':
      return [...vp9Args({ gop, preset: o.preset, rate }), ...bt709(o.hdrSource)];
    default: {
      const args = ['-c:v', 'libx264', ...x26xRate(rate), '-g', String(gop), '-sc_threshold', '0'];
      // The same headers whatever the rate control: a split job's chunks may choose capped CRF
      // or ABR each (chunked/chunk-ladder.ts), and the fMP4 and MP4 outputs hold the first
      // chunk's SPS and PPS alone. Without it x264 writes the CRF into the PPS (pic_init_qp).
      args.push('-x264-params', 'stitchable=1');
      args.push('-preset', o.preset);
      if (r.profile) args.push('-profile:v', r.profile);
      if (r.noBFrames) args.push('-bf', '0');
      return [...args, ...bt709(o.hdrSource)];
    }
  }
}

/** x264/x265: CRF or average bitrate, both under the VBV cap. */
function x26xRate(rate: RateControl): string[] {
  const target = rate.crf !== undefined ? ['-crf', String(rate.crf)] : ['-b:v', String(rate.bitrate)];
  return [...target, ...vbvArgs(rate)];
}

function vbvArgs(rate: RateControl): string[] {
  return ['-maxrate', String(rate.maxrate), '-bufsize', String(rate.bufsize)];
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
  rate: RateControl;
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

function av1Args(o: RateAndSpeed): string[] {
  // Capped CRF (crf with maxrate) or VBR at the profile's bitrate. ffmpeg 5.1 maps -g to
  // SVT's intra period; scene-change keyframes are off by default in SVT-AV1 1.4.
  const rate =
    o.rate.crf !== undefined
      ? ['-crf', String(crf63(o.rate.crf)), '-maxrate', String(o.rate.maxrate)]
      : ['-b:v', String(o.rate.bitrate), ...vbvArgs(o.rate)];
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

function vp9Args(o: RateAndSpeed): string[] {
  // Constrained quality (crf with the cap as -b:v) or VBR at the profile's bitrate.
  const rate =
    o.rate.crf !== undefined
      ? ['-crf', String(crf63(o.rate.crf)), '-b:v', String(o.rate.maxrate)]
      : ['-b:v', String(o.rate.bitrate), ...vbvArgs(o.rate)];
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
