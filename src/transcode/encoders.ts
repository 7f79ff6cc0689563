// The encoders' arguments and the segment timing they follow (keyframes where segments cut).
import type { Rendition } from './ladder.ts';
import { value } from './probe.ts';

/**
 * Segment timing for one rendition. Segments are a whole number of frames no longer than
 * the requested duration (at 29.97 fps, 179 frames = 5.973 s, not 180 = 6.006 s), so every
 * #EXTINF stays within targetSegmentSizeSecs. Keyframes are forced at those frames and the
 * HLS muxer cuts half a frame before them, so float rounding cannot move a cut.
 */
export function segmentTiming(segmentSecs: number, r: Rendition): { segment: number; cutAt: number; frames: number } {
  const fps = value(r.fps);
  const frames = Math.max(1, Math.floor(segmentSecs * fps + 1e-6));
  const segment = frames / fps;
  return { segment, cutAt: segment - 0.5 / fps, frames };
}

/** How a rendition is encoded: rate control, keyframe interval, the codec's own options. */
export function videoCodecArgs(
  r: Rendition,
  o: {
    preset: string /** Frames per segment: the GOP never spans two segments. */;
    frames: number;
    hdrSource: boolean;
  },
): string[] {
  const gop = Math.min(r.gopFrames ?? o.frames, o.frames);
  const rate = r.crf !== undefined ? ['-crf', String(r.crf)] : ['-b:v', String(r.bitrate)];
  const common = [
    ...rate,
    '-maxrate',
    String(Math.round(r.bitrate * 1.5)),
    '-bufsize',
    String(r.bitrate * 2),
    '-g',
    String(gop),
    '-preset',
    o.preset,
  ];
  if (r.codec === 'hevc') {
    // hvc1 is the sample entry Apple players require for HEVC in MP4.
    return [
      '-c:v',
      'libx265',
      ...common,
      '-tag:v',
      'hvc1',
      '-x265-params',
      `log-level=error${r.noBFrames ? ':bframes=0' : ''}`,
    ];
  }
  const args = ['-c:v', 'libx264', ...common];
  if (r.profile) args.push('-profile:v', r.profile);
  if (r.noBFrames) args.push('-bf', '0');
  if (o.hdrSource) args.push('-color_primaries', 'bt709', '-color_trc', 'bt709', '-colorspace', 'bt709');
  return args;
}
