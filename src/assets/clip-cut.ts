import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import { UnsupportedMediaError } from '../lib/errors.ts';
import { type MediaInfo, probe } from '../transcode/index.ts';
// transcode/'s child-process runner (tied to the worker, killed on abort) and its reader of
// ffmpeg's -progress: not on transcode/index.ts yet, and second ones here would be copies.
import { FFMPEG_QUIET, inputArgs, type InputOrigin, ProgressParser, runProcess } from '../transcode/index.ts';
import { audioArgs, copyArgs, encodeArgs, muxArgs, X264_PIX_FMTS } from './clip-commands.ts';
import { type ClipPart, type ClipPlan, planClip, type SourceFrame } from './clip-plan.ts';

// Cuts [start, end) of a source into an MP4, frame-accurate at both ends (issue #28).
//
// The smart cut, for H.264 in a pixel format libx264 writes: the frames before the first
// keyframe in the range and those after the last whole GOP are encoded again (libx264, near
// lossless), the whole GOPs between are copied as they are, and the parts are joined. Parts are
// MPEG-TS (Annex B), which repeats SPS/PPS before each keyframe, so the decoder follows the
// change from the encoded parts' parameters to the source's; the concat demuxer's `duration`
// lines place each part at its source time. The result is checked (its frame count, its frame
// times, its rotation) and, should any differ, the range is encoded whole instead.
//
// Every other codec (HEVC, whose phone files may use open GOPs, VP8/VP9/AV1, which MPEG-TS does
// not carry) is encoded whole: one libx264 part of the range, rotated upright by ffmpeg. Audio
// is always encoded again (AAC), from the clip's first frame for the clip's length: copied AAC
// could only be cut at its own 21 ms frames.

export type CutSettings = Pick<
  Config,
  'ffmpegPath' | 'ffprobePath' | 'x264Preset' | 'ffmpegThreads' | 'transcodeTimeoutMs'
>;

export interface CutJob {
  /** The source, a local file, and what the probe said of it. */
  input: string;
  media: MediaInfo;
  /** Seconds from the start of the source. */
  range: { start: number; end: number };
  /** The MP4 to write. */
  output: string;
  scratchDir: string;
  signal: AbortSignal;
  progress(fraction: number): void;
  log?: Logger | undefined;
}

export interface CutResult {
  /** `smart`: encoded ends, copied GOPs; `encode`: the whole range encoded; `audio`: no video. */
  method: 'smart' | 'encode' | 'audio';
  /** Seconds of the clip, and its first frame's time in the source. */
  duration: number;
  start: number;
  frames: number;
}

const PACKETS = ['-select_streams', 'v:0', '-show_entries', 'packet=pts_time,flags', '-of', 'compact=p=0'];

/** A smart cut that did not come out as planned (clip-cut's own: the caller encodes the whole range). */
class CutMismatch extends Error {}

type Video = NonNullable<MediaInfo['video']>;

/** What the cut needs beyond the probe: where the file's clock starts, and the video's colours. */
interface StreamFacts {
  startTime: number;
  colors: string[];
}

export async function cutClip(s: CutSettings, job: CutJob): Promise<CutResult> {
  const video = job.media.video;
  if (!video) {
    const { start, end } = job.range;
    const duration = Math.min(end, job.media.duration || end) - start;
    await ffmpeg(s, job, audioArgs({ input: job.input, media: job.media, start, duration, file: job.output }));
    return { method: 'audio', duration, start, frames: 0 };
  }
  const facts = await streamFacts(s, job);
  const copyable = video.codec === 'h264' && X264_PIX_FMTS.has(video.pixFmt);
  const frames = await listFrames(s, job, { startTime: facts.startTime, decode: video.codec !== 'h264' });
  if (frames.length === 0)
    throw new UnsupportedMediaError('no frame of the video could be read around the range: the file may be damaged');
  const smart = planClip(frames, job.range, copyable);
  if (smart.parts.some((p) => p.how === 'copy')) {
    const problem = await smartCut(s, job, { plan: smart, facts, frames, video });
    if (!problem) return { method: 'smart', duration: smart.duration, start: smart.start, frames: smart.frames };
    job.log?.warn({ problem }, 'the smart cut came out wrong; encoding the whole range instead');
  }
  const whole = planClip(frames, job.range, false);
  await joinParts(s, job, { plan: whole, facts, video, upright: true });
  return { method: 'encode', duration: whole.duration, start: whole.start, frames: whole.frames };
}

