// The analysis pass of the per-title ladder (issue #31): a few short windows of the video,
// encoded at the target CRF at two sizes by one ffmpeg run: the largest rung's own size and
// half the smallest's. What the probes spend tells how hard this title is; the two sizes tell
// how its bits grow with the picture's size, so the rungs between are predicted from them.
import { InternalError } from '../../lib/errors.ts';
import { inputArgs } from '../media-input.ts';
import { value, type Rational } from '../probe.ts';
import { runProcess } from '../run.ts';

/** One sampled window of the input, in seconds. */
export interface Window {
  start: number;
  length: number;
}

/** What one probe size spent over all windows. */
export interface ProbeSize {
  width: number;
  height: number;
  /** Bits a second of the frames that are not keyframes. */
  interBitsPerSec: number;
  /** The largest keyframe (one starts each window), in bits. */
  keyframeBits: number;
  /** x264's own SSIM of the probe against its scaled input (luma), when it printed one. */
  ssim: number | undefined;
  frames: number;
}

// Windows of up to 2 s: long enough for x264's lookahead to settle past the keyframe, short
// enough that several fit. One per 20 s of video, 1 to 8: a 10 min video is judged on 16 s
// of it. At most 10% of the video is sampled, so that probing the largest rung at its own
// size costs about that share of its encode (issue #31: the analysis within 15% of the
// encode's CPU; the probe's start-up and its small size come on top). The largest rung must be probed at its own size: grain and fine
// synthetic detail vanish in a downscale (a mandelbrot pan spent 13.5x the bits at 720p that
// it spent at 360p, where natural video spends 2.5x to 2.8x), so no small probe predicts it.
const WINDOW_SECS = 2;
const SECS_PER_WINDOW = 20;
const MAX_WINDOWS = 8;
const MAX_SAMPLED_SHARE = 0.1;
/**
 * Below this a video is not analysed (its planned ladder is kept): 10% of it is under
 * 0.3 s, a few frames, too few to judge, and the bits a short clip could save are few.
 */
export const MIN_ANALYSED_SECS = 3;

/**
 * Evenly spread windows, each in the middle of its share of the `duration` seconds from
 * `from` (away from fades at the ends): the whole video, or a chunk's part of it.
 */
export function sampleWindows(duration: number, from = 0): Window[] {
  // A duration the container does not give (0) was measured before this (pipeline.ts).
  if (!(duration > 0)) return [{ start: from, length: WINDOW_SECS }];
  const count = Math.max(1, Math.min(MAX_WINDOWS, Math.round(duration / SECS_PER_WINDOW)));
  const length = Math.min(WINDOW_SECS, (duration * MAX_SAMPLED_SHARE) / count);
  const share = duration / count;
  return Array.from({ length: count }, (_, i) => ({
    start: from + Math.max(0, Math.min(duration - length, share * (i + 0.5) - length / 2)),
    length,
  }));
}

export interface ProbeOptions {
  input: string;
  ffmpegPath: string;
  windows: readonly Window[];
  /** The two probe sizes, larger first (the largest rung's, then half the smallest rung's). */
  sizes: readonly [{ width: number; height: number }, { width: number; height: number }];
  fps: Rational;
  crf: number;
  preset: string;
  signal: AbortSignal;
  timeoutMs?: number;
}

/**
 * One ffmpeg run: each window read with input seeking (decoding only what it samples), the
 * windows joined, split into the two sizes, each encoded by x264 at the target CRF with a
 * keyframe at each window's start; the packets' sizes come back on stdout (framecrc).
 * The job's own preset, not ultrafast: ultrafast spent 2.1x to 11.6x veryfast's bits on the
 * same pictures depending on content (measured on the shared samples, testsrc2, mandelbrot),
 * too loose a ratio to predict from; the probes then cost the same share of the encode as
 * the share of the video they sample.
 */
