import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { type FlvTagInfo, FlvFormatError, FlvReader } from '../../src/live/flv-reader.ts';
import { spsPictureSize } from '../../src/live/h264-sps.ts';
import { cachedMedia } from '../helpers/media-cache.ts';

const run = promisify(execFile);

/** A 3 s FLV as a publisher sends it: H.264 (keyframes every 15 frames) and AAC, with or without onMetaData. */
function flvOf(o: { name: string; size: string; metadata: boolean }): Promise<string> {
  return cachedMedia(o.name, async (out) => {
    await run('ffmpeg', [
      ...['-hide_banner', '-v', 'error', '-y'],
      ...['-f', 'lavfi', '-i', `testsrc2=size=${o.size}:rate=15:duration=3`],
      ...['-f', 'lavfi', '-i', 'sine=frequency=440:duration=3'],
      ...['-c:v', 'libx264', '-preset', 'ultrafast', '-g', '15', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-b:a', '64k'],
      ...(o.metadata ? [] : ['-flvflags', 'no_metadata']),
      ...['-f', 'flv', out],
    ]);
  });
}

/** Pushes `bytes` in pieces of the sizes `cut` gives, so headers and tags split at every kind of place. */
function readIn(bytes: Buffer, cut: (i: number) => number): { reader: FlvReader; tags: FlvTagInfo[] } {
  const tags: FlvTagInfo[] = [];
  const reader = new FlvReader({ onTag: (t) => tags.push(t) });
  let at = 0;
  for (let i = 0; at < bytes.length; i++) {
    const n = Math.max(1, cut(i));
    reader.push(bytes.subarray(at, at + n));
    at += n;
  }
  return { reader, tags };
}

test('an FLV read whole or split anywhere tells the same source, tags and keyframes', async () => {
  const bytes = await readFile(await flvOf({ name: 'live-flv-320x240.flv', size: '320x240', metadata: true }));
  const whole = readIn(bytes, () => bytes.length);
  assert.deepEqual(
    { ...whole.reader.source, encoder: undefined },
    {
      videoCodec: 'h264',
      audioCodec: 'aac',
      width: 320,
      height: 240,
      fps: 15,
      declaredKbps: whole.reader.source.declaredKbps,
      encoder: undefined,
    },
  );
  assert.match(whole.reader.source.encoder ?? '', /Lavf/);
  assert.equal(whole.reader.metadataSeen, true);
  assert.equal(whole.reader.videoFrames, 45);
  assert.equal(whole.reader.bytes, bytes.length);
  // A keyframe every 15 frames at 15 fps: one a second (after the audio's priming delay).
  const [k0 = 0, ...rest] = whole.reader.keyframesMs;
  assert.deepEqual(
    rest.map((k) => k - k0),
    [1000, 2000],
  );
  assert.equal(whole.reader.maxKeyframeGapMs, 1000);
  assert.ok(whole.reader.mediaMs >= 2900, `media time ${whole.reader.mediaMs}`);
  assert.equal(whole.tags.filter((t) => t.sequenceHeader).length, 2);

  for (const cut of [() => 1, (i: number) => (i % 7) + 1, (i: number) => [11, 4, 9, 13, 1, 300][i % 6] ?? 1]) {
    const split = readIn(bytes, cut);
    assert.deepEqual(split.reader.source, whole.reader.source);
    assert.deepEqual(split.tags, whole.tags);
    assert.deepEqual(split.reader.keyframesMs, whole.reader.keyframesMs);
  }
});

test('without onMetaData the picture size comes from the SPS of the AVC decoder configuration', async () => {
  // 426x240 is not a multiple of 16 (27 macroblocks = 432 wide): the SPS crops it.
  const bytes = await readFile(await flvOf({ name: 'live-flv-426x240-nometa.flv', size: '426x240', metadata: false }));
  const { reader } = readIn(bytes, (i) => (i % 5) + 3);
  assert.equal(reader.metadataSeen, false);
  assert.equal(reader.source.width, 426);
  assert.equal(reader.source.height, 240);
  assert.equal(reader.source.fps, undefined);
  assert.equal(reader.source.videoCodec, 'h264');
});

test('an SPS with emulation prevention bytes and High profile fields reads its size', () => {
  // x264's SPS of a 1280x720 High profile stream (profile_idc 100; 720 = 45 macroblocks, no crop).
  const sps720 = Buffer.from('6764001facd9405005bb0110000003001000000303c0f183196', 'hex');
  assert.deepEqual(spsPictureSize(sps720), { width: 1280, height: 720 });
  // High 4:2:2 (profile_idc 122) of 1918x1078: cropped in 4:2:2's units (2 across, 1 down).
  const sps422 = Buffer.from('677a0028bcd940780227a8bc0440000003004000000f03c60c658', 'hex');
  assert.deepEqual(spsPictureSize(sps422), { width: 1918, height: 1078 });
  assert.equal(spsPictureSize(Buffer.from('67', 'hex')), undefined);
});

test('bytes that are not FLV are refused with FlvFormatError, wherever they start', async () => {
  assert.throws(() => new FlvReader().push(Buffer.from('GET / HTTP/1.1\r\n')), FlvFormatError);
  const bytes = await readFile(await flvOf({ name: 'live-flv-320x240.flv', size: '320x240', metadata: true }));
  const reader = new FlvReader();
  // The end of the fifth tag: 13 bytes of header, then each tag's 11 + size + 4.
  let end = 13;
  for (let i = 0; i < 5; i++) end += 15 + bytes.readUIntBE(end + 1, 3);
  reader.push(bytes.subarray(0, end));
  // A publisher that sends garbage after a valid start: a tag type FLV does not have.
  assert.throws(() => reader.push(Buffer.alloc(64, 0x41)), FlvFormatError);
  // A script tag whose AMF0 is cut short.
  const bad = Buffer.concat([
    bytes.subarray(0, 13),
    Buffer.from([18, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 9, 0, 0, 0, 14]),
  ]);
  assert.throws(() => new FlvReader().push(bad), FlvFormatError);
});

test('the ingest rate is bytes per second over the last seconds', () => {
  let now = 0;
  const reader = new FlvReader({ now: () => now });
  const header = Buffer.from('464c5601050000000900000000', 'hex');
  reader.push(header);
  for (let i = 0; i < 40; i++) {
    now += 100;
    // A script tag with an empty AMF0 string: 11 + 3 + 4 bytes.
    reader.push(Buffer.from([18, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 14]));
  }
  // 18 bytes each 100 ms = 180 B/s.
  assert.ok(Math.abs(reader.bytesPerSecond() - 180) < 1, `${reader.bytesPerSecond()}`);
});
