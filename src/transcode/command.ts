import type { Rendition } from './ladder.ts';
import type { AudioTrack, MediaInfo, SubtitleTrack } from './probe.ts';
import { keyframeArgs, segmentTiming, videoCodecArgs } from './encoders.ts';
import { thumbnailBranches, type StoryboardPlan } from './storyboard.ts';

export interface OutputKinds {
  hls: boolean;
  mp4: boolean;
  fmp4: boolean;
}

export interface CommandPlan {
  input: string;
  probe: MediaInfo;
  /** Video renditions; none for an audio-only input. */
  renditions: readonly Rendition[];
  kinds: OutputKinds;
  /** Requested HLS segment duration, seconds. */
  segmentSecs: number;
  preset: string;
  threads: number;
  /** The storyboard and poster, one more branch of the split (none for audio-only inputs). */
  thumbnails?: StoryboardPlan | undefined;
}

/** Where ffmpeg writes, relative to its working directory (the job's output folder). */
export const layout = {
  hlsDir: (r: string): string => `hls/${r}`,
  hlsPlaylist: (r: string): string => `hls/${r}/index.m3u8`,
  mp4File: (r: string): string => `mp4/${r}.mp4`,
  /** An audio-only input's MP4 output. */
  audioMp4: 'mp4/audio.m4a',
  fmp4Dir: (r: string): string => `fmp4/${r}`,
  fmp4Playlist: (r: string): string => `fmp4/${r}/index.m3u8`,
  /** Audio rendition `i` of an HLS tree (`hls` or `fmp4`), relative to the tree. */
  audioDir: (i: number): string => `audio/${i}`,
  /** Subtitle track `i` as one WebVTT file, shared by every HLS tree that lists it. */
  subtitleFile: (i: number): string => `subtitles/${i}.vtt`,
  thumbnailsDir: 'thumbnails',
} as const;

/** The audio renditions' bitrate and format: AAC-LC stereo at 48 kHz, what every player takes. */
export const AUDIO_BITRATE = 128_000;
const AAC = ['-c:a', 'aac', '-b:a', String(AUDIO_BITRATE), '-ac', '2', '-ar', '48000'];
/** One AAC frame (1024 samples at 48 kHz): audio cuts land up to this late, so ask this early. */
const AAC_FRAME_SECS = 1024 / 48000;

/**
 * How audio is laid out. A video with one audio track keeps it muxed into each rendition of
 * the TS output and the MP4s (as players of plain HLS expect); the fMP4 (CMAF) output
 * always has audio in its own rendition group, as do TS outputs with several tracks and
 * audio-only inputs.
 */
export function audioLayout(plan: Pick<CommandPlan, 'probe' | 'renditions' | 'kinds'>): {
  tsMuxed: boolean;
  tsGroup: boolean;
  fmp4Group: boolean;
} {
  const tracks = plan.probe.audioTracks.length;
  const tsMuxed = plan.kinds.hls && tracks === 1 && plan.renditions.length > 0;
  return { tsMuxed, tsGroup: plan.kinds.hls && tracks > 0 && !tsMuxed, fmp4Group: plan.kinds.fmp4 && tracks > 0 };
}

/**
 * The single ffmpeg command: one decode, then split into one scaled branch per rendition,
 * each encoded once and written through the tee muxer to every output kind (HLS TS, MP4,
 * fMP4), so adding MP4 next to HLS costs no second encode. Each audio group track is
 * encoded once for every HLS tree that lists it; text subtitles become WebVTT files.
 */
export function buildFfmpegArgs(plan: CommandPlan): string[] {
  const args = [
    '-hide_banner',
    '-nostdin',
    '-y',
    '-v',
    'error',
    '-progress',
    'pipe:1',
    '-stats_period',
    '1',
    '-i',
    plan.input,
  ];
  const thumbs = plan.thumbnails
    ? thumbnailBranches(plan.thumbnails, { inputLabel: `s${plan.renditions.length}`, dir: layout.thumbnailsDir })
    : undefined;
  if (plan.renditions.length > 0) args.push('-filter_complex', filterGraph(plan, thumbs?.filters ?? []));
  for (const [i, r] of plan.renditions.entries()) args.push(...renditionArgs(plan, r, i));
  if (thumbs) args.push(...thumbs.outputArgs);
  for (const track of plan.probe.audioTracks) args.push(...audioGroupArgs(plan, track));
  if (plan.renditions.length === 0 && plan.kinds.mp4) args.push(...audioOnlyMp4Args(plan.probe.audioTracks));
  // Subtitles are renditions of the HLS trees (and DASH); an MP4-only job has none to list them in.
  if (plan.kinds.hls || plan.kinds.fmp4) for (const s of plan.probe.subtitles) args.push(...subtitleArgs(s));
  return args;
}

/** Tone mapping to BT.709 SDR for PQ/HLG input (zscale + tonemap, the usual recipe). */
const TONEMAP =
  'zscale=t=linear:npl=100,format=gbrpf32le,zscale=p=bt709,tonemap=tonemap=hable:desat=0,zscale=t=bt709:m=bt709:r=tv';

/** Whether the renditions keep 10-bit: only when every one is HEVC (H.264 10-bit plays almost nowhere). */
function keepsHighDepth(plan: CommandPlan): boolean {
  return (plan.probe.video?.bitDepth ?? 8) > 8 && plan.renditions.every((r) => r.codec === 'hevc');
}

