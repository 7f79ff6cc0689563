import { UnsupportedMediaError } from '../lib/errors.ts';
import { Amf0EcmaArray, type Amf0Object, type Amf0Value, decodeAmf0 } from './amf0.ts';
import { firstSpsOfAvcc, spsPictureSize } from './h264-sps.ts';
import type { SourceInfo } from './ingest-types.ts';

// Reads what a publisher's FLV says of its media, for both ingests alike (the RTMP server writes
// its messages as FLV tags, the SRT relay's remux ffmpeg writes FLV): the codecs, the picture
// size, the frame rate and bitrate the encoder declared, where the keyframes are, how far the
// media has come and how many bytes arrived. It only watches the bytes: the session hands the
// same chunks to the ladder's ffmpeg. Layout: Adobe's "Video File Format Specification" v10.1,
// annex E (header, tags, AUDIODATA, VIDEODATA, SCRIPTDATA) and veovera's enhanced RTMP (v2) for
// FourCC video and audio.

/** FLV bytes that are not FLV: the publisher is cut off. */
export class FlvFormatError extends UnsupportedMediaError {}

export type FlvTagKind = 'audio' | 'video' | 'script';

export interface FlvTagInfo {
  kind: FlvTagKind;
  /** Decode time in milliseconds (the 24 bits and the extended byte above them). */
  timestampMs: number;
  /** Bytes of the tag's data. */
  size: number;
  /** A video tag that holds a keyframe (not a sequence header). */
  keyframe: boolean;
  /** A video or audio sequence header (decoder configuration), not media. */
  sequenceHeader: boolean;
  /** The whole tag as it came (header, data, PreviousTagSize): what the ladder's ffmpeg is fed. */
  raw: Buffer;
}

const FLV_HEADER = 9;
const TAG_HEADER = 11;
const PREVIOUS_TAG_SIZE = 4;
const AUDIO = 8;
const VIDEO = 9;
const SCRIPT = 18;

// Codec ids of VIDEODATA (annex E.4.3.1); 12 is the HEVC extension Chinese CDNs use.
const VIDEO_CODEC_IDS: Record<number, string> = { 2: 'h263', 4: 'vp6', 5: 'vp6a', 7: 'h264', 12: 'hevc', 13: 'av1' };
// SoundFormat of AUDIODATA (annex E.4.2.1).
const AUDIO_FORMATS: Record<number, string> = {
  0: 'pcm',
  1: 'adpcm',
  2: 'mp3',
  3: 'pcm',
  7: 'alaw',
  8: 'mulaw',
  10: 'aac',
  11: 'speex',
  14: 'mp3',
};
// Enhanced RTMP's FourCCs.
const FOURCCS: Record<string, string> = {
  avc1: 'h264',
  hvc1: 'hevc',
  av01: 'av1',
  vp09: 'vp9',
  Opus: 'opus',
  fLaC: 'flac',
  'ac-3': 'ac3',
  'ec-3': 'eac3',
  '.mp3': 'mp3',
  mp4a: 'aac',
};

/** A keyframe gap this long or longer is not measured (a publisher that paused, a timestamp jump). */
const MAX_MEASURED_GAP_MS = 30_000;
/** The window of the ingest rate. */
const RATE_WINDOW_MS = 4000;

export interface FlvReaderOptions {
  /** Each tag as it is read. */
  onTag?(tag: FlvTagInfo): void;
  /** Wall clock in ms (tests pass their own). */
  now?: () => number;
}

/** Reads FLV tags from chunks split anywhere; `push` throws FlvFormatError on bytes that are not FLV. */
export class FlvReader {
  readonly source: SourceInfo = {};
  /** Bytes pushed so far. */
  bytes = 0;
  /** Decode time of the newest media tag (ms). */
  mediaMs = 0;
  /** Video tags (frames) read, sequence headers aside. */
  videoFrames = 0;
  /** Keyframe timestamps seen, the newest last (the last few). */
  readonly keyframesMs: number[] = [];
  /** The longest gap between two keyframes so far (ms); undefined before the second keyframe. */
  maxKeyframeGapMs: number | undefined;
  /** Whether onMetaData has been read. */
  metadataSeen = false;
  /** The FLV header and PreviousTagSize0, once read (a restarted ladder's ffmpeg starts with them). */
  headerBytes: Buffer | undefined;

