// A file written from a head and byte ranges of other files, in order, in one pass: the MP4
// join's media data (outputs/mp4-join.ts). Ranges come in small pieces (half a second of one
// track) and alternate between files, so reads and writes go through blocks of a few MiB: a
// film's copy is then a few hundred system calls, not one per range.

import { open, type FileHandle } from 'node:fs/promises';
import { InternalError } from '../../lib/errors.ts';

/** `bytes` bytes of `file` from `start`. */
export interface ByteRange {
  file: string;
  start: number;
  bytes: number;
}

const BLOCK_BYTES = 4 << 20;

/** One open source and the block of it last read: ranges in it are served from memory. */
class SourceBlock {
  #buf = Buffer.alloc(0);
  #at = 0;
  #length = 0;
  readonly file: string;
  readonly fh: FileHandle;
  constructor(file: string, fh: FileHandle) {
    this.file = file;
    this.fh = fh;
  }

  async read(r: ByteRange): Promise<Buffer> {
    if (r.start < this.#at || r.start + r.bytes > this.#at + this.#length) {
      if (this.#buf.length < Math.max(BLOCK_BYTES, r.bytes)) this.#buf = Buffer.alloc(Math.max(BLOCK_BYTES, r.bytes));
      const { bytesRead } = await this.fh.read(this.#buf, 0, this.#buf.length, r.start);
      if (bytesRead < r.bytes) throw new InternalError(`mp4 join: ${this.file} ends inside its media data`);
      this.#at = r.start;
      this.#length = bytesRead;
    }
    return this.#buf.subarray(r.start - this.#at, r.start - this.#at + r.bytes);
  }
}

/** Writes `head`, then every range in order, into `output`. */
export async function writeRanges(o: {
  output: string;
  head: Buffer;
  ranges: readonly ByteRange[];
  signal?: AbortSignal | undefined;
}): Promise<void> {
  // A source is open from its first range to its last: a film's hundreds of parts are never all open.
  const lastUse = new Map<string, number>();
  for (const [i, r] of o.ranges.entries()) lastUse.set(r.file, i);
  const sources = new Map<string, SourceBlock>();
  const out = await open(o.output, 'w');
  const block = Buffer.alloc(BLOCK_BYTES);
  let filled = 0;
  const write = async (b: Buffer) => {
    if (filled + b.length > block.length) {
      await out.write(block, 0, filled);
      filled = 0;
    }
    if (b.length > block.length) await out.write(b);
    else filled += b.copy(block, filled);
  };
  try {
    await write(o.head);
    for (const [i, r] of o.ranges.entries()) {
      o.signal?.throwIfAborted();
      const source = sources.get(r.file) ?? new SourceBlock(r.file, await open(r.file, 'r'));
      sources.set(r.file, source);
      await write(await source.read(r));
      if (lastUse.get(r.file) === i) {
        sources.delete(r.file);
        await source.fh.close();
      }
    }
    await out.write(block, 0, filled);
  } finally {
    await out.close();
    for (const s of sources.values()) await s.fh.close();
  }
}
