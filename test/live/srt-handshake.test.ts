import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { test } from 'node:test';
import { SynCookies } from '../../src/live/srt/cookie.ts';
import {
  decodeStreamId,
  encodeStreamId,
  ExtensionType,
  type Handshake,
  HandshakeType,
  inductionResponse,
  parseHandshake,
  rejection,
  rejectionReason,
  SRT_MAGIC,
  streamIdOf,
  withCookie,
  writeHandshake,
} from '../../src/live/srt/handshake.ts';
import { readHeader, shutdownPacket, withTimestamp } from '../../src/live/srt/packet.ts';
import { exitOf, remuxArgs } from '../../src/live/srt/remux.ts';
import { assertGuardedInputs } from '../../src/transcode/media-input.ts';
import { publishTarget } from '../../src/live/srt/stream-id.ts';

// Byte-level tests of the SRT handshake as the relay reads and writes it (IETF
// draft-sharabayko-srt section 3.2.1), checked against libsrt's own bytes where it matters.

/** A printable stream id of `n` bytes whose characters differ from their neighbours. */
const streamIdOfLength = (n: number): string =>
  Array.from({ length: n }, (_, i) => String.fromCharCode(33 + ((i * 7) % 94))).join('');

function conclusion(streamId: string): Handshake {
  return {
    version: 5,
    encryption: 0,
    extensionField: 0x5,
    initialSequence: 123456,
    mtu: 1500,
    flowWindow: 8192,
    type: HandshakeType.conclusion,
    socketId: 0x1234_5678,
    cookie: 0xdead_beef,
    peerIp: Buffer.from([1, 0, 0, 127, ...Array(12).fill(0)]),
    extensions: [
      { type: ExtensionType.hsreq, content: Buffer.from('00010501000000bf00780000', 'hex') },
      { type: ExtensionType.sid, content: encodeStreamId(streamId) },
    ],
  };
}

test('a stream id of every length 1..512 travels in 32-bit words with the bytes of each reversed', () => {
  for (let n = 1; n <= 512; n++) {
    const id = streamIdOfLength(n);
    const wire = encodeStreamId(id);
    assert.equal(wire.length, Math.ceil(n / 4) * 4);
    for (let i = 0; i < wire.length; i++) {
      const word = Math.floor(i / 4);
      const source = word * 4 + (3 - (i % 4));
      assert.equal(wire[i], source < n ? id.charCodeAt(source) : 0, `length ${n}, byte ${i}`);
    }
    assert.equal(decodeStreamId(wire), id);
    const packet = writeHandshake(conclusion(id), { timestamp: 1, destinationSocketId: 0 });
    assert.equal(streamIdOf(parseHandshake(packet) ?? conclusion('')), id, `length ${n}`);
  }
  assert.deepEqual(encodeStreamId('abcde'), Buffer.from('dcba\0\0\0e', 'latin1'));
});

test('a stream id over 512 bytes is none', () => {
  const hs = conclusion('');
  hs.extensions[1] = { type: ExtensionType.sid, content: encodeStreamId(streamIdOfLength(516)) };
  const parsed = parseHandshake(writeHandshake(hs, { timestamp: 0, destinationSocketId: 0 }));
  assert.ok(parsed);
  assert.equal(streamIdOf(parsed), undefined);
});

