import { inputArgs } from '../transcode/media-input.ts';
import { FFMPEG_QUIET } from '../transcode/run.ts';
import type { SourceInfo } from './ingest-types.ts';
import { type Profile, SOURCE_RENDITION } from './profiles.ts';

// The one ffmpeg command line of a live session: the publisher's FLV on stdin, decoded once,
// scaled to each rung and encoded with x264 tuned for live, plus the source itself copied
// when it is H.264; each rendition one fragmented MP4 on its own pipe (fd 3, 4, ...), which
// live/llhls/ cuts into LL-HLS parts (RFC 8216bis: a part is a moof+mdat, a segment starts at
// an independent part).

export interface LadderTiming {
  segmentSecs: number;
  partSecs: number;
}

export interface PlannedRendition {
  /** The profile's name, or `source`. */
  name: string;
  /** The pipe it is written to (3, 4, ...). */
  fd: number;
  /** What the multivariant playlist says of it: bits per second, video and audio. */
  bandwidth: number;
  width?: number;
  height?: number;
  frameRate?: number;
  /** The rung it encodes; undefined for the source passthrough. */
  profile?: Profile;
}

export interface LadderPlan {
  renditions: PlannedRendition[];
  /** ffmpeg's arguments (after the program name). */
  args: string[];
}

/** Bits per second the AAC audio of a rendition takes when the source's is not AAC. */
const AUDIO_BITRATE = 128_000;
/** A frame rate for the keyframe interval when neither the profile nor the source names one. */
const DEFAULT_FPS = 30;

/**
 * The command line for `rungs` (already fitted to the source: profiles.ts rungsFor, and
 * without the rungs a slow ladder dropped). The source is passed through when it is H.264; a
 * source of another codec is encoded at its own size when there are no rungs (`[]` = the
 * source alone), and left out otherwise.
 */
export function planLiveLadder(o: { rungs: readonly Profile[]; source: SourceInfo; timing: LadderTiming }): LadderPlan {
  const renditions: PlannedRendition[] = [];
  const outputs: string[] = [];
  const encodeSource = o.source.videoCodec !== 'h264' && o.rungs.length === 0;
  const encoded = encodeSource ? [sourceSizedRung(o.source)] : o.rungs;
  const graph = filterGraph(encoded, o.source);
  for (const [i, rung] of encoded.entries()) {
    const fd = 3 + renditions.length;
    renditions.push(rungRendition(rung, fd, o.source));
    outputs.push(
      ...encodeArgs({ rung, label: `v${i}`, source: o.source, timing: o.timing }),
      ...fmp4Args(fd, o.timing),
    );
  }
  if (o.source.videoCodec === 'h264') {
    const fd = 3 + renditions.length;
    renditions.push(sourceRendition(fd, o.source));
    outputs.push('-map', '0:v:0', '-map', '0:a:0?', '-c:v', 'copy', ...audioArgs(o.source), ...fmp4Args(fd, o.timing));
  }
  const args = [
    ...FFMPEG_QUIET,
    // Little probing: the session starts ffmpeg once onMetaData, the sequence headers and the
    // first video frame are there. (Not `-fflags nobuffer`: it drops the packets read while
    // probing from stream copies, so the source passthrough lost its first seconds.)
    ...['-probesize', '65536', '-analyzeduration', '500000'],
    ...inputArgs('pipe:0', 'live-flv'),
    ...(graph ? ['-filter_complex', graph] : []),
    ...outputs,
  ];
  return { renditions, args };
}

/** The source encoded at its own size: a rendition named `source` for a source that cannot be copied. */
function sourceSizedRung(source: SourceInfo): Profile {
  const height = even(source.height ?? 720);
  const width = even(source.width ?? Math.round((height * 16) / 9));
  const pixels = width * height * (source.fps ?? DEFAULT_FPS);
  // About 0.1 bit per pixel, x264 veryfast's rate for a clean picture at live sizes.
  const bitrate = source.declaredKbps ? source.declaredKbps * 1000 : Math.round(pixels * 0.1);
  return { name: SOURCE_RENDITION, width, height, bitrate, fps: 0 };
}

function even(n: number): number {
  return Math.max(2, Math.round(n / 2) * 2);
}

