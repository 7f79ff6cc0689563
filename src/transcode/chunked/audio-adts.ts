import { readFile, writeFile } from 'node:fs/promises';
import { InternalError } from '../../lib/errors.ts';

// An audio piece keeps whole AAC packets of its own encode, chosen by their index: the ADTS
// stream ffmpeg writes holds one frame per packet, each with its length in its header
// (ISO/IEC 13818-7 6.2, frame_length: 13 bits from byte 3), and no timestamps, so dropping
// packets is cutting bytes, and the kept ones are muxed on by copy (command.ts audioPiece).

/** Each ADTS frame's [start, end) in `buf`. */
export function adtsFrames(buf: Buffer): [number, number][] {
  const frames: [number, number][] = [];
  for (let at = 0; at < buf.length; ) {
    // Every frame begins with the 12-bit syncword 0xFFF.
    if (at + 7 > buf.length || buf[at] !== 0xff || ((buf[at + 1] ?? 0) & 0xf0) !== 0xf0)
      throw new InternalError(`adts: no frame header at byte ${at}`);
    const length = (((buf[at + 3] ?? 0) & 0x03) << 11) | ((buf[at + 4] ?? 0) << 3) | ((buf[at + 5] ?? 0) >> 5);
    if (length < 7 || at + length > buf.length)
      throw new InternalError(`adts: a frame at byte ${at} overruns the file`);
    frames.push([at, at + length]);
    at += length;
  }
  return frames;
}

/**
 * Writes the frames `first` to `first + count` (to the end when `count` is undefined) of the
 * ADTS file `from` to `to`; fails when the encode gave fewer than asked.
 */
export async function keepFrames(
  from: string,
  to: string,
  o: { first: number; count: number | undefined },
): Promise<void> {
  const buf = await readFile(from);
  const frames = adtsFrames(buf);
  const end = o.count === undefined ? frames.length : o.first + o.count;
  if (end > frames.length || o.first >= end)
    throw new InternalError(`audio piece: its encode gave ${frames.length} packets, not the ${end} it keeps from`);
  const kept = frames.slice(o.first, end);
  await writeFile(to, buf.subarray(kept[0]?.[0] ?? 0, kept.at(-1)?.[1] ?? 0));
}
