import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createSocket } from 'node:dgram';
import { flowing, KEY, probeFlv, publish, startRelay } from './srt-harness.ts';

// The SRT relay with real ffmpeg publishers (libsrt callers) and a stand-in gate whose sinks
// write each publish's FLV to a file, as the live runtime's would read it.

test('an SRT publish with the stream key arrives as FLV with both tracks and its duration', async (t) => {
  const h = await startRelay(t);
  const pub = publish(t, { port: h.relay.port, streamId: KEY, seconds: 4 });
  const { code, stderr } = await pub.exited;
  assert.equal(code, 0, stderr);
  const [end] = h.ends;
  assert.ok(end);
  const ended = await end;
  assert.deepEqual([ended.kind, ended.reason], ['left', 'the publisher closed the connection']);
  const flv = await probeFlv(ended.file);
  assert.deepEqual(flv.codecs, ['aac', 'h264']);
  t.diagnostic(`FLV ${flv.duration} s of a 4 s publish`);
  assert.ok(flv.duration > 3.5 && flv.duration < 4.6, `duration ${flv.duration}`);
  assert.equal(h.attempts.length, 1);
  assert.equal(h.attempts[0]?.protocol, 'srt');
  assert.match(h.attempts[0]?.remote ?? '', /^127\.0\.0\.1:\d+$/);
  assert.equal(h.relay.remuxStarts, 1);
  assert.equal(h.relay.sessions, 0);
  assert.ok(!h.logs.join('').includes(KEY), 'the key is in a log line');
});

test('two publishers at once, one with the access-control stream id, each get their own remux', async (t) => {
  const h = await startRelay(t);
  const plain = publish(t, { port: h.relay.port, streamId: KEY, seconds: 4 });
  const accessControl = publish(t, { port: h.relay.port, streamId: `#!::r=${KEY},m=publish`, seconds: 4 });
  for (const p of [plain, accessControl]) {
    const { code, stderr } = await p.exited;
    assert.equal(code, 0, stderr);
  }
  assert.equal(h.ends.length, 2);
  for (const end of h.ends) {
    const ended = await end;
    assert.equal(ended.kind, 'left');
    const flv = await probeFlv(ended.file);
    assert.deepEqual(flv.codecs, ['aac', 'h264']);
    t.diagnostic(`FLV ${flv.duration} s of a 4 s publish`);
    assert.ok(flv.duration > 3.5 && flv.duration < 4.6, `duration ${flv.duration}`);
  }
  assert.deepEqual(
    h.attempts.map((a) => a.streamKey),
    [KEY, KEY],
  );
  assert.equal(await h.remuxProcesses(), 2);
});

/** Datagrams no SRT peer sends: too short, too long, random, a handshake cut short, a conclusion without an induction. */
function garbage(): Buffer[] {
  const random = (n: number): Buffer => Buffer.from(Array.from({ length: n }, () => Math.floor(Math.random() * 256)));
  const handshake = (type: number, length: number): Buffer => {
    const b = Buffer.alloc(length);
    b.writeUInt32BE(0x80000000, 0);
    if (length >= 40) b.writeInt32BE(type, 36);
    return b;
  };
  return [
    Buffer.alloc(0),
    random(1),
    random(15),
    random(16),
    random(64),
    random(1500),
    random(1501),
    random(9000),
    handshake(1, 40),
    handshake(-1, 64),
    handshake(-1, 64 + 6),
    Buffer.concat([handshake(-1, 64), Buffer.from([0, 5, 0xff, 0xff])]),
    ...Array.from({ length: 200 }, (_, i) => random(16 + (i % 100))),
  ];
}

test('garbage datagrams at the port do not disturb a running publish, and are logged once per peer', async (t) => {
  const h = await startRelay(t);
  const pub = publish(t, { port: h.relay.port, streamId: KEY, seconds: 5 });
  await flowing(h, 0, 20_000);
  const senders = [createSocket('udp4'), createSocket('udp4')];
  t.after(() => {
    for (const s of senders) s.close();
  });
  for (const sender of senders)
    for (const packet of garbage())
      await new Promise<void>((resolve) => sender.send(packet, h.relay.port, '127.0.0.1', () => resolve()));
  const { code, stderr } = await pub.exited;
  assert.equal(code, 0, stderr);
  const ended = await h.ends[0];
  assert.equal(ended?.kind, 'left');
  const flv = await probeFlv(ended?.file ?? '');
  assert.deepEqual(flv.codecs, ['aac', 'h264']);
  t.diagnostic(`FLV ${flv.duration} s of a 5 s publish beside ${senders.length * garbage().length} garbage datagrams`);
  assert.ok(flv.duration > 4.5 && flv.duration < 5.6, `duration ${flv.duration}`);
  const dropLines = h.logs.filter((l) => l.includes('srt: dropped'));
  assert.equal(dropLines.length, senders.length, dropLines.join(''));
  assert.equal(h.attempts.length, 1);
});

test('disconnect() cuts a publish off: the publisher is told, the sink ends as cut', async (t) => {
  const h = await startRelay(t);
  const pub = publish(t, { port: h.relay.port, streamId: KEY, seconds: 14 });
  await flowing(h, 0, 20_000);
  h.attempts[0]?.disconnect('the stream was terminated');
  const ended = await h.ends[0];
  assert.deepEqual([ended?.kind, ended?.reason], ['cut', 'the stream was terminated']);
  // Cut off, the publisher fails before its 14 s are over (a publish that ran out exits 0).
  const { code } = await pub.exited;
  assert.notEqual(code, 0);
  assert.equal(h.relay.sessions, 0);
});

test('close() ends every publish as cut and stops its remux', async (t) => {
  const h = await startRelay(t);
  const pub = publish(t, { port: h.relay.port, streamId: KEY, seconds: 14 });
  await flowing(h, 0, 20_000);
  await h.relay.close();
  const ended = await h.ends[0];
  assert.deepEqual([ended?.kind, ended?.reason], ['cut', 'the ingest is closing']);
  const flv = await probeFlv(ended?.file ?? '');
  assert.deepEqual(flv.codecs, ['aac', 'h264']);
  const { code } = await pub.exited;
  assert.notEqual(code, 0);
});
