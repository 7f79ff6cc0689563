import { FFMPEG_QUIET, inputArgs, type MediaInfo } from '../transcode/index.ts';
import type { ClipPart } from './clip-plan.ts';

// The ffmpeg command lines of a clip's cut (clip-cut.ts runs them): each part of the video into
// an MPEG-TS of its own (encoded, or its packets copied), the audio of the range, and the
// parts and audio joined into the clip's MP4.

/** The pixel formats libx264 encodes: an H.264 source in one of them can be continued by it. */
export const X264_PIX_FMTS = new Set([
  ...['yuv420p', 'yuvj420p', 'yuv422p', 'yuvj422p', 'yuv444p', 'yuvj444p'],
  ...['yuv420p10le', 'yuv422p10le', 'yuv444p10le', 'gray', 'gray10le'],
]);

const VIDEO_ONLY = ['-map', '0:v:0', '-an', '-sn', '-dn'];
const TS = (file: string) => ['-f', 'mpegts', file];

export interface EncodeCommand {
  input: string;
  part: ClipPart;
  file: string;
  video: NonNullable<MediaInfo['video']>;
  /** `-color_*` flags naming the source's colours, to keep them. */
  colors: string[];
  /** The whole range encoded, turned upright by ffmpeg (it then drops the rotation). */
  upright: boolean;
  preset: string;
  threads: number;
}

/** One part encoded again with libx264. */
export function encodeArgs(o: EncodeCommand): string[] {
  const v = o.video;
  // A part of a smart cut keeps the source's coded size, to be joined with the copied GOPs.
  const [width, height] = o.upright ? [v.width, v.height] : [v.codedWidth, v.codedHeight];
  const input = ['-ss', o.part.seek.toFixed(6), ...(o.upright ? [] : ['-noautorotate']), ...inputArgs(o.input)];
  return [
    ...FFMPEG_QUIET,
    ...input,
    ...VIDEO_ONLY,
    ...['-frames:v', String(o.part.frames)],
    // A first frame cut at the clip's start shows from there: its time moves up to it.
    ...(o.part.trim > 0 ? ['-vf', `setpts=PTS+eq(N\\,0)*${o.part.trim.toFixed(6)}/TB`] : []),
    // Every frame at its source time: none made or dropped, and the encoder's clock the
    // demuxer's (by default 1/frame rate, which moves a variable-rate frame by up to half of one).
    ...['-fps_mode', 'passthrough', '-enc_time_base:v', '-1'],
    // Near lossless (the asset's source, encoded once more for its ladder); no B-frames, so the
    // part's decode times never run past the next part's.
    ...['-c:v', 'libx264', '-preset', o.preset, '-crf', '12', '-bf', '0'],
    ...['-pix_fmt', pixelFormat(v.pixFmt, v.bitDepth, width % 2 === 1 || height % 2 === 1)],
    ...o.colors,
    ...(o.threads > 0 ? ['-threads', String(o.threads)] : []),
    ...TS(o.file),
  ];
}

/**
 * The source's own pixel format where libx264 writes it; else 4:2:0 of its bit depth, or 4:4:4
 * for an odd width or height (libx264's 4:2:0 needs even ones; a VP9 file may have any).
 */
function pixelFormat(source: string, bitDepth: number, odd: boolean): string {
  if (X264_PIX_FMTS.has(source) && !(odd && /^yuvj?42[02]/.test(source))) return source;
  const deep = bitDepth > 8 ? '10le' : '';
  return odd ? `yuv444p${deep}` : `yuv420p${deep}`;
}

/** One part's packets copied: ffmpeg starts at the keyframe at or before the seek, just before it. */
export function copyArgs(o: { input: string; part: ClipPart; file: string }): string[] {
  const input = ['-ss', o.part.seek.toFixed(6), ...inputArgs(o.input)];
  return [...FFMPEG_QUIET, ...input, ...VIDEO_ONLY, '-c:v', 'copy', '-frames:v', String(o.part.frames), ...TS(o.file)];
}

/** Every audio track from `start` for `duration` seconds, as AAC in an MP4. */
export function audioArgs(o: {
  input: string;
  media: MediaInfo;
  start: number;
  duration: number;
  file: string;
}): string[] {
  const rates = o.media.audioTracks.flatMap((a, i) => [
    `-b:a:${i}`,
    String(Math.min(512_000, Math.max(96_000, a.channels * 64_000))),
  ]);
  const input = ['-ss', o.start.toFixed(6), ...inputArgs(o.input)];
  return [
    ...FFMPEG_QUIET,
    ...input,
    ...['-map', '0:a', '-vn', '-sn', '-dn', '-t', o.duration.toFixed(6)],
    ...['-c:a', 'aac', ...rates],
    ...['-movflags', '+faststart', '-f', 'mp4', o.file],
  ];
}

/**
 * The parts (an ffconcat list placing each at its time) and the audio, copied into the MP4.
 * The last packet (in decode order) is given `lastDuration` seconds: MPEG-TS keeps no
 * durations, and the MP4 muxer would guess one (a variable-rate clip then stops short, its
 * last frame a tick long); the MP4 ends that long after the last packet's decode time.
 */
export function muxArgs(o: {
  concat: string;
  audio: string | undefined;
  rotation: number;
  frames: number;
  lastDuration: number;
  output: string;
}): string[] {
  const duration = `if(eq(N\\,${o.frames - 1})\\,${o.lastDuration.toFixed(6)}/TB\\,DURATION)`;
  return [
    ...FFMPEG_QUIET,
    ...inputArgs(o.concat, 'our-concat'),
    ...(o.audio ? [...inputArgs(o.audio, 'ours'), '-map', '0:v:0', '-map', '1:a'] : ['-map', '0:v:0']),
    '-c',
    'copy',
    ...['-bsf:v', `setts=pts=PTS:dts=DTS:duration=${duration}`],
    // The copied GOPs keep the source's coded picture: the player turns it as the source says.
    ...(o.rotation ? ['-metadata:s:v:0', `rotate=${o.rotation}`] : []),
    ...['-movflags', '+faststart', '-f', 'mp4', o.output],
  ];
}
