import { AAC_FRAME_SECS, keyframeArgs, segmentTiming, trackLabels, videoCodecArgs } from './encoders.ts';
import { inputArgs } from './media-input.ts';
import { FFMPEG_QUIET } from './run.ts';
import {
  audioCodecArgs,
  audioSource,
  formatsWritten,
  subtitleArgs,
  type AudioPieceInput,
  type CommandPlan,
  type OutputFormat,
} from './outputs/index.ts';
import type { AudioTrack } from './probe.ts';
import type { Rendition } from './renditions.ts';

export type { CommandPlan } from './outputs/index.ts';

/**
 * The single ffmpeg command: one decode, then split into one scaled branch per rendition,
 * each encoded once and written through the tee muxer to every output format the job asks
 * (outputs/index.ts), so adding MP4 next to HLS costs no second encode. Formats that need
 * pictures of their own (the thumbnails) take one more branch of the split. Each audio group
 * track is encoded once for every HLS tree that lists it (and an audio-only input's `.m4a`);
 * text subtitles become WebVTT files.
 */
export function buildFfmpegArgs(plan: CommandPlan): string[] {
  const formats = formatsWritten(plan);
  const args = [
    ...FFMPEG_QUIET,
    '-progress',
    'pipe:1',
    '-stats_period',
    '1',
    ...(plan.audioPiece ? audioPieceInputs(plan.audioPiece) : [...chunkInput(plan), ...inputArgs(plan.input)]),
  ];
  const branches: { filters: string[]; outputArgs: string[] }[] = [];
  for (const f of formats) if (f.branch) branches.push(f.branch(plan, `s${plan.renditions.length + branches.length}`));
  if (plan.renditions.length > 0) args.push('-filter_complex', filterGraph(plan, branches));
  for (const [i, r] of plan.renditions.entries()) args.push(...renditionArgs(plan, formats, r, i));
  for (const b of branches) args.push(...b.outputArgs);
  for (const track of plan.probe.audioTracks) args.push(...audioGroupArgs(plan, formats, track));
  for (const f of formats) args.push(...(f.outputArgs?.(plan) ?? []));
  // Subtitles are renditions of the HLS trees (and DASH); a job without one has none to list them in.
  if (formats.some((f) => f.tree)) args.push(...subtitleArgs(plan.probe.subtitles));
  return args;
}

/** Tone mapping to BT.709 SDR for PQ/HLG input (zscale + tonemap, the usual recipe). */
const TONEMAP =
  'zscale=t=linear:npl=100,format=gbrpf32le,zscale=p=bt709,tonemap=tonemap=hable:desat=0,zscale=t=bt709:m=bt709:r=tv';

/** Whether the renditions keep 10-bit: only when every one is HEVC (H.264 10-bit plays almost nowhere). */
function keepsHighDepth(plan: CommandPlan): boolean {
  return (plan.probe.video?.bitDepth ?? 8) > 8 && plan.renditions.every((r) => r.codec === 'hevc');
}

/** The split into the renditions' branches, and one more for each format's own chains (the thumbnails). */
function filterGraph(plan: CommandPlan, extra: readonly { filters: string[] }[]): string {
  const n = plan.renditions.length + extra.length;
  // Rotation needs no filter here: ffmpeg's autorotate turns the decoded pictures before
  // they enter the graph, so sizes below are the upright (display) sizes.
  const pre = plan.probe.video?.hdr && !keepsHighDepth(plan) ? `${TONEMAP},` : '';
  const pixFmt = keepsHighDepth(plan) ? 'yuv420p10le' : 'yuv420p';
  const heads = Array.from({ length: n }, (_, i) => `[s${i}]`).join('');
  const branches = plan.renditions.map(
    (r, i) =>
      `[s${i}]fps=${r.fps.num}/${r.fps.den}${chunkFrames(plan, r)},scale=${r.width}:${r.height}:flags=bicubic,setsar=1,format=${pixFmt}[v${i}]`,
  );
  return [`[0:v:0]${pre}split=${n}${heads}`, ...branches, ...extra.flatMap((b) => b.filters)].join(';');
}