  private pending: Buffer = Buffer.alloc(0);
  private headerRead = false;
  private readonly rateSamples: { at: number; bytes: number }[] = [];
  private readonly now: () => number;
  private readonly opts: FlvReaderOptions;

  constructor(opts: FlvReaderOptions = {}) {
    this.opts = opts;
    this.now = opts.now ?? Date.now;
  }

  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    this.sampleRate();
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let at = 0;
    if (!this.headerRead) {
      const used = this.readHeader(this.pending);
      if (used === 0) return;
      at = used;
    }
    for (;;) {
      const used = this.readTag(this.pending.subarray(at));
      if (used === 0) break;
      at += used;
    }
    this.pending = at === 0 ? this.pending : Buffer.from(this.pending.subarray(at));
  }

  /** Bytes per second over the last few seconds (0 before a second sample). */
  bytesPerSecond(): number {
    const first = this.rateSamples[0];
    const last = this.rateSamples.at(-1);
    if (!first || !last || last.at - first.at < 500) return 0;
    return ((last.bytes - first.bytes) * 1000) / (last.at - first.at);
  }

  private sampleRate(): void {
    const at = this.now();
    this.rateSamples.push({ at, bytes: this.bytes });
    while (this.rateSamples.length > 2 && at - (this.rateSamples[1]?.at ?? at) >= RATE_WINDOW_MS)
      this.rateSamples.shift();
  }

  /** The 9-byte header and PreviousTagSize0; 0 while they are incomplete. */
  private readHeader(buf: Buffer): number {
    if (buf.length >= 3 && buf.toString('latin1', 0, 3) !== 'FLV')
      throw new FlvFormatError('the stream is not FLV (no FLV signature)');
    if (buf.length < FLV_HEADER) return 0;
    const offset = buf.readUInt32BE(5);
    if (buf[3] !== 1 || offset < FLV_HEADER || offset > 1024)
      throw new FlvFormatError(`an FLV header of version ${buf[3]} with data offset ${offset}`);
    if (buf.length < offset + PREVIOUS_TAG_SIZE) return 0;
    this.headerRead = true;
    this.headerBytes = Buffer.from(buf.subarray(0, offset + PREVIOUS_TAG_SIZE));
    return offset + PREVIOUS_TAG_SIZE;
  }

  /** One whole tag and its PreviousTagSize; 0 while it is incomplete. */
  private readTag(buf: Buffer): number {
    if (buf.length < TAG_HEADER) return 0;
    const type = buf[0] ?? 0;
    if ((type & 0x20) !== 0) throw new FlvFormatError('an encrypted FLV tag (Filter bit set)');
    if (type !== AUDIO && type !== VIDEO && type !== SCRIPT) throw new FlvFormatError(`an FLV tag of type ${type}`);
    const size = buf.readUIntBE(1, 3);
    const total = TAG_HEADER + size + PREVIOUS_TAG_SIZE;
    if (buf.length < total) return 0;
    const timestampMs = (buf.readUIntBE(4, 3) | ((buf[7] ?? 0) << 24)) >>> 0;
    const data = buf.subarray(TAG_HEADER, TAG_HEADER + size);
    const raw = buf.subarray(0, total);
    const tag: FlvTagInfo = { kind: 'script', timestampMs, size, keyframe: false, sequenceHeader: false, raw };
    if (type === VIDEO) this.readVideo(data, tag);
    else if (type === AUDIO) this.readAudio(data, tag);
    else this.readScript(data);
    if (type !== SCRIPT && !tag.sequenceHeader) this.mediaMs = Math.max(this.mediaMs, timestampMs);
    this.opts.onTag?.(tag);
    return total;
  }

  private readVideo(data: Buffer, tag: FlvTagInfo): void {
    tag.kind = 'video';
    const first = data[0];
    if (first === undefined) return;
    const enhanced = (first & 0x80) !== 0;
    const frameType = enhanced ? (first >> 4) & 0x07 : first >> 4;
    if (frameType === 5) return; // a command frame (annex E.4.3.1): no picture
    const codec = enhanced ? FOURCCS[data.toString('latin1', 1, 5)] : VIDEO_CODEC_IDS[first & 0x0f];
    this.source.videoCodec ??= codec ?? (enhanced ? data.toString('latin1', 1, 5) : `flv video codec ${first & 0x0f}`);
    // Legacy AVC: AVCPacketType 0 is the AVCDecoderConfigurationRecord; enhanced: PacketType 0 is SequenceStart.
    tag.sequenceHeader = enhanced ? (first & 0x0f) === 0 : (first & 0x0f) === 7 && data[1] === 0;
    if (tag.sequenceHeader) {
      if (codec === 'h264') this.readAvcConfig(data.subarray(5));
      return;
    }
    // Enhanced PacketType 2 / AVCPacketType 2: the end of the sequence, no picture.
    if (enhanced ? (first & 0x0f) === 2 : (first & 0x0f) === 7 && data[1] === 2) return;
    this.videoFrames++;
    tag.keyframe = frameType === 1;
    if (tag.keyframe) this.keyframeAt(tag.timestampMs);
  }

  private readAvcConfig(record: Buffer): void {
    const sps = firstSpsOfAvcc(record);
    const size = sps && spsPictureSize(sps);
    if (!size) return;
    // onMetaData's numbers win: an encoder that names a size means its output.
    if (this.source.width === undefined || this.source.height === undefined) {
      this.source.width = size.width;
      this.source.height = size.height;
    }
  }

  private keyframeAt(ms: number): void {
    const previous = this.keyframesMs.at(-1);
    if (previous !== undefined && ms > previous && ms - previous < MAX_MEASURED_GAP_MS)
      this.maxKeyframeGapMs = Math.max(this.maxKeyframeGapMs ?? 0, ms - previous);
    this.keyframesMs.push(ms);
    if (this.keyframesMs.length > 16) this.keyframesMs.shift();
  }

  private readAudio(data: Buffer, tag: FlvTagInfo): void {
    tag.kind = 'audio';
    const first = data[0];
    if (first === undefined) return;
    const format = first >> 4;
    // Enhanced RTMP's audio (SoundFormat 9, ExHeader): a FourCC follows the packet type.
    const codec = format === 9 ? FOURCCS[data.toString('latin1', 1, 5)] : AUDIO_FORMATS[format];
    this.source.audioCodec ??= codec ?? `flv audio format ${format}`;
    tag.sequenceHeader = format === 10 ? data[1] === 0 : format === 9 && (first & 0x0f) === 0;
  }

  private readScript(data: Buffer): void {
    let values: Amf0Value[];
    try {
      values = decodeAmf0(data);
    } catch (err) {
      throw new FlvFormatError('an FLV script tag that is not AMF0', { cause: err });
    }
    // "onMetaData" then its ECMA array; RTMP's data message may lead with "@setDataFrame".
    const at = values.indexOf('onMetaData');
    const meta = at >= 0 ? values[at + 1] : undefined;
    if (!isRecord(meta)) return;
    this.metadataSeen = true;
    this.readMetadata(meta);
  }

  private readMetadata(meta: Amf0Object): void {
    const num = (k: string): number | undefined => {
      const v = meta[k];
      return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : undefined;
    };
    const width = num('width');
    const height = num('height');
    if (width !== undefined && height !== undefined) {
      this.source.width = Math.round(width);
      this.source.height = Math.round(height);
    }
    const fps = num('framerate') ?? num('videoframerate');
    if (fps !== undefined && fps <= 240) this.source.fps = fps;
    const kbps = (num('videodatarate') ?? 0) + (num('audiodatarate') ?? 0);
    if (kbps > 0) this.source.declaredKbps = kbps;
    if (typeof meta.encoder === 'string') this.source.encoder = meta.encoder.slice(0, 128);
  }
}

function isRecord(v: Amf0Value | undefined): v is Amf0Object {
  return (
    typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date) && !(v instanceof Amf0EcmaArray)
  );
}
