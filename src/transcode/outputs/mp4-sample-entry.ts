// The bit rates a track's sample description carries (ISO/IEC 14496-12 8.5.2 `btrt`, and
// 14496-1 7.2.6.6 DecoderConfigDescriptor in an `esds`): each part of a joined track states
// its own, and an `esds` names its track's ID; the joined track states them over the whole.
// Everything else in the parts' descriptions (the codec's configuration) must be the same,
// but for the encoder's own notes.

import { InternalError } from '../../lib/errors.ts';
import { childBoxes } from '../mp4-boxes.ts';

/** Where the fields that differ between parts lie in an `stsd` box (offsets into it). */
interface RateFields {
  /** `btrt` and DecoderConfigDescriptor: bufferSizeDB, maxBitrate, avgBitrate (4, 4, 4 / 3, 4, 4 bytes). */
  rates: { at: number; bufferBytes: 3 | 4 }[];
  /** ES_Descriptor's ES_ID (2 bytes): the track ID in an MP4 (14496-14, 3.1.2). */
  esIds: number[];
}

export interface SampleRates {
  bufferSize: number;
  max: number;
  avg: number;
}

/** Sample entry fields before its child boxes (14496-12 8.5.2.2, 12.1.3, 12.2.3; sound version 0). */
const ENTRY_FIELDS: Record<string, number> = { vide: 78, soun: 28 };

/** An expandable descriptor length (14496-1 8.3.3): up to four bytes of 7 bits. */
function descriptorLength(buf: Buffer, at: number): { length: number; next: number } {
  let length = 0;
  for (let i = 0; i < 4; i++) {
    const b = buf.readUInt8(at + i);
    length = (length << 7) | (b & 0x7f);
    if (!(b & 0x80)) return { length, next: at + i + 1 };
  }
  throw new InternalError('mp4 join: an esds descriptor length over four bytes');
}

function esdsFields(buf: Buffer, start: number, f: RateFields): void {
  // Full box header (4), then ES_Descriptor (tag 3).
  let at = start + 4;
  if (buf.readUInt8(at) !== 3) return;
  at = descriptorLength(buf, at + 1).next;
  f.esIds.push(at);
  const flags = buf.readUInt8(at + 2);
  at += 3;
  if (flags & 0x80) at += 2;
  if (flags & 0x40) at += 1 + buf.readUInt8(at);
  if (flags & 0x20) at += 2;
  if (buf.readUInt8(at) !== 4) return;
  at = descriptorLength(buf, at + 1).next;
  // objectTypeIndication, streamType and flags, then bufferSizeDB (24 bits).
  f.rates.push({ at: at + 2, bufferBytes: 3 });
}

function rateFields(stsd: Buffer, handler: string): RateFields {
  const f: RateFields = { rates: [], esIds: [] };
  const skip = ENTRY_FIELDS[handler];
  // stsd: box header (8), full box header (4), entry_count (4), then the one sample entry.
  const entry = childBoxes(stsd, 16, stsd.length)[0];
  if (skip === undefined || !entry) return f;
  for (const b of childBoxes(stsd, entry.start + skip, entry.end)) {
    if (b.type === 'btrt') f.rates.push({ at: b.start, bufferBytes: 4 });
    if (b.type === 'esds') esdsFields(stsd, b.start, f);
  }
  return f;
}

function writeRates(out: Buffer, f: RateFields, r: SampleRates, esId: number): Buffer {
  for (const { at, bufferBytes } of f.rates) {
    out.writeUIntBE(Math.min(r.bufferSize, 2 ** (8 * bufferBytes) - 1), at, bufferBytes);
    out.writeUInt32BE(Math.min(r.max, 0xffffffff), at + bufferBytes);
    out.writeUInt32BE(Math.min(r.avg, 0xffffffff), at + bufferBytes + 4);
  }
  for (const at of f.esIds) out.writeUInt16BE(esId & 0xffff, at);
  return out;
}

/**
 * What must be the same in the parts' `stsd` for one description to serve them all: the
 * sample entry and its boxes, less the rates, the ES_ID and an `hvcC`'s SEI arrays. x265
 * puts its settings, the chunk's own rate control included, in a user-data SEI there; it
 * decodes nothing, so the first part's stands for the whole as ffmpeg's concat kept it.
 */
export function comparableStsd(stsd: Buffer, handler: string): Buffer {
  const skip = ENTRY_FIELDS[handler];
  const entry = childBoxes(stsd, 16, stsd.length)[0];
  if (skip === undefined || !entry) return stsd;
  const zeroed = writeRates(Buffer.from(stsd), rateFields(stsd, handler), { bufferSize: 0, max: 0, avg: 0 }, 0);
  const key = [Buffer.from(entry.type, 'latin1'), zeroed.subarray(entry.start, entry.start + skip)];
  for (const b of childBoxes(zeroed, entry.start + skip, entry.end)) {
    if (b.type === 'btrt') continue;
    key.push(
      Buffer.from(b.type, 'latin1'),
      b.type === 'hvcC' ? hvccWithoutSei(zeroed, b.start, b.end) : zeroed.subarray(b.start, b.end),
    );
  }
  return Buffer.concat(key);
}

/** HEVCDecoderConfigurationRecord (14496-15 8.3.3.1) less its prefix and suffix SEI arrays (NAL types 39, 40). */
function hvccWithoutSei(buf: Buffer, start: number, end: number): Buffer {
  const out = [buf.subarray(start, start + 22)];
  let at = start + 23;
  for (let a = 0; a < buf.readUInt8(start + 22) && at + 3 <= end; a++) {
    const arrayStart = at;
    const count = buf.readUInt16BE(at + 1);
    at += 3;
    for (let k = 0; k < count; k++) at += 2 + buf.readUInt16BE(at);
    const type = buf.readUInt8(arrayStart) & 0x3f;
    if (type !== 39 && type !== 40) out.push(buf.subarray(arrayStart, at));
  }
  return Buffer.concat(out);
}

/** The part's stated rates (the largest of its fields), 0s where it states none. */
export function statedRates(stsd: Buffer, handler: string): SampleRates {
  const r: SampleRates = { bufferSize: 0, max: 0, avg: 0 };
  for (const { at, bufferBytes } of rateFields(stsd, handler).rates) {
    r.bufferSize = Math.max(r.bufferSize, stsd.readUIntBE(at, bufferBytes));
    r.max = Math.max(r.max, stsd.readUInt32BE(at + bufferBytes));
  }
  return r;
}

/** The first part's `stsd` stating the joined track's rates and its track ID. */
export function joinedStsd(stsd: Buffer, handler: string, o: { rates: SampleRates; trackId: number }): Buffer {
  return writeRates(Buffer.from(stsd), rateFields(stsd, handler), o.rates, o.trackId);
}
