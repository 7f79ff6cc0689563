import { Amf0Reader } from '../amf0.ts';
import { MessageType } from './messages.ts';

// RTMP's audio, video and data messages carry the same bytes as FLV tags (Adobe's "Video File
// Format Specification" v10.1, annex E): an accepted publisher's messages are written as an
// FLV file for the runtime, whichever ingest brought them.

/** "FLV", version 1, audio and video present, a 9-byte header, then PreviousTagSize0 (E.2, E.3). */
export const FLV_HEADER = Buffer.of(0x46, 0x4c, 0x56, 1, 0x05, 0, 0, 0, 9, 0, 0, 0, 0);

const TAG_HEADER_BYTES = 11;

/** One FLV tag (E.4.1): type, data size, timestamp (24 bits and the 8 above), stream id 0; then PreviousTagSize. */
export function flvTag(typeId: number, timestamp: number, data: Buffer): Buffer {
  const header = Buffer.alloc(TAG_HEADER_BYTES);
  header.writeUInt8(typeId, 0);
  header.writeUIntBE(data.length, 1, 3);
  header.writeUIntBE(timestamp & 0xffffff, 4, 3);
  header.writeUInt8((timestamp >>> 24) & 0xff, 7);
  const trailer = Buffer.alloc(4);
  trailer.writeUInt32BE(TAG_HEADER_BYTES + data.length);
  return Buffer.concat([header, data, trailer]);
}

/** What FLV file writers put in a script tag: `onMetaData` and its values, without RTMP's `@setDataFrame` in front. */
export function scriptTagData(payload: Buffer): Buffer {
  const reader = new Amf0Reader(payload);
  return reader.read() === '@setDataFrame' ? payload.subarray(reader.offset) : payload;
}

const ENHANCED_VIDEO: Record<string, string> = {
  hvc1: 'HEVC over RTMP',
  av01: 'AV1 over RTMP',
  vp09: 'VP9 over RTMP',
  avc1: 'Enhanced RTMP H.264 (avc1)',
};
const SEND_H264 = 'send H.264 (x264 or NVENC H.264)';

/**
 * Why ffmpeg 5.1's FLV demuxer could not read this media message, in words for the person at
 * the encoder (OBS shows them); undefined when it can. Refused: video with enhanced RTMP's
 * IsExHeader bit (veovera's enhanced RTMP: FourCC hvc1, av01, vp09, even avc1), legacy codec
 * id 12 (HEVC as some CDNs carry it), and enhanced audio (SoundFormat 9: Opus, FLAC, AC-3).
 */
export function unreadableMedia(typeId: number, payload: Buffer): string | undefined {
  const first = payload[0];
  if (first === undefined) return undefined;
  if (typeId === MessageType.Video) {
    if ((first & 0x80) !== 0) {
      const fourcc = payload.toString('latin1', 1, 5);
      return `${ENHANCED_VIDEO[fourcc] ?? `Enhanced RTMP video (${printable(fourcc)})`} is not supported: ${SEND_H264}`;
    }
    if ((first & 0x0f) === 12) return `HEVC over RTMP is not supported: ${SEND_H264}`;
  }
  if (typeId === MessageType.Audio && first >> 4 === 9) {
    const fourcc = payload.toString('latin1', 1, 5);
    return `Enhanced RTMP audio (${printable(fourcc)}) is not supported: send AAC`;
  }
  return undefined;
}

/** A FourCC from the wire, safe to show and log. */
function printable(fourcc: string): string {
  return fourcc.replace(/[^\x20-\x7e]/g, '?');
}
