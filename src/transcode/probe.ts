import { UnsupportedMediaError } from '../lib/errors.ts';
import { headText, inputArgs, refusedInput } from './media-input.ts';
import { runProcess } from './run.ts';

export interface Rational {
  num: number;
  den: number;
}

export interface VideoInfo {
  codec: string;
  /** As stored in the file, before rotation. */
  codedWidth: number;
  codedHeight: number;
  /** As shown by a player, after rotation: what the ladder is planned against. */
  width: number;
  height: number;
  /** Degrees clockwise a player turns the picture: 0, 90, 180 or 270. */
  rotation: number;
  fps: Rational;
  /** avg_frame_rate and r_frame_rate disagree: a screen recording, a browser capture. */
  variableFps: boolean;
  pixFmt: string;
  bitDepth: number;
  /** PQ or HLG transfer: needs tone mapping to play right as SDR H.264. */
  hdr: boolean;
  bitrate: number | undefined;
}

export interface AudioInfo {
  codec: string;
  channels: number;
  sampleRate: number;
  bitrate: number | undefined;
}

/** One audio track of the input, kept as an alternate audio rendition. */
export interface AudioTrack extends AudioInfo {
  /** Its place among the input's audio streams (ffmpeg's `0:a:N`). */
  index: number;
  /** ISO 639 code as tagged, or undefined when untagged or `und`. */
  language: string | undefined;
  title: string | undefined;
  default: boolean;
}

/** One text subtitle track of the input (bitmap subtitles cannot become WebVTT and are left out). */
export interface SubtitleTrack {
  /** Its place among the input's subtitle streams (ffmpeg's `0:s:N`). */
  index: number;
  codec: string;
  language: string | undefined;
  title: string | undefined;
  default: boolean;
  forced: boolean;
}

/** What ffprobe says of an input: a video, or audio alone. */
export interface MediaInfo {
  /** Seconds; 0 when the container does not say (some browser-made MKV/WebM). */
  duration: number;
  size: number;
  formatName: string;
  bitrate: number | undefined;
  video: VideoInfo | undefined;
  /** The first audio track (what the ladder's bitrate budget leaves room for). */
  audio: AudioInfo | undefined;
  audioTracks: AudioTrack[];
  subtitles: SubtitleTrack[];
}

/** An input with a video stream: what the ladder is planned against. */
export interface ProbeResult extends MediaInfo {
  video: VideoInfo;
}

/** Subtitle codecs ffmpeg can turn into WebVTT (text, not pictures). */
const TEXT_SUBTITLES = new Set(['subrip', 'srt', 'ass', 'ssa', 'mov_text', 'webvtt', 'text']);

interface FfStream {
  index?: number;
  codec_type?: string;
  codec_name?: string;
  width?: number;
  height?: number;
  pix_fmt?: string;
  bits_per_raw_sample?: string;
  color_transfer?: string;
  r_frame_rate?: string;
  avg_frame_rate?: string;
  bit_rate?: string;
  duration?: string;
  channels?: number;
  sample_rate?: string;
  tags?: Record<string, string>;
  side_data_list?: { rotation?: number }[];
  disposition?: { attached_pic?: number; default?: number; forced?: number };
}

interface FfProbeJson {
  streams?: FfStream[];
  format?: { format_name?: string; duration?: string; size?: string; bit_rate?: string };
}

export interface ProbeOptions {
  ffprobePath: string;
  signal: AbortSignal;
  timeoutMs?: number;
}

/** Runs ffprobe; a file it cannot read, or one with neither video nor audio, is an UnsupportedMediaError. */
export async function probe(file: string, opts: ProbeOptions): Promise<MediaInfo> {
  const args = ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', ...inputArgs(file)];
  const res = await runProcess(opts.ffprobePath, args, {
    signal: opts.signal,
    timeoutMs: opts.timeoutMs ?? 120_000,
    collectStdout: true,
  });
  let json: FfProbeJson;
  try {
    json = JSON.parse(res.stdout) as FfProbeJson;
  } catch {
    json = {};
  }
  if (res.code !== 0 || !json.format) {
    throw (
      refusedInput(res.stderrTail, await headText(file)) ??
      new UnsupportedMediaError('the input is not a video file: ffmpeg cannot read its format')
    );
  }
  return parseMedia(json);
}

/** A video input's probe; audio alone is an UnsupportedMediaError. Exported for tests. */
export function parseProbe(json: FfProbeJson): ProbeResult {
  return requireVideo(parseMedia(json));
}

/** The probe of an input that must have video (the ladder planner's input). */
export function requireVideo(media: MediaInfo): ProbeResult {
  if (!hasVideo(media)) throw new UnsupportedMediaError('the input has no video stream (it is audio only)');
  return media;
}

export function hasVideo(media: MediaInfo): media is ProbeResult {
  return media.video !== undefined;
}

