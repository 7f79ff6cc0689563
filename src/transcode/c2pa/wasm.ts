import { readFileSync, openSync, readSync, closeSync, fstatSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as c2pa from '@contentauth/c2pa-wasm';

// c2pa-wasm is built for browsers: it is initialised from the wasm bytes and reads a `Blob`
// synchronously through `FileReaderSync`, which Node lacks. We hand it a file-backed
// stand-in for Blob (it only ever calls `size`, `slice` and `readAsArrayBuffer`) so a
// rendition is read from disk in the slices the engine asks for, never loaded whole.

let ready = false;

type ReadAt = (buf: Uint8Array, position: number) => void;

/** A read-only window onto a file (or bytes) that reads synchronously; what c2pa-wasm sees as a Blob. */
export class SyncBlob {
  readonly start: number;
  readonly size: number;
  readonly type = '';
  readonly #readAt: ReadAt;
  constructor(readAt: ReadAt, start: number, size: number) {
    this.#readAt = readAt;
    this.start = start;
    this.size = size;
  }
  slice(start = 0, end = this.size): SyncBlob {
    const clamp = (n: number) => Math.max(0, Math.min(this.size, n < 0 ? this.size + n : n));
    const s = clamp(start);
    return new SyncBlob(this.#readAt, this.start + s, Math.max(0, clamp(end) - s));
  }
  readAll(): ArrayBuffer {
    const buf = new Uint8Array(this.size);
    this.#readAt(buf, this.start);
    return buf.buffer;
  }
}

class FileReaderSyncPolyfill {
  readAsArrayBuffer(blob: unknown): ArrayBuffer {
    if (!(blob instanceof SyncBlob))
      throw new TypeError('FileReaderSync polyfill: pass a SyncBlob (fileBlob or bytesBlob), not a Blob');
    return blob.readAll();
  }
}

/** Loads the engine once per process. */
export function engine(): typeof c2pa {
  if (!ready) {
    const g = globalThis as { FileReaderSync?: unknown };
    g.FileReaderSync ??= FileReaderSyncPolyfill;
    const require = createRequire(import.meta.url);
    c2pa.initSync({ module: readFileSync(require.resolve('@contentauth/c2pa-wasm/c2pa.wasm')) });
    ready = true;
  }
  return c2pa;
}

// The engine's typings say Blob; structurally it needs only what SyncBlob has (size, slice
// and our FileReaderSync), hence the one cast at this boundary.
const asBlob = (b: SyncBlob) => b as unknown as Blob;

/** Opens `path` as a Blob the engine can read; close it with the returned function. */
export function fileBlob(path: string): { blob: Blob; close: () => void } {
  const fd = openSync(path, 'r');
  const readAt: ReadAt = (buf, position) => {
    for (let off = 0; off < buf.length; ) {
      const n = readSync(fd, buf, off, buf.length - off, position + off);
      if (n === 0) throw new Error('file shrank while it was being read');
      off += n;
    }
  };
  return { blob: asBlob(new SyncBlob(readAt, 0, fstatSync(fd).size)), close: () => closeSync(fd) };
}

/** Bytes in memory as a Blob the engine can read. */
export function bytesBlob(bytes: Uint8Array): Blob {
  return asBlob(
    new SyncBlob((buf, position) => buf.set(bytes.subarray(position, position + buf.length)), 0, bytes.length),
  );
}
