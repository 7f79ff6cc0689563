// AMF0 (Adobe's AMF 0 specification): values round trip through encode and decode, and
// malformed bytes are a clear Amf0Error, never a crash, a hang or a huge allocation.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Amf0EcmaArray, Amf0Error, type Amf0Value, decodeAmf0, encodeAmf0 } from '../../src/live/amf0.ts';

/** A plain copy (records without a prototype compare equal to literals). */
const plain = (v: unknown): unknown => JSON.parse(JSON.stringify(v, (_k, x) => (x === undefined ? '<undefined>' : x)));

describe('AMF0', () => {
  it('round trips every type it writes', () => {
    const values: Amf0Value[] = [
      0,
      -1.5,
      2 ** 40,
      true,
      false,
      '',
      'live',
      'é ✓ 🎥',
      null,
      undefined,
      { app: 'live', tcUrl: 'rtmp://127.0.0.1/live', fpad: false, capabilities: 15, nested: { a: [1, 'b', null] } },
      [1, 'two', { three: 3 }, [], undefined],
    ];
    const decoded = decodeAmf0(encodeAmf0(...values));
    assert.equal(decoded.length, values.length);
    assert.deepEqual(plain(decoded), plain(values));
    assert.equal(decoded[9], undefined);
    assert.equal(decoded[8], null);
  });

  it('reads an ECMA array (onMetaData) as a record', () => {
    const meta = { duration: 0, width: 320, height: 240, videocodecid: 7, encoder: 'Lavf59.27.100' };
    const bytes = encodeAmf0('onMetaData', new Amf0EcmaArray(meta));
    assert.equal(bytes[13], 0x08);
    const [name, record] = decodeAmf0(bytes);
    assert.equal(name, 'onMetaData');
    assert.deepEqual(plain(record), meta);
  });

  it('reads an ECMA array whose count is wrong (encoders write 0)', () => {
    const bytes = encodeAmf0(new Amf0EcmaArray({ width: 640 }));
    bytes.writeUInt32BE(0, 1);
    assert.deepEqual(plain(decodeAmf0(bytes)), [{ width: 640 }]);
  });

  it('round trips a date and a long string', () => {
    const when = new Date(Date.UTC(2024, 1, 29, 12, 0, 0));
    const long = 'x'.repeat(70_000);
    const bytes = encodeAmf0(when, long);
    assert.equal(bytes[0], 0x0b);
    assert.equal(bytes[11], 0x0c);
    const [d, s] = decodeAmf0(bytes);
    assert.ok(d instanceof Date);
    assert.equal(d.getTime(), when.getTime());
    assert.equal(s, long);
  });

  it('gives a property named __proto__ no power over prototypes', () => {
    const bytes = Buffer.concat([
      Buffer.of(0x03, 0, 9),
      Buffer.from('__proto__'),
      encodeAmf0({ polluted: true }),
      Buffer.of(0, 0, 9),
    ]);
    const [o] = decodeAmf0(bytes);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.ok(o !== null && typeof o === 'object');
  });

  it('refuses malformed values with an Amf0Error', () => {
    const cases: [string, Buffer][] = [
      ['a truncated number', Buffer.of(0x00, 1, 2, 3)],
      ['a string longer than the data', Buffer.of(0x02, 0, 10, 0x61)],
      ['a long string longer than the data', Buffer.of(0x0c, 0xff, 0xff, 0xff, 0xff, 0x61)],
      ['an object without its end', Buffer.of(0x03, 0, 1, 0x61, 0x05)],
      ['a stray object end', Buffer.of(0x09)],
      ['an unknown marker', Buffer.of(0x42)],
      ['a reference (unsupported)', Buffer.of(0x07, 0, 1)],
      ['a strict array claiming 4 billion items', Buffer.of(0x0a, 0xff, 0xff, 0xff, 0xff, 0x05)],
      ['a truncated date', Buffer.of(0x0b, 0, 0, 0, 0, 0, 0, 0, 0)],
      ['a truncated boolean', Buffer.of(0x01)],
    ];
    for (const [what, bytes] of cases) assert.throws(() => decodeAmf0(bytes), Amf0Error, what);
  });

  it('bounds nesting and the number of entries', () => {
    // 200 strict arrays of one item, each inside the one before.
    const deep = Buffer.concat(Array.from({ length: 200 }, () => Buffer.of(0x0a, 0, 0, 0, 1)));
    assert.throws(() => decodeAmf0(deep), /nested deeper/);
    const many: Record<string, number> = {};
    for (let i = 0; i < 5000; i++) many[`k${i}`] = i;
    assert.throws(() => decodeAmf0(encodeAmf0(many)), /more than 4096 properties/);
    assert.throws(() => decodeAmf0(encodeAmf0(new Array(5000).fill(1))), /does not fit/);
  });
});