/** Turns ffprobe's JSON into what the planner needs: the video, every audio and text subtitle track. */
export function parseMedia(json: FfProbeJson): MediaInfo {
  const streams = json.streams ?? [];
  // Cover art in an audio file shows up as a one-frame "video" stream.
  const v = streams.find((s) => s.codec_type === 'video' && s.disposition?.attached_pic !== 1);
  const audioTracks = streams
    .filter((s) => s.codec_type === 'audio')
    .map(audioTrack)
    .filter((a) => a.codec !== 'none');
  if (!v && audioTracks.length === 0) throw new UnsupportedMediaError('the input has no video or audio stream');
  if (v && (!v.codec_name || v.codec_name === 'none' || !v.width || !v.height)) {
    throw new UnsupportedMediaError(
      `the input's video codec${v.codec_name ? ` (${v.codec_name})` : ''} is not supported`,
    );
  }
  const format = json.format ?? {};
  const first = audioTracks[0];
  return {
    duration: num(format.duration) ?? num(v?.duration) ?? num(streams.find((s) => s.duration)?.duration) ?? 0,
    size: num(format.size) ?? 0,
    formatName: format.format_name ?? 'unknown',
    bitrate: num(format.bit_rate),
    video: v ? videoInfo(v) : undefined,
    audio: first
      ? { codec: first.codec, channels: first.channels, sampleRate: first.sampleRate, bitrate: first.bitrate }
      : undefined,
    audioTracks: withOneDefault(audioTracks),
    subtitles: subtitleTracks(streams),
  };
}

function audioTrack(s: FfStream, index: number): AudioTrack {
  return {
    index,
    codec: s.codec_name ?? 'none',
    channels: s.channels ?? 2,
    sampleRate: num(s.sample_rate) ?? 48000,
    bitrate: num(s.bit_rate),
    ...labels(s),
  };
}

function subtitleTracks(streams: FfStream[]): SubtitleTrack[] {
  return streams
    .filter((s) => s.codec_type === 'subtitle')
    .map((s, index) => ({ index, codec: s.codec_name ?? 'none', ...labels(s), forced: s.disposition?.forced === 1 }))
    .filter((s) => TEXT_SUBTITLES.has(s.codec))
    .map((s, i, all) => ({ ...s, default: s.default && all.findIndex((t) => t.default) === i }));
}

function labels(s: FfStream): { language: string | undefined; title: string | undefined; default: boolean } {
  const lang = s.tags?.language?.trim();
  return {
    language: lang && lang !== 'und' && /^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$/.test(lang) ? lang : undefined,
    title: s.tags?.title?.trim() || undefined,
    default: s.disposition?.default === 1,
  };
}

/** Players want exactly one default audio track: the first flagged one, else the first. */
function withOneDefault<T extends { default: boolean }>(tracks: T[]): T[] {
  const chosen = Math.max(
    0,
    tracks.findIndex((t) => t.default),
  );
  return tracks.map((t, i) => ({ ...t, default: i === chosen }));
}

function videoInfo(v: FfStream): VideoInfo {
  const rotation = rotationOf(v);
  const codedWidth = v.width ?? 0;
  const codedHeight = v.height ?? 0;
  const turned = rotation === 90 || rotation === 270;
  const pixFmt = v.pix_fmt ?? 'yuv420p';
  const avg = rational(v.avg_frame_rate);
  const r = rational(v.r_frame_rate);
  return {
    codec: v.codec_name ?? 'unknown',
    codedWidth,
    codedHeight,
    width: turned ? codedHeight : codedWidth,
    height: turned ? codedWidth : codedHeight,
    rotation,
    ...frameRate(avg, r),
    pixFmt,
    bitDepth: bitDepthOf(pixFmt, v.bits_per_raw_sample),
    hdr: v.color_transfer === 'smpte2084' || v.color_transfer === 'arib-std-b67',
    bitrate: num(v.bit_rate),
  };
}

/**
 * The display rotation. ffprobe gives the display matrix angle counter-clockwise
 * (-90 for a phone held upright); older files carry a clockwise `rotate` tag instead.
 */
function rotationOf(v: FfStream): number {
  const side = v.side_data_list?.find((s) => typeof s.rotation === 'number')?.rotation;
  const deg = side !== undefined ? -side : Number(v.tags?.rotate ?? 0);
  return (((Math.round(deg / 90) * 90) % 360) + 360) % 360;
}

function frameRate(avg: Rational | undefined, r: Rational | undefined): { fps: Rational; variableFps: boolean } {
  const a = avg && avg.num > 0 ? avg : undefined;
  const rr = r && r.num > 0 ? r : undefined;
  const fps = rr && (!a || Math.abs(value(rr) - value(a)) / value(a) < 0.05) ? rr : (a ?? rr ?? { num: 30, den: 1 });
  const variableFps = !!(a && rr && Math.abs(value(rr) - value(a)) / value(a) > 0.001);
  return { fps, variableFps };
}

function bitDepthOf(pixFmt: string, raw: string | undefined): number {
  const m = /p(\d+)(le|be)?$/.exec(pixFmt);
  if (m?.[1] && Number(m[1]) > 8) return Number(m[1]);
  return num(raw) ?? 8;
}

export function value(r: Rational): number {
  return r.num / r.den;
}

function rational(s: string | undefined): Rational | undefined {
  const m = s ? /^(\d+)\/(\d+)$/.exec(s) : null;
  if (!m?.[1] || !m[2] || Number(m[2]) === 0) return undefined;
  return { num: Number(m[1]), den: Number(m[2]) };
}

function num(s: string | undefined): number | undefined {
  if (s === undefined || s === 'N/A') return undefined;
  const n = Number(s);
  return Number.isFinite(n) ? n : undefined;
}
