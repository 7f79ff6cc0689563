import { InputUnreadableError } from '../../lib/errors.ts';

// ISO BMFF (ISO/IEC 14496-12) box framing: the streaming splitter that cuts ffmpeg's
// fragmented MP4 into top-level boxes, and a walker over the child boxes of one box.

/** One whole top-level box: its four-character type and all its bytes, header included. */
export interface Box {
  type: string;
  bytes: Buffer;
}

/** A box inside another: where its payload lies in the parent's buffer. */
export interface ChildBox {
  type: string;
  /** Offset of the first payload byte (after the size, type and any 64-bit size). */
  start: number;
  /** Offset just past the box. */
  end: number;
}

/** 8 bytes of size and type, plus 8 of 64-bit size when the 32-bit size is 1 (14496-12, 4.2). */
const HEADER_BYTES = 8;
const LARGE_HEADER_BYTES = 16;

/** Cuts bytes that arrive in any chunking into whole top-level boxes. */
export class BoxSplitter {
  readonly #maxBoxBytes: number;
  #chunks: Buffer[] = [];
  #buffered = 0;
  /** Bytes consumed so far, for error messages that say where a stream broke. */
  #offset = 0;

  constructor(o: { maxBoxBytes: number }) {
    this.#maxBoxBytes = o.maxBoxBytes;
  }

  /** Takes the next bytes; returns the boxes they complete, in order. Throws on a malformed box. */
  push(chunk: Buffer): Box[] {
    if (chunk.length > 0) {
      this.#chunks.push(chunk);
      this.#buffered += chunk.length;
    }
    const boxes: Box[] = [];
    for (;;) {
      const size = this.#nextBoxSize();
      if (size === undefined || this.#buffered < size) return boxes;
      const bytes = this.#take(size);
      boxes.push({ type: bytes.toString('latin1', 4, 8), bytes });
    }
  }

  /** Forgets a partial box (the writer that sent it is gone). */
  reset(): void {
    this.#chunks = [];
    this.#buffered = 0;
  }

  /** The size of the box at the head of the buffer, once its header is in; validated. */
  #nextBoxSize(): number | undefined {
    if (this.#buffered < HEADER_BYTES) return undefined;
    const head = this.#peek(Math.min(this.#buffered, LARGE_HEADER_BYTES));
    const size32 = head.readUInt32BE(0);
    const type = head.toString('latin1', 4, 8);
    if (!/^[\x20-\x7e]{4}$/.test(type)) this.#fail(`a box type that is not four printable characters`);
    let size = size32;
    let headerBytes = HEADER_BYTES;
    if (size32 === 1) {
      if (head.length < LARGE_HEADER_BYTES) return undefined;
      size = Number(head.readBigUInt64BE(8));
      headerBytes = LARGE_HEADER_BYTES;
    } else if (size32 === 0) {
      // Size 0 means "to the end of the file": a live stream has no end to point at.
      this.#fail(`box '${type}' of size 0 (to the end of the file) in a live stream`);
    }
    if (size < headerBytes) this.#fail(`box '${type}' of ${size} bytes, shorter than its own header`);
    if (size > this.#maxBoxBytes)
      this.#fail(`box '${type}' of ${size} bytes, over the ${this.#maxBoxBytes}-byte limit`);
    return size;
  }

  #fail(what: string): never {
    throw new InputUnreadableError(`fragmented MP4 unreadable at byte ${this.#offset}: ${what}`);
  }

  /** The first `n` buffered bytes without consuming them (n <= 16: joins only the chunks that hold them). */
  #peek(n: number): Buffer {
    const first = this.#chunks[0];
    if (first !== undefined && first.length >= n) return first.subarray(0, n);
    const head: Buffer[] = [];
    let have = 0;
    for (const chunk of this.#chunks) {
      if (have >= n) break;
      head.push(chunk);
      have += chunk.length;
    }
    return Buffer.concat(head, have).subarray(0, n);
  }

  /** Consumes `n` bytes (n <= buffered) as one buffer. */
  #take(n: number): Buffer {
    const joined =
      this.#chunks.length === 1 ? (this.#chunks[0] as Buffer) : Buffer.concat(this.#chunks, this.#buffered);
    const out = joined.subarray(0, n);
    const rest = joined.subarray(n);
    this.#chunks = rest.length > 0 ? [rest] : [];
    this.#buffered = rest.length;
    this.#offset += n;
    return out;
  }
}

/** The child boxes between `start` and `end` of `buf`; throws on one that overruns its parent. */
export function* childBoxes(buf: Buffer, start: number, end: number): Generator<ChildBox> {
  let at = start;
  while (at + HEADER_BYTES <= end) {
    let size = buf.readUInt32BE(at);
    let headerBytes = HEADER_BYTES;
    if (size === 1 && at + LARGE_HEADER_BYTES <= end) {
      size = Number(buf.readBigUInt64BE(at + 8));
      headerBytes = LARGE_HEADER_BYTES;
    } else if (size === 0) {
      size = end - at;
    }
    const type = buf.toString('latin1', at + 4, at + 8);
    if (size < headerBytes || at + size > end) {
      throw new InputUnreadableError(`fragmented MP4 unreadable: box '${type}' of ${size} bytes overruns its parent`);
    }
    yield { type, start: at + headerBytes, end: at + size };
    at += size;
  }
}

/** The first child of type `type`, or undefined. */
export function findChild(buf: Buffer, parent: { start: number; end: number }, type: string): ChildBox | undefined {
  for (const child of childBoxes(buf, parent.start, parent.end)) if (child.type === type) return child;
  return undefined;
}

/** Every child of type `type`. */
export function findChildren(buf: Buffer, parent: { start: number; end: number }, type: string): ChildBox[] {
  return [...childBoxes(buf, parent.start, parent.end)].filter((c) => c.type === type);
}

/** Follows a path of box types from `parent` (the first match at each level). */
export function findPath(
  buf: Buffer,
  parent: { start: number; end: number },
  path: readonly string[],
): ChildBox | undefined {
  let at: { start: number; end: number } | undefined = parent;
  let found: ChildBox | undefined;
  for (const type of path) {
    if (at === undefined) return undefined;
    found = findChild(buf, at, type);
    at = found;
  }
  return found;
}
