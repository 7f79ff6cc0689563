import type { RtmpMessage } from './messages.ts';

// Writes messages as chunks (Adobe's RTMP specification, section 5.3): the first chunk with a
// full format 0 header, the rest format 3, each with the extended timestamp again when the
// timestamp does not fit 24 bits (section 5.3.1.3).

const EXTENDED = 0xffffff;

function basicHeader(fmt: number, csid: number): Buffer {
  if (csid < 64) return Buffer.of((fmt << 6) | csid);
  if (csid < 320) return Buffer.of(fmt << 6, csid - 64);
  const b = Buffer.of((fmt << 6) | 1, 0, 0);
  b.writeUInt16LE(csid - 64, 1);
  return b;
}

/** The chunks of one message, cut at `chunkSize` payload bytes. */
export function writeChunks(message: RtmpMessage, chunkSize: number): Buffer {
  const { chunkStreamId: csid, timestamp, typeId, streamId, payload } = message;
  const extended = timestamp >= EXTENDED;
  const header = Buffer.alloc(11);
  header.writeUIntBE(extended ? EXTENDED : timestamp, 0, 3);
  header.writeUIntBE(payload.length, 3, 3);
  header.writeUInt8(typeId, 6);
  header.writeUInt32LE(streamId, 7);
  const ext = Buffer.alloc(extended ? 4 : 0);
  if (extended) ext.writeUInt32BE(timestamp >>> 0);
  const parts: Buffer[] = [basicHeader(0, csid), header, ext];
  for (let at = 0; at < payload.length || at === 0; at += chunkSize) {
    if (at > 0) parts.push(basicHeader(3, csid), ext);
    parts.push(payload.subarray(at, at + chunkSize));
    if (payload.length === 0) break;
  }
  return Buffer.concat(parts);
}