/**
 * Issue #30: a chunk reads from a little before its start (`-ss`, a whole number of frames
 * of every rendition before it, so the frame-rate filter's grid is the whole run's) and a
 * second past its end, never the rest of the input.
 */
function chunkInput(plan: CommandPlan): string[] {
  const c = plan.chunk;
  if (!c) return [];
  const seek = c.seekSecs > 0 ? ['-ss', c.seekSecs.toFixed(6)] : [];
  return c.keepSecs === undefined ? seek : [...seek, '-t', (c.skipSecs + c.keepSecs + 1).toFixed(6)];
}

/**
 * An audio piece's inputs: each track's kept packets (ADTS, no timestamps of its own). The
 * first piece's begin with the encoder's priming packet, placed one frame before 0 as the
 * encoder places it, so the MP4 muxers write the single run's edit list.
 */
function audioPieceInputs(a: AudioPieceInput): string[] {
  const primed = a.primed ? ['-itsoffset', (-AAC_FRAME_SECS).toFixed(6)] : [];
  return a.files.flatMap((f) => [...primed, ...inputArgs(f, 'our-adts')]);
}

/** Issue #30: the chunk's own frames of a rendition, numbered on the whole run's grid, then from 0. */
function chunkFrames(plan: CommandPlan, r: Rendition): string {
  const c = plan.chunk;
  if (!c) return '';
  const fps = r.fps.num / r.fps.den;
  const first = Math.round(c.skipSecs * fps);
  const end = c.keepSecs === undefined ? '' : `:end_frame=${first + Math.round(c.keepSecs * fps)}`;
  return `:start_time=0,trim=start_frame=${first}${end},setpts=PTS-STARTPTS`;
}

/**
 * One rendition's encode and where it goes. The audio it carries is the input's tracks when
 * a format takes them muxed in; each tee target picks what it keeps (the TS playlist the one
 * track, the MP4 every track, the fMP4 playlist the video alone).
 */
function renditionArgs(plan: CommandPlan, formats: readonly OutputFormat[], r: Rendition, i: number): string[] {
  const t = segmentTiming(plan.segmentSecs, r);
  const tracks = formats.some((f) => f.muxesAudio?.(plan)) ? plan.probe.audioTracks : [];
  const args = ['-map', `[v${i}]`];
  for (const a of tracks) args.push('-map', `0:a:${a.index}`);
  // GPS and other phone metadata stay behind: outputs carry no global or stream tags.
  args.push('-map_metadata', '-1', '-map_chapters', '-1', '-threads', String(plan.threads));
  args.push(...videoCodecArgs(r, { preset: plan.preset, frames: t.frames, hdrSource: plan.probe.video?.hdr ?? false }));
  args.push(...keyframeArgs(r, t));
  if (tracks.length > 0) args.push(...audioCodecArgs(plan), ...trackLabels(tracks));
  const targets = formats.flatMap((f) => (f.videoTarget ? [f.videoTarget(plan, r, t.cutAt)] : []));
  // The tee muxer feeds MP4 (needs codec headers up front) and TS alike; TS repeats them itself.
  args.push('-flags', '+global_header', '-f', 'tee', targets.join('|'));
  return args;
}

/**
 * One audio track encoded once for every target that takes it alone: the HLS trees that list
 * it in their audio group, and an audio-only input's `.m4a` (outputs/mp4.ts).
 */
function audioGroupArgs(plan: CommandPlan, formats: readonly OutputFormat[], track: AudioTrack): string[] {
  const cutAt = plan.segmentSecs - AAC_FRAME_SECS;
  const targets = formats.flatMap((f) => f.audioTarget?.(plan, track, cutAt) ?? []);
  if (targets.length === 0) return [];
  return [
    '-map',
    audioSource(plan, track),
    '-map_metadata',
    '-1',
    ...audioCodecArgs(plan),
    ...trackLabels([track]),
    '-flags',
    '+global_header',
    '-f',
    'tee',
    targets.join('|'),
  ];
}