test('a handshake written and read back keeps every field; cut short anywhere it is none, never a throw', () => {
  const hs = conclusion('#!::r=key,m=publish');
  const packet = writeHandshake(hs, { timestamp: 77, destinationSocketId: 0 });
  assert.deepEqual(parseHandshake(packet), hs);
  assert.deepEqual(readHeader(packet), { control: true, controlType: 0, timestamp: 77, destinationSocketId: 0 });
  // Header 16, fields 48: extension blocks end at 64 + 4 + 12 = 80 and 80 + 4 + 20 = 104.
  const whole = new Set([64, 80]);
  for (let n = 0; n < packet.length; n++) {
    const cut = parseHandshake(packet.subarray(0, n));
    if (whole.has(n)) assert.equal(cut?.extensions.length, n === 64 ? 0 : 1, `cut at ${n}`);
    else assert.equal(cut, undefined, `cut at ${n}`);
  }
  // An extension whose length runs past the packet.
  const overrun = Buffer.concat([packet.subarray(0, 64), Buffer.from([0, 5, 0xff, 0xff, 1, 2, 3, 4])]);
  assert.equal(parseHandshake(overrun), undefined);
  // A data packet and a control packet of another type are no handshake.
  assert.equal(parseHandshake(Buffer.alloc(64)), undefined);
  assert.equal(parseHandshake(shutdownPacket({ timestamp: 0, destinationSocketId: 1 })), undefined);
});

test('the induction response, the rejection and the shutdown carry what libsrt reads', () => {
  const request = { ...conclusion(''), version: 4, extensionField: 2, type: HandshakeType.induction, cookie: 0 };
  request.extensions = [];
  const answer = writeHandshake(inductionResponse(request, 0xcafe_f00d), {
    timestamp: 5,
    destinationSocketId: 0x12345678,
  });
  assert.equal(answer.length, 64);
  assert.equal(answer.readUInt32BE(12), 0x12345678, 'to the caller socket');
  assert.equal(answer.readUInt32BE(16), 5, 'version 5');
  assert.equal(answer.readUInt16BE(22), SRT_MAGIC);
  assert.equal(answer.readInt32BE(36), HandshakeType.induction);
  assert.equal(answer.readUInt32BE(44), 0xcafe_f00d);

  const refused = writeHandshake(rejection(conclusion('k'), 1403), { timestamp: 5, destinationSocketId: 0x12345678 });
  assert.equal(refused.length, 64, 'the fixed fields only');
  // libsrt: the handshake type is URQ_FAILURE_TYPES (1000) + the reason (SRT_REJX_FORBIDDEN 1403).
  assert.equal(refused.readInt32BE(36), 2403);
  assert.equal(rejectionReason(parseHandshake(refused) ?? conclusion('')), 1403);
  assert.equal(rejectionReason(conclusion('k')), undefined);

  const replayed = withCookie(writeHandshake(conclusion('k'), { timestamp: 0, destinationSocketId: 0 }), 42);
  assert.equal(parseHandshake(replayed)?.cookie, 42);
  assert.equal(streamIdOf(parseHandshake(replayed) ?? conclusion('')), 'k');

  // A replayed conclusion's timestamp moves on by the time it waited, wrapping at 32 bits.
  const aged = withTimestamp(replayed, 2 ** 32 - 10 + 25);
  assert.equal(readHeader(aged)?.timestamp, 15);
  assert.deepEqual(aged.subarray(12), replayed.subarray(12));

  assert.deepEqual(
    shutdownPacket({ timestamp: 9, destinationSocketId: 0xabcdef01 }),
    Buffer.from('80050000' + '00000000' + '00000009' + 'abcdef01' + '00000000', 'hex'),
  );
});

test('a stream id names the key to publish to: bare, access-control, percent-encoded; readers and junk refused', () => {
  const cases: [string | undefined, unknown][] = [
    ['k3y', { streamKey: 'k3y' }],
    ['#!::r=k3y,m=publish', { streamKey: 'k3y' }],
    ['#!::m=publish,u=someone,r=k3y,s=abc', { streamKey: 'k3y' }],
    ['#!::r=k3y', { streamKey: 'k3y' }],
    ['%23!%3A%3Ar%3Dk3y%2Cm%3Dpublish', { streamKey: 'k3y' }],
    ['#!::r=k3y,m=request', 1405],
    ['#!::r=k3y,m=bidirectional', 1405],
    ['#!::m=publish', 1400],
    ['#!::r', 1400],
    ['#!::', 1400],
    ['', 1400],
    [undefined, 1400],
  ];
  for (const [streamId, expected] of cases) {
    const target = publishTarget(streamId);
    if (typeof expected === 'number') {
      assert.ok('refused' in target, String(streamId));
      assert.equal(target.refused, expected, String(streamId));
      assert.ok(!target.why.includes('k3y'), 'a refusal quotes the key');
    } else assert.deepEqual(target, expected, String(streamId));
  }
});