/** The smart cut, checked; what went wrong when it did (the caller encodes the whole range then). */
async function smartCut(
  s: CutSettings,
  job: CutJob,
  o: { plan: ClipPlan; facts: StreamFacts; frames: SourceFrame[]; video: Video },
): Promise<string | undefined> {
  try {
    await joinParts(s, job, { ...o, upright: false });
  } catch (err) {
    // ffmpeg refusing to join the parts is the smart cut's failure, not the source's.
    if (err instanceof CutMismatch || err instanceof UnsupportedMediaError) return err.message;
    throw err;
  }
  return checkCut(s, job, { plan: o.plan, frames: o.frames, rotation: o.video.rotation });
}

/** The parts, each into its own MPEG-TS, then joined with the audio into the MP4. */
async function joinParts(
  s: CutSettings,
  job: CutJob,
  o: { plan: ClipPlan; facts: StreamFacts; video: Video; upright: boolean },
): Promise<void> {
  const { plan, video } = o;
  const encode = (e: { part: ClipPart; file: string }) =>
    encodeArgs({
      ...e,
      input: job.input,
      video,
      colors: o.facts.colors,
      upright: o.upright,
      preset: s.x264Preset,
      threads: s.ffmpegThreads,
    });
  const steps = plan.parts.length + 2;
  const list: string[] = ['ffconcat version 1.0'];
  for (const [i, p] of plan.parts.entries()) {
    const file = path.join(job.scratchDir, `clip-part-${i}.ts`);
    const args = p.how === 'copy' ? copyArgs({ input: job.input, part: p, file }) : encode({ part: p, file });
    await ffmpeg(s, job, args, { seconds: p.duration, progress: (f) => job.progress((i + f) / steps) });
    if (p.how === 'copy') await checkCopiedPart(s, job, { file, part: p });
    list.push(`file '${file.replaceAll("'", "'\\''")}'`, `duration ${p.duration.toFixed(6)}`);
    job.progress((i + 1) / steps);
  }
  const concat = path.join(job.scratchDir, 'clip-parts.ffconcat');
  await writeFile(concat, `${list.join('\n')}\n`);
  const audio = job.media.audioTracks.length > 0 ? path.join(job.scratchDir, 'clip-audio.m4a') : undefined;
  if (audio) await ffmpeg(s, job, audioArgs({ ...job, start: plan.start, duration: plan.duration, file: audio }));
  job.progress((steps - 1) / steps);
  const rotation = o.upright ? 0 : video.rotation;
  const mux = (lastDuration: number) =>
    ffmpeg(s, job, muxArgs({ concat, audio, rotation, frames: plan.frames, lastDuration, output: job.output }));
  // The last frame shows up to the clip's end. A copied GOP's B-frames follow it in decode
  // order, so the MP4's end is measured once and the last packet's duration set again when off.
  const shown = plan.duration - Math.max(0, plan.lastFrame - plan.start);
  await mux(shown);
  const off = plan.duration - ((await videoDuration(s, job)) ?? plan.duration);
  if (Math.abs(off) > 0.0005) await mux(shown + off);
}

/** Seconds of the video of the clip written, by ffprobe (undefined when it says none). */
async function videoDuration(s: CutSettings, job: CutJob): Promise<number | undefined> {
  const out = await ffprobe(
    s,
    job,
    ['-select_streams', 'v:0', '-show_entries', 'stream=duration', '-of', 'csv=p=0'],
    job.output,
  );
  const seconds = Number(out.trim());
  return Number.isFinite(seconds) ? seconds : undefined;
}

