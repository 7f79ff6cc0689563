import { open } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { BufferPool } from '../s3-multipart.ts';
import type { ByteRange } from './types.ts';

// A file sent as an HTTP body through buffers that are used again. A file stream allocates a
// fresh buffer per chunk, external memory to V8, which then marks the service's whole heap
// (55 MB: SDKs, schemas, the database) again and again: a segment cost /media 16-18 ms of CPU
// against a bare createReadStream server's 4 (bench/serve.ts), 4.5-11 ms even with the GC
// setting of lib/gc-tuning.ts, 3-4 ms this way. A buffer goes back to the pool only once
// `out` has handed its bytes to the kernel (the write's callback).

const CHUNK_BYTES = 64 * 1024;
// Two chunks per answer, so the next is read while the last is being written. Kept between
// answers: one pair per answer in flight, the rest are left to the collector.
const buffers = new BufferPool(2 * CHUNK_BYTES, 64);

/** Writes `range` of `file` into `out` (not ended); rejects when `out` closes first or the file ends early. */
export async function writeFileRange(file: string, range: ByteRange, out: Writable): Promise<void> {
  const fh = await open(file, 'r');
  try {
    await buffers.with(async (pair) => {
      const halves = [pair.subarray(0, CHUNK_BYTES), pair.subarray(CHUNK_BYTES)];
      // A half is read into again only after its last write's callback: `sending` is awaited
      // before the next write starts, and the halves alternate.
      let sending: Promise<void> = Promise.resolve();
      try {
        for (let pos = range.start, i = 0; pos <= range.end; i++) {
          const half = halves[i % 2] ?? pair;
          const { bytesRead } = await fh.read(half, 0, Math.min(half.length, range.end - pos + 1), pos);
          if (bytesRead === 0) throw new Error(`${file} ended at byte ${pos}, before ${range.end + 1}`);
          await sending;
          sending = written(out, half.subarray(0, bytesRead));
          // Handled when awaited; a failure meanwhile must not count as unhandled.
          sending.catch(() => {});
          pos += bytesRead;
        }
        await sending;
      } finally {
        // Not back to the pool while `out` may still hold a half.
        await sending.catch(() => {});
      }
    });
  } finally {
    await fh.close();
  }
}

/** Resolves once `out` is done with `chunk` (its write callback); rejects if `out` closes first. */
function written(out: Writable, chunk: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    if (out.destroyed) return reject(new Error('the answer was closed'));
    const onClose = (): void => reject(new Error('the answer was closed'));
    out.once('close', onClose);
    out.write(chunk, (err) => {
      out.removeListener('close', onClose);
      if (err) reject(err);
      else resolve();
    });
  });
}
