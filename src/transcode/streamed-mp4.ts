// An MP4 uploaded while ffmpeg writes it. With +faststart, ffmpeg writes `ftyp`, a `free`
// box and `mdat` with the media data as it encodes, then (in its trailer) moves all of it up
// to put `moov` in front. The media data's bytes are the same before and after the move; only
// their offset changes. So the data goes up during the encode as multipart parts 2..n, in
// coordinates relative to the start of the `mdat` payload, and when ffmpeg has exited,
// part 1 is the finished file's head (`ftyp`, `moov`, ... up to the first part's end).
// Each early part is checked against the finished file (by SHA-256) and sent again if it
// differs: a part read while ffmpeg was moving the data is caught there. Without this, a
// 30 s 1080p ladder's three MP4s (47 MB) could only start up after ffmpeg exited.

import { open, stat } from 'node:fs/promises';
import type { FileRange, ObjectStore, PartWriter, PutOptions } from '../storage/index.ts';

interface Box {
  type: string;
  start: number;
  /** Header bytes (8, or 16 with a 64-bit size). */
  header: number;
  /** Whole box, header included; to the end of the file when the size field is 0. */
  size: number;
}

/** The top-level boxes of an MP4 (ISO/IEC 14496-12, 4.2), read from their headers only. */
export async function topLevelBoxes(file: string): Promise<Box[]> {
  const fh = await open(file, 'r');
  try {
    const { size: fileSize } = await fh.stat();
    const head = Buffer.alloc(16);
    const boxes: Box[] = [];
    for (let at = 0; at + 8 <= fileSize; ) {
      const { bytesRead } = await fh.read(head, 0, 16, at);
      if (bytesRead < 8) break;
      const small = head.readUInt32BE(0);
      const type = head.toString('latin1', 4, 8);
      const header = small === 1 ? 16 : 8;
      if (small === 1 && bytesRead < 16) break;
      const size = small === 1 ? Number(head.readBigUInt64BE(8)) : small === 0 ? fileSize - at : small;
      if (size < header) break; // not a box: the caller sees the layout is not one it knows
      boxes.push({ type, start: at, header, size });
      at += size;
    }
    return boxes;
  } finally {
    await fh.close();
  }
}

export interface StreamedMp4Options {
  parts: NonNullable<ObjectStore['parts']>;
  key: string;
  file: string;
  put: PutOptions;
}

export class StreamedMp4 {
  readonly #o: StreamedMp4Options;
  /** Media data bytes that part 1 carries after the head (the rest of it goes early). */
  readonly #first: number;
  readonly #partBytes: number;
  /** Where the `mdat` payload starts while ffmpeg writes (undefined until seen). */
  #growingStart: number | undefined;
  #unknownLayout = false;
  #writer: PartWriter | undefined;
  /** Parts 2.. sent during the encode. */
  #sent = 0;
  #busy: Promise<void> = Promise.resolve();
  #error: unknown;

  constructor(o: StreamedMp4Options) {
    this.#o = o;
    this.#first = o.parts.minBytes;
    this.#partBytes = o.parts.partBytes;
  }

  /** Parts that went up while ffmpeg was writing the file. */
  get earlyParts(): number {
    return this.#sent;
  }