test('a SYN cookie is good for its address, this minute and the next', () => {
  let now = 10 * 60_000 + 59_000;
  const cookies = new SynCookies({ now: () => now });
  const cookie = cookies.cookieFor('10.0.0.1:5000');
  assert.ok(cookies.valid('10.0.0.1:5000', cookie));
  assert.ok(!cookies.valid('10.0.0.1:5001', cookie));
  now += 2000;
  assert.ok(cookies.valid('10.0.0.1:5000', cookie));
  now += 60_000;
  assert.ok(!cookies.valid('10.0.0.1:5000', cookie));
});

test("the remux's end names what FLV cannot carry", () => {
  assert.deepEqual(exitOf(1, '[flv @ 0x55] Video codec hevc not compatible with flv\nCould not write header\n'), {
    code: 1,
    refusal: 'HEVC over SRT is not supported: send H.264 (x264 or NVENC H.264)',
    lastError: 'Could not write header',
  });
  assert.equal(exitOf(1, 'Audio codec opus not compatible with flv').refusal, 'opus audio is not supported: send AAC');
  assert.deepEqual(exitOf(0, ''), { code: 0 });
});

test('the remux opens only MPEG-TS over SRT from its loopback listener', () => {
  const args = remuxArgs({ port: 4321, listenTimeoutMs: 4500 });
  assertGuardedInputs(args);
  const input = args.indexOf('-i');
  assert.deepEqual(args.slice(input - 6, input + 2), [
    ...['-f', 'mpegts', '-format_whitelist', 'mpegts', '-protocol_whitelist', 'srt'],
    ...['-i', 'srt://127.0.0.1:4321?mode=listener&listen_timeout=4500000'],
  ]);
  assert.deepEqual(args.slice(-3), ['-flvflags', 'no_duration_filesize', 'pipe:1']);
});

/** The conclusion libsrt (ffmpeg's caller) sends with `streamId`, answered with our induction response. */
async function libsrtConclusion(streamId: string): Promise<Handshake> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const ffmpeg = spawn('ffmpeg', [
    ...['-hide_banner', '-nostdin', '-v', 'quiet', '-f', 'lavfi', '-i', 'testsrc=size=64x64:rate=5', '-t', '1'],
    ...['-srt_streamid', streamId, '-f', 'mpegts', `srt://127.0.0.1:${socket.address().port}`],
  ]);
  try {
    return await new Promise<Handshake>((resolve, reject) => {
      ffmpeg.on('close', (code) => reject(new Error(`ffmpeg exited (${code}) before its conclusion`)));
      socket.on('message', (msg, from) => {
        const hs = parseHandshake(msg);
        if (hs?.type === HandshakeType.induction) {
          const answer = writeHandshake(inductionResponse(hs, 99), { timestamp: 0, destinationSocketId: hs.socketId });
          socket.send(answer, from.port, from.address);
        } else if (hs?.type === HandshakeType.conclusion) resolve(hs);
      });
    });
  } finally {
    ffmpeg.kill('SIGKILL');
    socket.close();
  }
}

test("libsrt's own conclusion carries our cookie and its stream id, read back whole", async () => {
  for (const n of [1, 6, 512]) {
    const id = streamIdOfLength(n);
    const hs = await libsrtConclusion(id);
    assert.equal(hs.version, 5);
    assert.equal(hs.cookie, 99);
    assert.ok(hs.extensions.some((e) => e.type === ExtensionType.hsreq));
    assert.equal(streamIdOf(hs), id, `length ${n}`);
  }
});
