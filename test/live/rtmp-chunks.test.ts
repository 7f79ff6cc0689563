// RTMP chunk streams byte by byte (Adobe's RTMP specification, section 5.3): messages split at
// every awkward place, chunk streams interleaved, the four header formats, extended timestamps,
// chunk sizes changed from the peer's side, Abort, the three forms of chunk stream id, and the
// limits that close a connection.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChunkReader, type ChunkReaderLimits, DEFAULT_CHUNK_LIMITS } from '../../src/live/rtmp/chunk-reader.ts';
import { writeChunks } from '../../src/live/rtmp/chunk-writer.ts';
import { RtmpProtocolError } from '../../src/live/rtmp/errors.ts';
import type { RtmpMessage } from '../../src/live/rtmp/messages.ts';

const bytes = (n: number, seed: number): Buffer =>
  Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff));

const msg = (o: Partial<RtmpMessage> & { payload: Buffer }): RtmpMessage => ({
  chunkStreamId: 4,
  timestamp: 0,
  typeId: 9,
  streamId: 1,
  ...o,
});

/** Every message `stream` gives when fed in the pieces cut at `cuts`. */
function read(stream: Buffer, cuts: number[] = [], limits?: ChunkReaderLimits): RtmpMessage[] {
  const reader = new ChunkReader(limits);
  const out: RtmpMessage[] = [];
  let at = 0;
  for (const cut of [...cuts, stream.length]) {
    out.push(...reader.push(stream.subarray(at, cut)));
    at = cut;
  }
  return out;
}

/** Without the Set Chunk Size and Abort messages (the reader returns them, having acted on them). */
const withoutControl = (ms: RtmpMessage[]): RtmpMessage[] => ms.filter((m) => m.typeId !== 1 && m.typeId !== 2);

/** A basic header and the fields of a message header of format `fmt` (section 5.3.1). */
function chunkHeader(
  fmt: number,
  csid: number,
  o: { ts?: number; length?: number; typeId?: number; streamId?: number; ext?: number } = {},
): Buffer {
  const basic =
    csid < 64
      ? Buffer.of((fmt << 6) | csid)
      : csid < 320
        ? Buffer.of(fmt << 6, csid - 64)
        : Buffer.of((fmt << 6) | 1, (csid - 64) & 0xff, (csid - 64) >> 8);
  const fields = Buffer.alloc([11, 7, 3, 0][fmt] ?? 0);
  if (fmt <= 2) fields.writeUIntBE(o.ts ?? 0, 0, 3);
  if (fmt <= 1) {
    fields.writeUIntBE(o.length ?? 0, 3, 3);
    fields.writeUInt8(o.typeId ?? 9, 6);
  }
  if (fmt === 0) fields.writeUInt32LE(o.streamId ?? 1, 7);
  const ext = Buffer.alloc(o.ext === undefined ? 0 : 4);
  if (o.ext !== undefined) ext.writeUInt32BE(o.ext);
  return Buffer.concat([basic, fields, ext]);
}

const setChunkSizeMessage = (size: number): Buffer => {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(size >>> 0);
  return writeChunks({ chunkStreamId: 2, timestamp: 0, typeId: 1, streamId: 0, payload }, 128);
};

