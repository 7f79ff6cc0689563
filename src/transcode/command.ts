import type { Rendition } from './ladder.ts';
import { value, type ProbeResult } from './probe.ts';
import { segmentTiming, videoCodecArgs } from './encoders.ts';

export interface OutputKinds {
  hls: boolean;
  mp4: boolean;
  fmp4: boolean;
}

export interface CommandPlan {
  input: string;
  probe: ProbeResult;
  renditions: readonly Rendition[];
  kinds: OutputKinds;
  /** Requested HLS segment duration, seconds. */
  segmentSecs: number;
  preset: string;
  threads: number;
}

/** Where ffmpeg writes, relative to its working directory (the job's output folder). */
export const layout = {
  hlsDir: (r: string): string => `hls/${r}`,
  hlsPlaylist: (r: string): string => `hls/${r}/index.m3u8`,
  mp4File: (r: string): string => `mp4/${r}.mp4`,
  fmp4Dir: (r: string): string => `fmp4/${r}`,
  fmp4Playlist: (r: string): string => `fmp4/${r}/index.m3u8`,
} as const;

/**
 * The single ffmpeg command: one decode, then split into one scaled branch per rendition,
 * each encoded once and written through the tee muxer to every output kind (HLS TS, MP4,
 * fMP4), so adding MP4 next to HLS costs no second encode.
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
  args.push('-filter_complex', filterGraph(plan));
  for (const [i, r] of plan.renditions.entries()) args.push(...outputArgs(plan, r, i));
  return args;
}

/** Tone mapping to BT.709 SDR for PQ/HLG input (zscale + tonemap, the usual recipe). */
const TONEMAP =
  'zscale=t=linear:npl=100,format=gbrpf32le,zscale=p=bt709,tonemap=tonemap=hable:desat=0,zscale=t=bt709:m=bt709:r=tv';

/** Whether the renditions keep 10-bit: only when every one is HEVC (H.264 10-bit plays almost nowhere). */
function keepsHighDepth(plan: CommandPlan): boolean {
  return plan.probe.video.bitDepth > 8 && plan.renditions.every((r) => r.codec === 'hevc');
}

function filterGraph(plan: CommandPlan): string {
  const n = plan.renditions.length;
  // Rotation needs no filter here: ffmpeg's autorotate turns the decoded pictures before
  // they enter the graph, so sizes below are the upright (display) sizes.
  const pre = plan.probe.video.hdr && !keepsHighDepth(plan) ? `${TONEMAP},` : '';
  const pixFmt = keepsHighDepth(plan) ? 'yuv420p10le' : 'yuv420p';
  const heads = plan.renditions.map((_, i) => `[s${i}]`).join('');
  const branches = plan.renditions.map(
    (r, i) =>
      `[s${i}]fps=${r.fps.num}/${r.fps.den},scale=${r.width}:${r.height}:flags=bicubic,setsar=1,format=${pixFmt}[v${i}]`,
  );
  return [`[0:v:0]${pre}split=${n}${heads}`, ...branches].join(';');
}

function outputArgs(plan: CommandPlan, r: Rendition, i: number): string[] {
  const t = segmentTiming(plan.segmentSecs, r);
  const args = ['-map', `[v${i}]`];
  if (plan.probe.audio) args.push('-map', '0:a:0');
  // GPS and other phone metadata stay behind: outputs carry no global or stream tags.
  args.push('-map_metadata', '-1', '-map_chapters', '-1', '-threads', String(plan.threads));
  args.push(...videoCodecArgs(r, { preset: plan.preset, frames: t.frames, hdrSource: plan.probe.video.hdr }));
  args.push('-force_key_frames', `expr:gte(t,n_forced*${t.segment.toFixed(6)}-${(0.5 / value(r.fps)).toFixed(6)})`);
  if (plan.probe.audio) args.push('-c:a', 'aac', '-b:a', '128k', '-ac', '2', '-ar', '48000');
  // The tee muxer feeds MP4 (needs codec headers up front) and TS alike; TS repeats them itself.
  args.push('-flags', '+global_header', '-f', 'tee', teeTargets(plan, r, t.cutAt));
  return args;
}

function teeTargets(plan: CommandPlan, r: Rendition, cutAt: number): string {
  const hlsCommon = [
    `hls_time=${cutAt.toFixed(6)}`,
    'hls_list_size=0',
    'hls_playlist_type=event',
    'hls_flags=independent_segments+temp_file',
  ];
  const targets: string[] = [];
  if (plan.kinds.hls) {
    targets.push(
      `[f=hls:${[...hlsCommon, `hls_segment_filename=${layout.hlsDir(r.name)}/%d.ts`].join(':')}]${layout.hlsPlaylist(r.name)}`,
    );
  }
  if (plan.kinds.mp4) targets.push(`[f=mp4:movflags=+faststart]${layout.mp4File(r.name)}`);
  if (plan.kinds.fmp4) {
    const opts = [
      ...hlsCommon,
      'hls_segment_type=fmp4',
      'hls_fmp4_init_filename=init.mp4',
      `hls_segment_filename=${layout.fmp4Dir(r.name)}/%d.m4s`,
    ];
    targets.push(`[f=hls:${opts.join(':')}]${layout.fmp4Playlist(r.name)}`);
  }
  return targets.join('|');
}