/**
 * Runs ffmpeg, reporting the share of `seconds` it has written. A failure is the source's (it
 * probed, but ffmpeg cannot cut it): not retried.
 */
async function ffmpeg(
  s: CutSettings,
  job: CutJob,
  args: string[],
  o?: { seconds: number; progress(fraction: number): void },
): Promise<void> {
  const parser = o && new ProgressParser((t) => o.seconds > 0 && o.progress(Math.min(1, t / o.seconds)));
  const res = await runProcess(s.ffmpegPath, parser ? ['-progress', 'pipe:1', ...args] : args, {
    signal: job.signal,
    timeoutMs: s.transcodeTimeoutMs,
    ...(parser ? { onStdout: (c: Buffer) => parser.push(c) } : {}),
  });
  if (res.code !== 0) throw new UnsupportedMediaError(`the clip could not be cut${lastLine(res.stderrTail)}`);
}

/** ffprobe's answer on `file`, the job's input (a user's file) or one the cut wrote. */
async function ffprobe(s: CutSettings, job: CutJob, args: string[], file: string): Promise<string> {
  const origin: InputOrigin = file === job.input ? 'user' : 'ours';
  const res = await runProcess(s.ffprobePath, ['-v', 'error', ...args, ...inputArgs(file, origin)], {
    signal: job.signal,
    timeoutMs: 600_000,
    collectStdout: true,
  });
  if (res.code !== 0) throw new UnsupportedMediaError(`the source could not be read${lastLine(res.stderrTail)}`);
  return res.stdout;
}

function lastLine(stderr: string): string {
  const line = stderr.trim().split('\n').at(-1)?.trim();
  return line ? ` (ffmpeg: ${line.slice(0, 200)})` : '';
}

/** Where the file's clock starts (ffmpeg's -ss counts from there) and the colour tags to keep. */
async function streamFacts(s: CutSettings, job: CutJob): Promise<StreamFacts> {
  const out = await ffprobe(
    s,
    job,
    [
      '-select_streams',
      'v:0',
      '-show_entries',
      'format=start_time:stream=color_range,color_space,color_transfer,color_primaries',
      '-of',
      'json',
    ],
    job.input,
  );
  const json = JSON.parse(out) as { format?: { start_time?: string }; streams?: Record<string, string>[] };
  const v = json.streams?.[0] ?? {};
  const colors: string[] = [];
  const tags: [string, string | undefined][] = [
    ['-color_range', v.color_range],
    ['-colorspace', v.color_space],
    ['-color_trc', v.color_transfer],
    ['-color_primaries', v.color_primaries],
  ];
  for (const [flag, value] of tags)
    if (value && value !== 'unknown' && /^[a-z0-9-]+$/.test(value)) colors.push(flag, value);
  const start = Number(json.format?.start_time);
  return { startTime: Number.isFinite(start) ? start : 0, colors };
}

/**
 * The video frames around the range, in presentation order, their times from the file's start.
 * For H.264 a demux of the range alone (ffprobe seeks to the keyframe before it): a packet is a
 * frame. Other codecs are decoded over the range: a VP8/VP9 packet may hold a frame never shown.
 */
async function listFrames(
  s: CutSettings,
  job: CutJob,
  o: { startTime: number; decode: boolean },
): Promise<SourceFrame[]> {
  const from = Math.max(0, o.startTime + job.range.start - 1);
  const to = o.startTime + job.range.end + 1;
  const entries = o.decode ? ['-show_entries', 'frame=best_effort_timestamp_time,key_frame'] : PACKETS.slice(2, 4);
  const out = await ffprobe(
    s,
    job,
    [
      '-select_streams',
      'v:0',
      '-read_intervals',
      `${from.toFixed(6)}%${to.toFixed(6)}`,
      ...entries,
      '-of',
      'compact=p=0',
    ],
    job.input,
  );
  return framesOf(out, o.startTime);
}

/**
 * ffprobe's packets (`pts_time=1.3|flags=K_`) or decoded frames (`key_frame=1|best_effort_timestamp_time=1.3`)
 * as frames; those without a time, and packets marked discard, left out.
 */