describe('RTMP chunk reader', () => {
  const messages = [
    msg({ payload: bytes(300, 1), timestamp: 0 }),
    msg({ payload: bytes(0, 2), timestamp: 33, typeId: 8 }),
    msg({ payload: bytes(128, 3), timestamp: 66 }),
    msg({ payload: bytes(1, 4), timestamp: 100, chunkStreamId: 6, typeId: 8 }),
    msg({ payload: bytes(129, 5), timestamp: 0x1000005, chunkStreamId: 70 }),
    msg({ payload: bytes(600, 6), timestamp: 0xffffff, chunkStreamId: 65599, typeId: 18 }),
  ];
  const stream = Buffer.concat(messages.map((m) => writeChunks(m, 128)));

  it('reads messages split at every byte boundary', () => {
    assert.deepEqual(read(stream), messages);
    for (let cut = 1; cut < stream.length; cut++) assert.deepEqual(read(stream, [cut]), messages, `cut at ${cut}`);
  });

  it('reads messages fed one byte at a time and in three-byte pieces', () => {
    assert.deepEqual(
      read(
        stream,
        Array.from({ length: stream.length - 1 }, (_, i) => i + 1),
      ),
      messages,
    );
    assert.deepEqual(
      read(
        stream,
        Array.from({ length: Math.floor((stream.length - 1) / 3) }, (_, i) => 3 * (i + 1)),
      ),
      messages,
    );
  });

  it('reads chunk streams interleaved chunk by chunk', () => {
    const a = bytes(300, 7);
    const b = bytes(200, 8);
    const wire = Buffer.concat([
      chunkHeader(0, 4, { ts: 10, length: 300, typeId: 9 }),
      a.subarray(0, 128),
      chunkHeader(0, 5, { ts: 20, length: 200, typeId: 8 }),
      b.subarray(0, 128),
      chunkHeader(3, 4),
      a.subarray(128, 256),
      chunkHeader(3, 5),
      b.subarray(128),
      chunkHeader(3, 4),
      a.subarray(256),
    ]);
    for (const cuts of [[], [1], [130], [131, 132], [wire.length - 1]]) {
      const out = read(wire, cuts);
      assert.deepEqual(
        out.map((m) => [m.chunkStreamId, m.timestamp, m.typeId, m.payload]),
        [
          [5, 20, 8, b],
          [4, 10, 9, a],
        ],
      );
    }
  });

  it('adds the deltas of formats 1, 2 and 3 to the timestamp (format 3 repeats the last delta)', () => {
    const wire = Buffer.concat([
      chunkHeader(0, 4, { ts: 1000, length: 2, typeId: 9 }),
      Buffer.of(1, 2),
      chunkHeader(1, 4, { ts: 40, length: 3, typeId: 8 }),
      Buffer.of(3, 4, 5),
      chunkHeader(2, 4, { ts: 33 }),
      Buffer.of(6, 7, 8),
      chunkHeader(3, 4),
      Buffer.of(9, 10, 11),
    ]);
    const out = read(wire);
    assert.deepEqual(
      out.map((m) => [m.timestamp, m.typeId, m.payload.length, m.streamId]),
      [
        [1000, 9, 2, 1],
        [1040, 8, 3, 1],
        [1073, 8, 3, 1],
        [1106, 8, 3, 1],
      ],
    );
  });

  it('reads extended timestamps, with and without the repeat in continuation chunks', () => {
    const payload = bytes(200, 9);
    const ts = 0x01234567;
    const withRepeat = Buffer.concat([
      chunkHeader(0, 4, { ts: 0xffffff, length: 200, ext: ts }),
      payload.subarray(0, 128),
      chunkHeader(3, 4, { ext: ts }),
      payload.subarray(128),
    ]);
    const withoutRepeat = Buffer.concat([
      chunkHeader(0, 4, { ts: 0xffffff, length: 200, ext: ts }),
      payload.subarray(0, 128),
      chunkHeader(3, 4),
      payload.subarray(128),
    ]);
    for (const wire of [withRepeat, withoutRepeat]) {
      for (let cut = 1; cut < wire.length; cut++) {
        const [m] = read(wire, [cut]);
        assert.equal(m?.timestamp, ts);
        assert.deepEqual(m?.payload, payload);
      }
    }
    // An extended delta (format 1) and a format 3 message after it that repeats it.
    const deltas = Buffer.concat([
      chunkHeader(0, 4, { ts: 5, length: 1 }),
      Buffer.of(1),
      chunkHeader(1, 4, { ts: 0xffffff, length: 1, typeId: 9, ext: 0x2000000 }),
      Buffer.of(2),
      chunkHeader(3, 4, { ext: 0x2000000 }),
      Buffer.of(3),
    ]);
    assert.deepEqual(
      read(deltas).map((m) => m.timestamp),
      [5, 0x2000005, 0x4000005],
    );
  });

  it('reads chunk stream ids in all three forms: 2-63, 64-319, 320-65599', () => {
    for (const csid of [2, 63, 64, 319, 320, 1000, 65599]) {
      const m = msg({ chunkStreamId: csid, payload: bytes(300, csid) });
      assert.deepEqual(read(writeChunks(m, 128)), [m], `chunk stream ${csid}`);
    }
  });

  it('applies a Set Chunk Size at once, to the chunks right behind it', () => {
    const big = msg({ payload: bytes(5000, 10) });
    for (const size of [1, 4096, 0x7fffffff]) {
      const wire = Buffer.concat([setChunkSizeMessage(size), writeChunks(big, size)]);
      assert.deepEqual(withoutControl(read(wire)), [big], `chunk size ${size}`);
      assert.deepEqual(withoutControl(read(wire, [5, 17, 100])), [big]);
    }
    // Changed again in the middle of the stream, between two messages.
    const small = msg({ payload: bytes(300, 11) });
    const wire = Buffer.concat([writeChunks(small, 128), setChunkSizeMessage(64), writeChunks(small, 64)]);
    const out = read(wire);
    assert.deepEqual(withoutControl(out), [small, small]);
    assert.deepEqual(
      out.map((m) => m.typeId),
      [9, 1, 9],
    );
  });

  it('drops the message in progress on Abort', () => {
    const abort = writeChunks(
      { chunkStreamId: 2, timestamp: 0, typeId: 2, streamId: 0, payload: Buffer.of(0, 0, 0, 4) },
      128,
    );
    const whole = msg({ payload: bytes(100, 12) });
    const wire = Buffer.concat([chunkHeader(0, 4, { length: 300 }), bytes(128, 13), abort, writeChunks(whole, 128)]);
    const reader = new ChunkReader();
    assert.deepEqual(withoutControl(reader.push(wire)), [whole]);
    assert.equal(reader.midMessage, false);
  });

  it('says when a message is half read', () => {
    const reader = new ChunkReader();
    const wire = writeChunks(msg({ payload: bytes(300, 14) }), 128);
    reader.push(wire.subarray(0, 5));
    assert.equal(reader.midMessage, true);
    reader.push(wire.subarray(5, 200));
    assert.equal(reader.midMessage, true);
    reader.push(wire.subarray(200));
    assert.equal(reader.midMessage, false);
  });

  it('refuses chunk sizes out of range, oversized messages, too many chunk streams and bad first headers', () => {
    const refuse = (wire: Buffer, pattern: RegExp, limits?: ChunkReaderLimits): void => {
      assert.throws(
        () => read(wire, [], limits),
        (err: unknown) => err instanceof RtmpProtocolError && pattern.test(err.message),
      );
    };
    refuse(setChunkSizeMessage(0), /chunk size 0 is out of range/);
    refuse(setChunkSizeMessage(0x80000000), /chunk size 2147483648 is out of range/);
    refuse(chunkHeader(0, 4, { length: 0xffffff }), /a message of 16777215 bytes/);
    refuse(chunkHeader(1, 4, { length: 10 }), /starts with a format 1 header/);
    refuse(chunkHeader(3, 9), /starts with a format 3 header/);
    const many = Buffer.concat(
      Array.from({ length: 65 }, (_, i) => writeChunks(msg({ chunkStreamId: 3 + i, payload: Buffer.of(1) }), 128)),
    );
    refuse(many, /more than 64 chunk streams/);
    // Many messages begun and none finished: the buffered bytes are bounded.
    const limits = { ...DEFAULT_CHUNK_LIMITS, maxBufferedBytes: 1000 };
    const begun = Buffer.concat(
      Array.from({ length: 10 }, (_, i) => Buffer.concat([chunkHeader(0, 3 + i, { length: 500 }), bytes(128, i)])),
    );
    refuse(begun, /more than 1000 bytes of unfinished messages/, limits);
    // A new message header inside a message.
    refuse(
      Buffer.concat([chunkHeader(0, 4, { length: 300 }), bytes(128, 0), chunkHeader(0, 4, { length: 1 })]),
      /inside a message/,
    );
  });
});
