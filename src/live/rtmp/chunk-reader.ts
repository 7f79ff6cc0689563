import { RtmpProtocolError } from './errors.ts';
import { MessageType, type RtmpMessage } from './messages.ts';

// RTMP chunk streams (Adobe's RTMP specification, section 5.3): messages cut into chunks of
// the peer's chunk size, chunks of several chunk streams interleaved. Each chunk has a basic
// header (format 0-3, chunk stream id in 1, 2 or 3 bytes: ids 2 to 65599), a message header of
// 11, 7, 3 or 0 bytes (a format leaves out what the chunk stream's previous header said) and,
// when the 24-bit timestamp field is 0xFFFFFF, a 4-byte extended timestamp. The bytes come
// from publishers: sizes, counts and buffered bytes are bounded, and a broken rule throws
// RtmpProtocolError so the connection closes.

export interface ChunkReaderLimits {
  /** Largest message (its header's length field). */
  maxMessageBytes: number;
  /** Most chunk streams one connection may use. */
  maxChunkStreams: number;
  /** Most bytes held in messages not yet complete, over all chunk streams. */
  maxBufferedBytes: number;
}

export const DEFAULT_CHUNK_LIMITS: ChunkReaderLimits = {
  maxMessageBytes: 8 * 1024 * 1024,
  maxChunkStreams: 64,
  maxBufferedBytes: 16 * 1024 * 1024,
};

/** Largest chunk size (section 5.4.1: 31 bits); 1 is the smallest that makes progress. */
export const MAX_CHUNK_SIZE = 0x7fffffff;
const DEFAULT_CHUNK_SIZE = 128;
const EXTENDED = 0xffffff;
const MESSAGE_HEADER_BYTES = [11, 7, 3, 0] as const;
const EMPTY = Buffer.alloc(0);

/** What the previous headers of one chunk stream said, and its message in progress. */
interface ChunkStream {
  timestamp: number;
  /** The last timestamp field (absolute for format 0, a delta otherwise), as ffmpeg and librtmp keep it. */
  field: number;
  extended: boolean;
  length: number;
  typeId: number;
  streamId: number;
  parts: Buffer[];
  received: number;
}

interface ParsedHeader {
  /** Bytes of the header, the extended timestamp included. */
  size: number;
  csid: number;
  stream: ChunkStream;
}

export class ChunkReader {
  private readonly limits: ChunkReaderLimits;
  private chunkSize = DEFAULT_CHUNK_SIZE;
  private readonly streams = new Map<number, ChunkStream>();
  /** Bytes of a chunk header not yet complete (18 at most). */
  private partial: Buffer = EMPTY;
  /** The chunk stream whose chunk payload is being read, and how many bytes of it are left. */
  private reading: { stream: ChunkStream; csid: number; left: number } | undefined;
  private buffered = 0;

  constructor(limits: ChunkReaderLimits = DEFAULT_CHUNK_LIMITS) {
    this.limits = limits;
  }

  /** Whether a message has been started and not finished (a publisher that leaves now left mid-message). */
  get midMessage(): boolean {
    return this.buffered > 0 || this.reading !== undefined || this.partial.length > 0;
  }

  /** Takes the next bytes; returns the messages they complete, in order. Set Chunk Size and Abort have taken effect when returned. */
  push(data: Buffer): RtmpMessage[] {
    const out: RtmpMessage[] = [];
    const buf = this.partial.length === 0 ? data : Buffer.concat([this.partial, data]);
    this.partial = EMPTY;
    // Offsets into one buffer, not a slice per chunk: a flood of tiny chunks stays cheap.
    let pos = 0;
    while (pos < buf.length) {
      if (this.reading) {
        pos = this.payload(buf, pos, out);
        continue;
      }
      const header = this.header(buf, pos);
      if (!header) {
        this.partial = Buffer.from(buf.subarray(pos));
        break;
      }
      pos += header.size;
      // A message of length 0 is whole at its header.
      if (header.stream.length === 0) this.complete(header.csid, header.stream, EMPTY, out);
    }
    return out;
  }

  /** A Set Chunk Size from this side's peer. */
  setChunkSize(size: number): void {
    if (size < 1 || size > MAX_CHUNK_SIZE) throw new RtmpProtocolError(`chunk size ${size} is out of range`);
    this.chunkSize = size;
  }

  /** An Abort Message: the chunk stream's message in progress is dropped. */
  abort(csid: number): void {
    const stream = this.streams.get(csid);
    if (!stream) return;
    this.buffered -= stream.received;
    stream.parts = [];
    stream.received = 0;
    if (this.reading?.csid === csid) this.reading = undefined;
  }

