import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { decodeFrameCells, FRAME_CODE_BAND, FRAME_CODE_CELLS } from './live.ts';

// Reads back the frame numbers live.ts's publisher draws into its pictures, from a media file
// (a clip, a recording, an archive's extract). The code's band is scaled to 8x8 px a cell:
// decodeFrameCells samples each cell's middle half, which the scale keeps (the latency meter's
// test reads x264 pictures back exactly this way).

const run = promisify(execFile);
const [WIDTH, HEIGHT] = [FRAME_CODE_CELLS * 8, 8];

/**
 * The frame numbers drawn into the pictures of `file`, in order; undefined for a picture whose
 * code is unreadable. `frames`: the first ones only.
 */
export async function readFrameNumbers(file: string, o: { frames?: number } = {}): Promise<(number | undefined)[]> {
  const { stdout } = await run(
    'ffmpeg',
    [
      ...['-v', 'error', '-i', file, ...(o.frames === undefined ? [] : ['-frames:v', String(o.frames)])],
      ...['-vf', `crop=iw:ih*${FRAME_CODE_BAND}:0:0,scale=${WIDTH}:${HEIGHT}`],
      ...['-f', 'rawvideo', '-pix_fmt', 'rgba', 'pipe:1'],
    ],
    { encoding: 'buffer', maxBuffer: 256 << 20 },
  );
  const size = WIDTH * HEIGHT * 4;
  return Array.from({ length: Math.floor(stdout.length / size) }, (_, i) =>
    decodeFrameCells(stdout.subarray(i * size, (i + 1) * size), WIDTH, HEIGHT),
  );
}
