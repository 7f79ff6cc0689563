import { open } from 'node:fs/promises';
import { InternalError } from '../../lib/errors.ts';
import { topLevelBoxes } from '../streamed-mp4.ts';

// A chunk's fMP4 segments are written by ffmpeg as if they began the video (so
// their init segment is the single run's, edit list included); their place in the whole is
// set here: each fragment's decode time (tfdt, ISO/IEC 14496-12 8.8.12) moves by the chunk's
// start and its sequence number (mfhd, 8.8.5) becomes the segment's number + 1, as the single
// run numbers them. Only the `moof` boxes are read and written back, never `mdat`.

interface Child {
  type: string;
  /** Payload start and end within the buffer. */
  start: number;
  end: number;
}

function childrenOf(buf: Buffer, start: number, end: number): Child[] {
  const out: Child[] = [];
  for (let at = start; at + 8 <= end; ) {
    const size = buf.readUInt32BE(at);
    if (size < 8 || at + size > end) throw new InternalError(`mp4: a box at ${at} overruns its parent`);
    out.push({ type: buf.toString('latin1', at + 4, at + 8), start: at + 8, end: at + size });
    at += size;
  }
  return out;
}

/** Shifts every tfdt of `file` by `ticks` (track timescale) and numbers its fragments from `sequence`. */
export async function placeFragments(file: string, o: { ticks: number; sequence: number }): Promise<void> {
  const moofs = (await topLevelBoxes(file)).filter((b) => b.type === 'moof');
  if (moofs.length === 0) throw new InternalError(`mp4: ${file} has no moof box`);
  const fh = await open(file, 'r+');
  try {
    let sequence = o.sequence;
    for (const box of moofs) {
      const buf = Buffer.alloc(box.size);
      await fh.read(buf, 0, box.size, box.start);
      for (const c of childrenOf(buf, box.header, box.size)) {
        if (c.type === 'mfhd') buf.writeUInt32BE(sequence++, c.start + 4);
        if (c.type === 'traf')
          for (const t of childrenOf(buf, c.start, c.end)) if (t.type === 'tfdt') shift(buf, t, o.ticks);
      }
      await fh.write(buf, 0, box.size, box.start);
    }
  } finally {
    await fh.close();
  }
}

/** tfdt version 1 holds 64 bits, version 0 holds 32 (and must still fit). */
function shift(buf: Buffer, tfdt: Child, ticks: number): void {
  const at = tfdt.start + 4;
  if (buf.readUInt8(tfdt.start) === 1) {
    buf.writeBigUInt64BE(buf.readBigUInt64BE(at) + BigInt(ticks), at);
    return;
  }
  const moved = buf.readUInt32BE(at) + ticks;
  if (moved > 0xffffffff) throw new InternalError('mp4: a 32-bit tfdt cannot hold the chunk start');
  buf.writeUInt32BE(moved, at);
}