/** Decode once, split, scale each rung keeping the source's shape inside the rung's box. */
function filterGraph(rungs: readonly Profile[], source: SourceInfo): string | undefined {
  if (rungs.length === 0) return undefined;
  const splits = rungs.map((_, i) => `[s${i}]`).join('');
  const chains = rungs.map((r, i) => {
    const fps = r.fps > 0 ? `,fps=${r.fps}/${r.fpsDen ?? 1}` : '';
    const size = sizeOf(r, source);
    return `[s${i}]scale=${size.width}:${size.height}${fps},format=yuv420p[v${i}]`;
  });
  return [`[0:v:0]split=${rungs.length}${splits}`, ...chains].join(';');
}

/** The rung's box fitted to the source's aspect ratio (a 4:3 source in a 16:9 rung keeps 4:3), even sides. */
function sizeOf(rung: Profile, source: SourceInfo): { width: number; height: number } {
  if (!source.width || !source.height) return { width: rung.width, height: rung.height };
  const scale = Math.min(rung.width / source.width, rung.height / source.height);
  return { width: even(source.width * scale), height: even(source.height * scale) };
}

function rungFps(rung: Profile, source: SourceInfo): number {
  return rung.fps > 0 ? rung.fps / (rung.fpsDen ?? 1) : (source.fps ?? DEFAULT_FPS);
}

function rungRendition(rung: Profile, fd: number, source: SourceInfo): PlannedRendition {
  const audio = source.audioCodec === undefined ? 0 : AUDIO_BITRATE;
  return {
    name: rung.name,
    fd,
    bandwidth: rung.bitrate + audio,
    ...sizeOf(rung, source),
    frameRate: rungFps(rung, source),
    profile: rung,
  };
}

function sourceRendition(fd: number, source: SourceInfo): PlannedRendition {
  return {
    name: SOURCE_RENDITION,
    fd,
    // The encoder's declared rate; a guess from the picture size when it declared none.
    bandwidth: source.declaredKbps ? Math.round(source.declaredKbps * 1000) : 6_000_000,
    ...(source.width && source.height ? { width: source.width, height: source.height } : {}),
    ...(source.fps ? { frameRate: source.fps } : {}),
  };
}

const X264_PROFILES: Record<NonNullable<Profile['profile']>, string> = {
  H264Baseline: 'baseline',
  H264Main: 'main',
  H264High: 'high',
  H264ConstrainedHigh: 'high',
};

/**
 * x264 for live: veryfast, zerolatency (no lookahead, no B-frames: a frame leaves as soon as
 * it is encoded), a keyframe at every segment start and none at scene cuts, so every segment
 * starts with an independent part (RFC 8216bis 4.4.4.9) and segments last what the playlist says.
 */
function encodeArgs(o: { rung: Profile; label: string; source: SourceInfo; timing: LadderTiming }): string[] {
  const { rung, timing } = o;
  const gop = Math.max(1, Math.round(timing.segmentSecs * rungFps(rung, o.source)));
  const kbps = Math.round(rung.bitrate / 1000);
  return [
    ...['-map', `[${o.label}]`, '-map', '0:a:0?'],
    ...['-c:v', 'libx264', '-preset', 'veryfast', '-tune', 'zerolatency'],
    ...(rung.profile ? ['-profile:v', X264_PROFILES[rung.profile]] : []),
    ...['-b:v', `${kbps}k`, '-maxrate', `${kbps}k`, '-bufsize', `${kbps}k`],
    ...['-g', String(gop), '-keyint_min', String(gop), '-sc_threshold', '0'],
    ...['-force_key_frames', `expr:gte(t,n_forced*${timing.segmentSecs})`],
    ...audioArgs(o.source),
  ];
}

/** AAC is copied; anything else is encoded to AAC (HLS players read AAC everywhere). */
function audioArgs(source: SourceInfo): string[] {
  return source.audioCodec === 'aac' ? ['-c:a', 'copy'] : ['-c:a', 'aac', '-b:a', `${AUDIO_BITRATE / 1000}k`];
}

/**
 * One fragmented MP4 on fd `fd`: an empty moov first (the init segment), then a fragment at
 * every keyframe and every part's duration, flushed at once (a part waits for nothing).
 */
function fmp4Args(fd: number, timing: LadderTiming): string[] {
  return [
    ...['-f', 'mp4', '-movflags', 'empty_moov+default_base_moof+frag_keyframe'],
    ...['-frag_duration', String(Math.round(timing.partSecs * 1_000_000)), '-flush_packets', '1'],
    `pipe:${fd}`,
  ];
}