export async function probeEncode(o: ProbeOptions): Promise<[ProbeSize, ProbeSize]> {
  const args = ['-hide_banner', '-nostdin', '-nostats', '-v', 'info'];
  // Each window starts at the source's keyframe at or before its time (-noaccurate_seek) and
  // is cut by trim: nothing is decoded to be thrown away. An accurate seek decodes from that
  // keyframe to the time asked, which was 40% of the analysis' CPU on a 5 s sample with one
  // keyframe. A source with very long GOPs gets its windows earlier than asked.
  for (const w of o.windows)
    args.push('-noaccurate_seek', '-ss', w.start.toFixed(3), '-an', '-sn', '-dn', ...inputArgs(o.input));
  const fps = `fps=${o.fps.num}/${o.fps.den}`;
  const heads = o.windows.map(
    (w, i) =>
      `[${i}:v:0]trim=duration=${w.length.toFixed(3)},setpts=PTS-STARTPTS,${fps},setsar=1,format=yuv420p[w${i}]`,
  );
  const joined = `${o.windows.map((_, i) => `[w${i}]`).join('')}concat=n=${o.windows.length}:v=1:a=0,split=2[j0][j1]`;
  const scaled = o.sizes.map((s, i) => `[j${i}]scale=${s.width}:${s.height}:flags=bicubic[p${i}]`);
  const starts: number[] = [];
  let t = 0;
  for (const w of o.windows) {
    starts.push(t);
    t += w.length;
  }
  args.push('-filter_complex', [...heads, joined, ...scaled].join(';'));
  args.push('-map', '[p0]', '-map', '[p1]', '-c:v', 'libx264', '-preset', o.preset, '-crf', String(o.crf));
  // Keyframes only where windows start (the concat's joins): no scene-cut or interval ones.
  args.push('-g', '100000', '-sc_threshold', '0', '-force_key_frames', starts.map((s) => s.toFixed(3)).join(','));
  args.push('-threads', '1', '-ssim', '1', '-f', 'framecrc', 'pipe:1');
  const res = await runProcess(o.ffmpegPath, args, {
    signal: o.signal,
    timeoutMs: o.timeoutMs ?? 600_000,
    collectStdout: true,
  });
  if (res.code !== 0) throw new InternalError(`the per-title analysis failed: ${lastLine(res.stderrTail)}`);
  const ssims = [...res.stderrTail.matchAll(/SSIM Mean Y:([0-9.]+)/g)].map((m) => Number(m[1]));
  const packets = parseFramecrc(res.stdout);
  const one = (i: 0 | 1): ProbeSize => summarize(o.sizes[i], packets[i] ?? [], value(o.fps), ssims[i]);
  const sizes: [ProbeSize, ProbeSize] = [one(0), one(1)];
  if (sizes[0].frames === 0) throw new InternalError('the per-title analysis saw no frames');
  return sizes;
}

function lastLine(text: string): string {
  return text.trim().split('\n').at(-1) ?? '';
}

interface Packet {
  size: number;
  key: boolean;
}

/**
 * framecrc's lines: `stream, dts, pts, duration, size, crc[, F=0x0][, S=...]`. A keyframe's
 * flags are the default and not printed; every other packet says `F=0x0`.
 */
export function parseFramecrc(text: string): Packet[][] {
  const streams: Packet[][] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const cells = line.split(',').map((c) => c.trim());
    const stream = Number(cells[0]);
    const size = Number(cells[4]);
    if (!Number.isInteger(stream) || !Number.isFinite(size)) continue;
    const list = streams[stream] ?? [];
    streams[stream] = list;
    list.push({ size, key: !cells.some((c) => c.startsWith('F=')) });
  }
  return streams;
}

function summarize(
  size: { width: number; height: number },
  packets: readonly Packet[],
  fps: number,
  ssim: number | undefined,
): ProbeSize {
  // Seconds from the frames that came out: a window past the end of the video holds fewer.
  const seconds = packets.length / fps;
  let inter = 0;
  let keyframe = 0;
  for (const p of packets) {
    if (p.key) keyframe = Math.max(keyframe, p.size * 8);
    else inter += p.size * 8;
  }
  return {
    ...size,
    interBitsPerSec: inter / Math.max(seconds, 0.001),
    keyframeBits: keyframe,
    ssim,
    frames: packets.length,
  };
}