export function framesOf(compact: string, startTime: number): SourceFrame[] {
  const byTime = new Map<number, SourceFrame>();
  for (const line of compact.split('\n')) {
    const fields = Object.fromEntries(line.split('|').map((kv) => kv.split('=') as [string, string]));
    const time = fields.pts_time ?? fields.best_effort_timestamp_time;
    const t = Number(time);
    const flags = fields.flags ?? '';
    if (time === undefined || !Number.isFinite(t) || flags.includes('D')) continue;
    const rel = Math.round((t - startTime) * 1e6) / 1e6;
    byTime.set(rel, { t: rel, key: flags.includes('K') || fields.key_frame === '1' });
  }
  return [...byTime.values()].sort((a, b) => a.t - b.t);
}

/**
 * A copied part must be the GOPs planned: as many frames, and its first picture the source's at
 * the part's time, decoded both ways. A demuxer that seeks by bytes (MPEG-TS) may land on
 * another keyframe, and an open GOP's leading frames would need the GOP before.
 */
async function checkCopiedPart(s: CutSettings, job: CutJob, o: { file: string; part: ClipPart }): Promise<void> {
  const frames = framesOf(await ffprobe(s, job, PACKETS, o.file), 0);
  if (frames.length !== o.part.frames || !frames[0]?.key)
    throw new CutMismatch(`the copied GOPs hold ${frames.length} frames, not ${o.part.frames}`);
  const [copied, source] = await Promise.all([
    firstPicture(s, job, { file: o.file, seek: 0 }),
    firstPicture(s, job, { file: job.input, seek: Math.max(0, o.part.from - 0.0005) }),
  ]);
  if (copied !== source)
    throw new CutMismatch(`the copied GOPs do not start on the source's frame at ${o.part.from} s`);
}

/** The MD5 of the first picture decoded from `seek` on (ffmpeg drops what shows earlier), as coded. */
async function firstPicture(s: CutSettings, job: CutJob, o: { file: string; seek: number }): Promise<string> {
  const input = inputArgs(o.file, o.file === job.input ? 'user' : 'ours');
  const args = [...FFMPEG_QUIET, '-ss', o.seek.toFixed(6), '-noautorotate', ...input, '-map', '0:v:0'];
  const res = await runProcess(s.ffmpegPath, [...args, '-frames:v', '1', '-f', 'md5', '-'], {
    signal: job.signal,
    timeoutMs: 600_000,
    collectStdout: true,
  });
  if (res.code !== 0) throw new CutMismatch(`a frame could not be decoded${lastLine(res.stderrTail)}`);
  return res.stdout.trim();
}

/**
 * Whether the smart cut holds the planned frames at the source's times (to a millisecond, from
 * the clip's first frame) with the source's rotation; undefined when it does, else what differs.
 */
async function checkCut(
  s: CutSettings,
  job: CutJob,
  o: { plan: ClipPlan; frames: SourceFrame[]; rotation: number },
): Promise<string | undefined> {
  const made = framesOf(await ffprobe(s, job, PACKETS, job.output), 0);
  const first = o.frames.findIndex((f) => f.t === o.plan.firstFrame);
  // Each frame at its source time from the clip's start (a first frame cut short at 0).
  const want = o.frames.slice(first, first + o.plan.frames).map((f) => Math.max(0, f.t - o.plan.start));
  if (made.length !== want.length) return `${made.length} frames, not ${want.length}`;
  const t0 = made[0]?.t ?? 0;
  const off = made.findIndex((f, i) => Math.abs(f.t - t0 - (want[i] ?? 0)) > 0.001);
  if (off >= 0) return `frame ${off} is at ${made[off]?.t}, not ${want[off]}`;
  const rotation = (await probe(job.output, { ffprobePath: s.ffprobePath, signal: job.signal })).video?.rotation ?? 0;
  if (rotation !== o.rotation) return `rotation ${rotation}, not ${o.rotation}`;
  return undefined;
}