  /** Sends the parts the file now holds; called every second or so while ffmpeg runs. */
  poll(onError: (err: unknown) => void): void {
    this.#busy = this.#busy
      .then(() => (this.#error === undefined ? this.#sendReady() : undefined))
      .catch((err: unknown) => {
        this.#error ??= err;
        onError(err);
      });
  }

  /**
   * After ffmpeg has exited: checks the early parts, sends the head and the rest, completes
   * the object and returns its size; undefined when nothing went early (the file is small,
   * or its layout is not one this knows), and the caller uploads the file as usual.
   */
  async finish(): Promise<number | undefined> {
    await this.#busy;
    if (this.#error !== undefined) throw this.#error;
    const writer = this.#writer;
    if (!writer) return undefined;
    try {
      const layout = await this.#finalLayout();
      if (!layout) {
        await writer.abort();
        this.#writer = undefined;
        return undefined;
      }
      await this.#sendRest(writer, layout);
      await writer.complete();
      this.#writer = undefined;
      return layout.fileSize;
    } catch (err) {
      await this.abandon();
      throw err;
    }
  }

  /** The job failed: parts already stored are freed. */
  async abandon(): Promise<void> {
    await this.#busy.catch(() => undefined);
    const writer = this.#writer;
    this.#writer = undefined;
    await writer?.abort();
  }

  async #sendReady(): Promise<void> {
    if (this.#unknownLayout) return;
    this.#growingStart ??= await this.#growingPayloadStart();
    const start = this.#growingStart;
    if (start === undefined) return;
    const { size } = await stat(this.#o.file);
    // A part goes once the file holds all of it; ffmpeg only appends to the media data.
    while (start + this.#first + (this.#sent + 1) * this.#partBytes <= size) {
      this.#writer ??= await this.#o.parts.open(this.#o.key, this.#o.put);
      await this.#writer.put(2 + this.#sent, this.#range(start, this.#sent, this.#partBytes));
      this.#sent++;
    }
  }

  /** Parts 2.. by index from 0, in a file whose media data starts at `payload`. */
  #range(payload: number, index: number, length: number): FileRange {
    return { file: this.#o.file, start: payload + this.#first + index * this.#partBytes, length };
  }

  /** ffmpeg's layout while it encodes: `ftyp`, free space, then `mdat` running to the end. */
  async #growingPayloadStart(): Promise<number | undefined> {
    const boxes: Box[] = await topLevelBoxes(this.#o.file).catch(() => []);
    const mdat = boxes.find((b) => b.type === 'mdat');
    if (!mdat) {
      // Not there yet, or a layout this does not know: the file goes up whole at the end.
      if (boxes.length >= 3 || boxes.some((b) => b.type === 'moov')) this.#unknownLayout = true;
      return undefined;
    }
    const before = boxes.slice(0, boxes.indexOf(mdat)).map((b) => b.type);
    if (before[0] !== 'ftyp' || !before.slice(1).every((t) => t === 'free' || t === 'wide')) {
      this.#unknownLayout = true;
      return undefined;
    }
    return mdat.start + mdat.header;
  }

  /** The finished file: `moov` before the one `mdat`, which is last. */
  async #finalLayout(): Promise<{ payload: number; payloadBytes: number; fileSize: number } | undefined> {
    const boxes = await topLevelBoxes(this.#o.file);
    const mdats = boxes.filter((b) => b.type === 'mdat');
    const mdat = mdats[0];
    const last = boxes.at(-1);
    if (
      mdats.length !== 1 ||
      !mdat ||
      last !== mdat ||
      !boxes.slice(0, boxes.indexOf(mdat)).some((b) => b.type === 'moov')
    )
      return undefined;
    const payloadBytes = mdat.size - mdat.header;
    if (this.#first + this.#sent * this.#partBytes > payloadBytes) return undefined;
    return { payload: mdat.start + mdat.header, payloadBytes, fileSize: mdat.start + mdat.size };
  }

  async #sendRest(writer: PartWriter, layout: { payload: number; payloadBytes: number }): Promise<void> {
    for (let i = 0; i < this.#sent; i++) await writer.ensure(2 + i, this.#range(layout.payload, i, this.#partBytes));
    let index = this.#sent;
    for (let at = this.#first + index * this.#partBytes; at < layout.payloadBytes; at += this.#partBytes, index++) {
      await writer.put(
        2 + index,
        this.#range(layout.payload, index, Math.min(this.#partBytes, layout.payloadBytes - at)),
      );
    }
    await writer.put(1, { file: this.#o.file, start: 0, length: layout.payload + this.#first });
  }
}
