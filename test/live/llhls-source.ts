import { type ChildProcessByStdio, execFile, spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { after } from 'node:test';
import { promisify } from 'node:util';
import { frameCodeFilter } from '../helpers/live.ts';

// The fragmented MP4 the live ladder's ffmpeg writes (one rendition: H.264 + AAC, a keyframe
// each second, fragments of 250 ms), made by real ffmpeg for the LL-HLS packager's tests.

const run = promisify(execFile);

export const PART_US = 250_000;

export interface LiveFmp4Options {
  /** Draws the frame number into the picture (test/helpers/live.ts), counting from this. */
  frameCodeFrom?: number;
  /** The tone alone (-vn): every part is independent. */
  audioOnly?: boolean;
}

/** ffmpeg's arguments for `secs` of a 320x240 30 fps source with a tone, as fMP4 on stdout. */
function fmp4Args(o: { secs: number; realtime: boolean } & LiveFmp4Options): string[] {
  return [
    ...['-hide_banner', '-loglevel', 'error', '-nostdin'],
    ...(o.realtime ? ['-re'] : []),
    ...['-f', 'lavfi', '-i', `testsrc2=size=320x240:rate=30:duration=${o.secs}`],
    ...(o.realtime ? ['-re'] : []),
    ...['-f', 'lavfi', '-i', `sine=duration=${o.secs}`],
    ...(o.frameCodeFrom === undefined ? [] : ['-vf', frameCodeFilter(320, 240, o.frameCodeFrom)]),
    ...(o.audioOnly ? ['-vn'] : []),
    ...['-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-g', '30', '-sc_threshold', '0'],
    ...['-c:a', 'aac', '-f', 'mp4', '-movflags', 'empty_moov+default_base_moof+frag_keyframe'],
    ...['-frag_duration', String(PART_US), 'pipe:1'],
  ];
}

const files = new Map<string, Promise<Buffer>>();

/** The whole fMP4 of `secs` seconds, made once per test file. */
export function fmp4File(secs: number, o: Pick<LiveFmp4Options, 'audioOnly'> = {}): Promise<Buffer> {
  const key = `${secs}${o.audioOnly ? ' audio' : ''}`;
  let file = files.get(key);
  if (file === undefined) {
    const args = fmp4Args({ secs, realtime: false, ...o });
    file = run('ffmpeg', args, { encoding: 'buffer', maxBuffer: 64 << 20 }).then((r) => r.stdout);
    files.set(key, file);
  }
  return file;
}

/** ffmpeg writing `secs` seconds in real time (-re); killed when the test file ends if still running. */
export function liveFmp4(secs: number, o: LiveFmp4Options = {}): ChildProcessByStdio<null, Readable, Readable> {
  const child = spawn('ffmpeg', fmp4Args({ secs, realtime: true, ...o }), { stdio: ['ignore', 'pipe', 'pipe'] });
  after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return child;
}

/** ffprobe's reading of a file: its streams' codecs and the number of video frames. */
export async function probe(path: string): Promise<{ codecs: string[]; videoFrames: number }> {
  const { stdout } = await run('ffprobe', [
    ...['-v', 'error', '-count_frames', '-show_entries', 'stream=codec_name,nb_read_frames', '-of', 'json', path],
  ]);
  const streams = (JSON.parse(stdout) as { streams: { codec_name: string; nb_read_frames?: string }[] }).streams;
  const video = streams.find((s) => s.codec_name === 'h264');
  return { codecs: streams.map((s) => s.codec_name), videoFrames: Number(video?.nb_read_frames ?? 0) };
}

/** The top-level boxes of a whole file (sizes are 32-bit in ffmpeg's output). */
export function topLevelBoxes(file: Buffer): { type: string; bytes: Buffer }[] {
  const boxes: { type: string; bytes: Buffer }[] = [];
  for (let at = 0; at < file.length; ) {
    const size = file.readUInt32BE(at);
    boxes.push({ type: file.toString('latin1', at + 4, at + 8), bytes: file.subarray(at, at + size) });
    at += size;
  }
  return boxes;
}