/** The split into the renditions' branches, and one more for `extra` chains (the thumbnails) when given. */
function filterGraph(plan: CommandPlan, extra: readonly string[]): string {
  const n = plan.renditions.length + (extra.length > 0 ? 1 : 0);
  // Rotation needs no filter here: ffmpeg's autorotate turns the decoded pictures before
  // they enter the graph, so sizes below are the upright (display) sizes.
  const pre = plan.probe.video?.hdr && !keepsHighDepth(plan) ? `${TONEMAP},` : '';
  const pixFmt = keepsHighDepth(plan) ? 'yuv420p10le' : 'yuv420p';
  const heads = Array.from({ length: n }, (_, i) => `[s${i}]`).join('');
  const branches = plan.renditions.map(
    (r, i) =>
      `[s${i}]fps=${r.fps.num}/${r.fps.den},scale=${r.width}:${r.height}:flags=bicubic,setsar=1,format=${pixFmt}[v${i}]`,
  );
  return [`[0:v:0]${pre}split=${n}${heads}`, ...branches, ...extra].join(';');
}

/**
 * One rendition's encode and where it goes. The audio it carries (see audioLayout) is
 * picked per tee target: the TS playlist gets the one track, the MP4 every track, the
 * fMP4 playlist the video alone.
 */
function renditionArgs(plan: CommandPlan, r: Rendition, i: number): string[] {
  const t = segmentTiming(plan.segmentSecs, r);
  const { tsMuxed } = audioLayout(plan);
  const tracks = tsMuxed || plan.kinds.mp4 ? plan.probe.audioTracks : [];
  const args = ['-map', `[v${i}]`];
  for (const a of tracks) args.push('-map', `0:a:${a.index}`);
  // GPS and other phone metadata stay behind: outputs carry no global or stream tags.
  args.push('-map_metadata', '-1', '-map_chapters', '-1', '-threads', String(plan.threads));
  args.push(...videoCodecArgs(r, { preset: plan.preset, frames: t.frames, hdrSource: plan.probe.video?.hdr ?? false }));
  args.push(...keyframeArgs(r, t));
  if (tracks.length > 0) args.push(...AAC, ...trackLabels(tracks));
  // The tee muxer feeds MP4 (needs codec headers up front) and TS alike; TS repeats them itself.
  args.push('-flags', '+global_header', '-f', 'tee', renditionTargets(plan, r, { cutAt: t.cutAt, tsMuxed }));
  return args;
}

/** Language and title tags for the MP4s' audio tracks (the only tags outputs keep). */
function trackLabels(tracks: readonly AudioTrack[]): string[] {
  return tracks.flatMap((a, k) => [
    ...(a.language ? [`-metadata:s:a:${k}`, `language=${a.language}`] : []),
    `-disposition:a:${k}`,
    a.default ? 'default' : '0',
  ]);
}

function hlsOptions(cutAt: number, segmentFile: string, fmp4: boolean): string {
  const opts = [
    `hls_time=${cutAt.toFixed(6)}`,
    'hls_list_size=0',
    'hls_playlist_type=event',
    'hls_flags=independent_segments+temp_file',
  ];
  if (fmp4) opts.push('hls_segment_type=fmp4', 'hls_fmp4_init_filename=init.mp4');
  opts.push(`hls_segment_filename=${segmentFile}`);
  return opts.join(':');
}

function renditionTargets(plan: CommandPlan, r: Rendition, o: { cutAt: number; tsMuxed: boolean }): string {
  const targets: string[] = [];
  if (plan.kinds.hls) {
    const select = o.tsMuxed ? "select=\\'v,a\\':" : 'select=v:';
    targets.push(
      `[${select}f=hls:${hlsOptions(o.cutAt, `${layout.hlsDir(r.name)}/%d.ts`, false)}]${layout.hlsPlaylist(r.name)}`,
    );
  }
  if (plan.kinds.mp4) targets.push(`[f=mp4:movflags=+faststart]${layout.mp4File(r.name)}`);
  if (plan.kinds.fmp4) {
    targets.push(
      `[select=v:f=hls:${hlsOptions(o.cutAt, `${layout.fmp4Dir(r.name)}/%d.m4s`, true)}]${layout.fmp4Playlist(r.name)}`,
    );
  }
  return targets.join('|');
}

/** One audio track encoded once for the HLS trees that list it in their audio group. */
function audioGroupArgs(plan: CommandPlan, track: AudioTrack): string[] {
  const groups = audioLayout(plan);
  const cutAt = plan.segmentSecs - AAC_FRAME_SECS;
  const dir = layout.audioDir(track.index);
  const targets: string[] = [];
  if (groups.tsGroup) targets.push(`[f=hls:${hlsOptions(cutAt, `hls/${dir}/%d.ts`, false)}]hls/${dir}/index.m3u8`);
  if (groups.fmp4Group) targets.push(`[f=hls:${hlsOptions(cutAt, `fmp4/${dir}/%d.m4s`, true)}]fmp4/${dir}/index.m3u8`);
  if (targets.length === 0) return [];
  return [
    '-map',
    `0:a:${track.index}`,
    '-map_metadata',
    '-1',
    ...AAC,
    '-flags',
    '+global_header',
    '-f',
    'tee',
    targets.join('|'),
  ];
}

/** An audio-only input's MP4 output: every track in one `.m4a`. */
function audioOnlyMp4Args(tracks: readonly AudioTrack[]): string[] {
  const maps = tracks.flatMap((a) => ['-map', `0:a:${a.index}`]);
  return [...maps, '-map_metadata', '-1', ...AAC, ...trackLabels(tracks), '-movflags', '+faststart', layout.audioMp4];
}

function subtitleArgs(s: SubtitleTrack): string[] {
  return [
    '-map',
    `0:s:${s.index}`,
    '-map_metadata',
    '-1',
    '-c:s',
    'webvtt',
    '-f',
    'webvtt',
    layout.subtitleFile(s.index),
  ];
}
