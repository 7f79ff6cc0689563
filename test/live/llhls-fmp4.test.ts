import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InputUnreadableError } from '../../src/lib/errors.ts';
import { type Box, BoxSplitter, readFragment, readInit } from '../../src/live/llhls/fmp4.ts';
import { LiveRendition } from '../../src/live/llhls/index.ts';
import { fmp4File, topLevelBoxes } from './llhls-source.ts';

// The fMP4 reader of the LL-HLS packager: top-level boxes from bytes in any chunking, the
// init segment's tracks and codecs, each fragment's times and keyframes.

const LIMIT = { maxBoxBytes: 16 << 20 };

function splitAll(splitter: BoxSplitter, chunks: Buffer[]): Box[] {
  return chunks.flatMap((chunk) => splitter.push(chunk));
}

/** A deterministic PRNG (mulberry32), so a failing split replays. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function box(type: string, payload: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.writeUInt32BE(8 + payload.length);
  header.write(type, 4, 'latin1');
  return Buffer.concat([header, payload]);
}

describe('box splitter', () => {
  test('bytes fed one at a time give the same boxes as the whole file', async () => {
    const file = await fmp4File(2);
    const expected = topLevelBoxes(file);
    const splitter = new BoxSplitter(LIMIT);
    const boxes: Box[] = [];
    for (let i = 0; i < file.length; i++) boxes.push(...splitter.push(file.subarray(i, i + 1)));
    assert.deepEqual(
      boxes.map((b) => b.type),
      expected.map((b) => b.type),
    );
    assert.deepEqual(Buffer.concat(boxes.map((b) => b.bytes)), file);
    assert.deepEqual(
      boxes.slice(0, 4).map((b) => b.type),
      ['ftyp', 'moov', 'moof', 'mdat'],
    );
  });

  test('random splits, empty chunks among them, give the same boxes', async () => {
    const file = await fmp4File(2);
    const expected = topLevelBoxes(file).map((b) => b.bytes);
    for (const seed of [1, 2, 3, 42, 1234]) {
      const next = random(seed);
      const chunks: Buffer[] = [];
      for (let at = 0; at < file.length; ) {
        const n = Math.floor(next() ** 3 * 40_000);
        chunks.push(file.subarray(at, at + n));
        at += n;
      }
      const boxes = splitAll(new BoxSplitter(LIMIT), chunks);
      assert.deepEqual(
        boxes.map((b) => b.bytes),
        expected,
        `seed ${seed}`,
      );
    }
  });

  test('a 64-bit size is read, also when its header arrives split', () => {
    const payload = Buffer.from('0123456789');
    const large = Buffer.alloc(16);
    large.writeUInt32BE(1);
    large.write('mdat', 4, 'latin1');
    large.writeBigUInt64BE(BigInt(16 + payload.length), 8);
    const stream = Buffer.concat([large, payload, box('free', Buffer.from('x'))]);
    for (let cut = 1; cut < stream.length; cut++) {
      const boxes = splitAll(new BoxSplitter(LIMIT), [stream.subarray(0, cut), stream.subarray(cut)]);
      assert.deepEqual(
        boxes.map((b) => [b.type, b.bytes.length]),
        [
          ['mdat', 26],
          ['free', 9],
        ],
        `cut at ${cut}`,
      );
    }
  });

  test('a partial box waits for the rest; reset() forgets it', () => {
    const splitter = new BoxSplitter(LIMIT);
    const whole = box('moof', Buffer.alloc(100));
    assert.deepEqual(splitter.push(whole.subarray(0, 50)), []);
    splitter.reset();
    assert.deepEqual(
      splitter.push(box('free', Buffer.alloc(2))).map((b) => b.type),
      ['free'],
    );
  });

  test('malformed boxes are refused with an error that says what and where', () => {
    const tooShort = Buffer.from([0, 0, 0, 4, 0x6d, 0x6f, 0x6f, 0x66]);
    const cases: [string, Buffer, RegExp][] = [
      ['size under the header', tooShort, /at byte 0: box 'moof' of 4 bytes, shorter than its own header/],
      ['size 0', Buffer.from([0, 0, 0, 0, 0x6d, 0x64, 0x61, 0x74]), /size 0/],
      ['over the bound', Buffer.from([0x7f, 0, 0, 0, 0x6d, 0x64, 0x61, 0x74]), /over the 16777216-byte limit/],
      ['binary type', Buffer.from([0, 0, 0, 9, 0, 1, 2, 3]), /four printable characters/],
    ];
    for (const [what, bytes, message] of cases) {
      const splitter = new BoxSplitter(LIMIT);
      // A valid box first, so the offset in the message is not always 0.
      const lead = what === 'size under the header' ? Buffer.alloc(0) : box('free', Buffer.alloc(4));
      assert.throws(
        () => splitAll(splitter, [lead, bytes.subarray(0, 5), bytes.subarray(5)]),
        (err: unknown) => err instanceof InputUnreadableError && message.test(err.message),
        what,
      );
    }
    assert.throws(
      () => new BoxSplitter(LIMIT).push(Buffer.concat([box('free', Buffer.alloc(4)), tooShort])),
      /at byte 12/,
    );
  });
});

describe('init and fragment readers', () => {
  test('the init segment gives tracks, timescales, CODECS and the picture size', async () => {
    const [ftyp, moov] = topLevelBoxes(await fmp4File(2));
    const info = readInit(Buffer.concat([ftyp?.bytes ?? Buffer.alloc(0), moov?.bytes ?? Buffer.alloc(0)]));
    const video = info.tracks.find((t) => t.handler === 'vide');
    const audio = info.tracks.find((t) => t.handler === 'soun');
    assert.ok(video && audio);
    assert.ok(video.timescale > 0 && audio.timescale === 44_100, `timescales ${video.timescale} ${audio.timescale}`);
    // x264's ultrafast writes Constrained Baseline (profile_idc 66 = 0x42, constraint_set0 and 1
    // = 0xc0); level 1.3 (0x0d) fits 320x240 at 30 fps. ffprobe says the same (profile, level 13).
    assert.equal(video.codec, 'avc1.42c00d');
    assert.equal(audio.codec, 'mp4a.40.2');
    assert.equal(info.codecs, 'avc1.42c00d,mp4a.40.2');
    assert.deepEqual([info.width, info.height], [320, 240]);
  });

  test('fragments: decode times follow on, keyframes once a second', async () => {
    const boxes = topLevelBoxes(await fmp4File(3));
    const info = readInit(Buffer.concat([boxes[0]?.bytes ?? Buffer.alloc(0), boxes[1]?.bytes ?? Buffer.alloc(0)]));
    const video = info.tracks.find((t) => t.handler === 'vide');
    assert.ok(video);
    const fragments = boxes
      .filter((b) => b.type === 'moof')
      .map((b) => readFragment(b.bytes, info.tracks).find((f) => f.trackId === video.trackId));
    let expectedStart = 0;
    const keyframeTimes: number[] = [];
    for (const f of fragments) {
      assert.ok(f);
      assert.equal(f.baseMediaDecodeTime, expectedStart, 'each fragment starts where the last ended');
      if (f.startsWithSync) keyframeTimes.push(f.baseMediaDecodeTime / video.timescale);
      expectedStart += f.duration;
      assert.ok(f.duration / video.timescale <= 0.3, `a fragment of ${f.duration / video.timescale} s`);
    }
    assert.deepEqual(
      keyframeTimes.map((t) => Math.round(t)),
      [0, 1, 2],
    );
    assert.ok(Math.abs(expectedStart / video.timescale - 3) < 0.05, `${expectedStart / video.timescale} s in all`);
  });
});

test('mutated init segments and fragments are read or refused as unreadable, never another error', async () => {
  const boxes = topLevelBoxes(await fmp4File(2));
  const init = Buffer.concat([boxes[0]?.bytes ?? Buffer.alloc(0), boxes[1]?.bytes ?? Buffer.alloc(0)]);
  const { tracks } = readInit(init);
  const moof = boxes[2]?.bytes ?? Buffer.alloc(0);
  const next = random(7);
  let refused = 0;
  for (let round = 0; round < 3000; round++) {
    const [original, read] =
      round % 2 === 0 ? [init, (b: Buffer) => readInit(b)] : [moof, (b: Buffer) => readFragment(b, tracks)];
    const bytes = Buffer.from(original);
    for (let flips = 1 + Math.floor(next() * 4); flips > 0; flips--) {
      bytes[Math.floor(next() * bytes.length)] = Math.floor(next() * 256);
    }
    const cut = next() < 0.3 ? bytes.subarray(0, Math.floor(next() * bytes.length)) : bytes;
    try {
      read(cut);
    } catch (err) {
      assert.ok(err instanceof InputUnreadableError, `round ${round}: ${(err as Error).stack}`);
      refused++;
    }
  }
  assert.ok(refused > 100, `${refused} refused`);
});

test('a LiveRendition fed a mutated stream stops at what is unreadable and says why, or packages it; write never throws', async () => {
  const file = await fmp4File(2);
  const next = random(11);
  for (let round = 0; round < 200; round++) {
    const bytes = Buffer.from(file);
    for (let flips = 1 + Math.floor(next() * 8); flips > 0; flips--) {
      // Most flips in the first 8 KB: the init segment and the first fragments' headers.
      const at = Math.floor(next() ** 3 * bytes.length);
      bytes[at] = Math.floor(next() * 256);
    }
    const rendition = new LiveRendition({
      name: 'r',
      timing: { partTargetSecs: 0.25, segmentTargetSecs: 1, windowSecs: 30 },
    });
    for (let at = 0; at < bytes.length; at += 4096) rendition.write(bytes.subarray(at, at + 4096));
    const { unreadable } = rendition.stats();
    if (unreadable !== undefined) assert.match(unreadable, /^fragmented MP4 unreadable/, `round ${round}`);
    rendition.end();
    const answer = await rendition.playlist({});
    assert.equal(answer.status, 200);
  }
});