  /** Reads one chunk header at `pos`; undefined when it is not all there yet. */
  private header(buf: Buffer, pos: number): ParsedHeader | undefined {
    const first = buf[pos] ?? 0;
    const fmt = first >> 6;
    const basic = (first & 0x3f) === 0 ? 2 : (first & 0x3f) === 1 ? 3 : 1;
    const fixed = basic + MESSAGE_HEADER_BYTES[fmt as 0 | 1 | 2 | 3];
    if (buf.length - pos < fixed) return undefined;
    const csid =
      basic === 1 ? first & 0x3f : basic === 2 ? 64 + buf.readUInt8(pos + 1) : 64 + buf.readUInt16LE(pos + 1);
    const stream = this.streamFor(csid, fmt);
    const continuing = stream.received > 0;
    if (continuing && fmt !== 3)
      throw new RtmpProtocolError(`chunk stream ${csid}: a new message header (format ${fmt}) inside a message`);
    const field = fmt === 3 ? stream.field : buf.readUIntBE(pos + basic, 3);
    const extended = fmt === 3 ? stream.extended : field === EXTENDED;
    let size = fixed;
    let value = field;
    if (extended) {
      if (buf.length - pos < fixed + 4) return undefined;
      const ext = buf.readUInt32BE(pos + fixed);
      // Inside a message the extended timestamp repeats the first chunk's (section 5.3.1.3);
      // some encoders leave it out there, so it is skipped only when it is that value.
      if (!continuing || ext === stream.field) {
        size += 4;
        value = ext;
      }
    }
    if (!continuing) this.startMessage({ stream, fmt, buf, at: pos + basic, value, extended });
    const left = Math.min(this.chunkSize, stream.length - stream.received);
    if (stream.length > 0) this.reading = { stream, csid, left };
    return { size, csid, stream };
  }

  private streamFor(csid: number, fmt: number): ChunkStream {
    const known = this.streams.get(csid);
    if (known) return known;
    if (fmt !== 0) throw new RtmpProtocolError(`chunk stream ${csid} starts with a format ${fmt} header`);
    if (this.streams.size >= this.limits.maxChunkStreams)
      throw new RtmpProtocolError(`more than ${this.limits.maxChunkStreams} chunk streams`);
    const stream: ChunkStream = {
      timestamp: 0,
      field: 0,
      extended: false,
      length: 0,
      typeId: 0,
      streamId: 0,
      parts: [],
      received: 0,
    };
    this.streams.set(csid, stream);
    return stream;
  }

  /** The header of a message's first chunk: its length, type, stream and timestamp. */
  private startMessage(o: {
    stream: ChunkStream;
    fmt: number;
    buf: Buffer;
    /** Where the message header starts. */
    at: number;
    value: number;
    extended: boolean;
  }): void {
    const { stream, fmt, buf, at, value } = o;
    if (fmt <= 1) {
      stream.length = buf.readUIntBE(at + 3, 3);
      stream.typeId = buf.readUInt8(at + 6);
      if (stream.length > this.limits.maxMessageBytes)
        throw new RtmpProtocolError(
          `a message of ${stream.length} bytes (the limit is ${this.limits.maxMessageBytes})`,
        );
    }
    if (fmt === 0) stream.streamId = buf.readUInt32LE(at + 7);
    stream.timestamp = fmt === 0 ? value : (stream.timestamp + value) >>> 0;
    stream.field = value;
    stream.extended = o.extended;
  }

  /** Copies the current chunk's payload bytes from `pos`; returns where the next chunk starts. */
  private payload(buf: Buffer, pos: number, out: RtmpMessage[]): number {
    const reading = this.reading;
    if (!reading) return pos;
    const { stream, csid } = reading;
    const n = Math.min(reading.left, buf.length - pos);
    const piece = buf.subarray(pos, pos + n);
    reading.left -= n;
    if (reading.left === 0) this.reading = undefined;
    if (stream.received === 0 && n === stream.length) {
      this.complete(csid, stream, piece, out);
      return pos + n;
    }
    this.buffered += n;
    if (this.buffered > this.limits.maxBufferedBytes)
      throw new RtmpProtocolError(`more than ${this.limits.maxBufferedBytes} bytes of unfinished messages`);
    // A copy: a slice would keep the whole socket read alive.
    stream.parts.push(Buffer.from(piece));
    stream.received += n;
    if (stream.received === stream.length) {
      const payload = Buffer.concat(stream.parts);
      this.buffered -= stream.received;
      stream.parts = [];
      stream.received = 0;
      this.complete(csid, stream, payload, out);
    }
    return pos + n;
  }

  private complete(csid: number, stream: ChunkStream, payload: Buffer, out: RtmpMessage[]): void {
    const message: RtmpMessage = {
      chunkStreamId: csid,
      timestamp: stream.timestamp,
      typeId: stream.typeId,
      streamId: stream.streamId,
      payload,
    };
    // Section 5.4: these two change how the very next chunks are read, so they act here.
    if (message.typeId === MessageType.SetChunkSize) this.setChunkSize(readControlValue(payload, 'Set Chunk Size'));
    else if (message.typeId === MessageType.Abort) this.abort(readControlValue(payload, 'Abort'));
    out.push(message);
  }
}

function readControlValue(payload: Buffer, what: string): number {
  if (payload.length < 4) throw new RtmpProtocolError(`a ${what} message of ${payload.length} bytes`);
  return payload.readUInt32BE(0);
}
