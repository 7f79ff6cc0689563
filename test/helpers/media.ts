import { execFile } from 'node:child_process';
import { rename } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { cachedMedia } from './media-cache.ts';

const run = promisify(execFile);

/** The shared real-world samples, found from this file's place in the repo (never copied in). */
export const SAMPLES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../shared/samples');
export const sample = (name: string): string => path.join(SAMPLES, name);

export interface ClipOptions {
  width: number;
  height: number;
  seconds: number;
  fps?: string;
  audio?: boolean;
  /** Display rotation written into the MP4 (a phone's portrait clip). */
  rotate?: 90 | 180 | 270;
}

/**
 * A test clip from ffmpeg's lavfi sources (testsrc2 picture, 440 Hz sine), made once per run
 * (media-cache.ts) so several test files share one encode.
 */
export function makeClip(o: ClipOptions): Promise<string> {
  const fps = o.fps ?? '30';
  const name = `clip-${o.width}x${o.height}-${o.seconds}s-${fps.replace('/', '_')}-${o.audio === false ? 'na' : 'a'}-r${o.rotate ?? 0}.mp4`;
  return cachedMedia(name, async (tmp) => {
    const args = ['-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=size=${o.width}x${o.height}:rate=${fps}`];
    if (o.audio !== false) args.push('-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000');
    args.push('-t', String(o.seconds), '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p');
    if (o.audio !== false) args.push('-c:a', 'aac', '-b:a', '96k');
    args.push(tmp);
    await run('ffmpeg', args);
    if (o.rotate) await rotate(tmp, o.rotate);
  });
}

/**
 * On a stream copy the mov muxer turns the "rotate" tag into a display matrix, as a phone
 * writes it (on an encode ffmpeg 5 drops the tag).
 */
async function rotate(file: string, degrees: number): Promise<void> {
  const turned = `${file}.rot.mp4`;
  await run('ffmpeg', ['-v', 'error', '-y', '-i', file, '-c', 'copy', '-metadata:s:v:0', `rotate=${degrees}`, turned]);
  await rename(turned, file);
}

export interface ProbedStream {
  codec_type: string;
  codec_name: string;
  width?: number;
  height?: number;
  side_data_list?: { rotation?: number }[];
}

export async function ffprobe(
  file: string,
): Promise<{ streams: ProbedStream[]; format: { duration?: string; tags?: Record<string, string> } }> {
  const { stdout } = await run('ffprobe', [
    '-v',
    'error',
    '-print_format',
    'json',
    '-show_streams',
    '-show_format',
    file,
  ]);
  return JSON.parse(stdout) as { streams: ProbedStream[]; format: { duration?: string } };
}

/** Frame `index` of `file` (in presentation order) written as the PNG `out`. */
export async function frameAt(file: string, index: number, out: string): Promise<string> {
  await run('ffmpeg', [
    ...['-v', 'error', '-y', '-i', file, '-vf', `select=eq(n\\,${index})`, '-fps_mode', 'passthrough'],
    ...['-frames:v', '1', out],
  ]);
  return out;
}

/** PSNR (dB) of two pictures of one size; ffmpeg says `inf` for identical ones. */
export async function psnr(a: string, b: string): Promise<number> {
  const { stderr } = await run('ffmpeg', ['-v', 'info', '-i', a, '-i', b, '-lavfi', 'psnr', '-f', 'null', '-']);
  const m = /average:(inf|[\d.]+)/.exec(stderr);
  if (!m?.[1]) throw new Error(`ffmpeg printed no PSNR: ${stderr.slice(-400)}`);
  return m[1] === 'inf' ? Number.POSITIVE_INFINITY : Number(m[1]);
}

/** Decodes a file or playlist end to end; resolves with ffmpeg's error output (empty when clean). */
export async function decodeErrors(file: string): Promise<string> {
  const { stderr } = await run('ffmpeg', ['-v', 'error', '-nostdin', '-i', file, '-f', 'null', '-'], {
    maxBuffer: 16 << 20,
  });
  return stderr.trim();
}

/** Whether the MP4's moov box comes before mdat (faststart): top-level boxes walked by size. */
export function moovBeforeMdat(buf: Buffer): boolean {
  let off = 0;
  while (off + 8 <= buf.length) {
    let size = buf.readUInt32BE(off);
    const type = buf.toString('latin1', off + 4, off + 8);
    if (type === 'moov') return true;
    if (type === 'mdat') return false;
    if (size === 1) size = Number(buf.readBigUInt64BE(off + 8));
    if (size < 8) return false;
    off += size;
  }
  return false;
}
