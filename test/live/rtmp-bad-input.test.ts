// What the RTMP server does with publishers that send what it cannot take, scripted byte by
// byte: HEVC, AV1 and VP9 over enhanced RTMP (which Debian's ffmpeg 5.1 cannot send) and legacy
// codec id 12 are refused with an onStatus error OBS shows; a wrong application, a missing key,
// a malformed handshake, a stall, garbage after a valid publish and a disconnect in the middle
// of a message each close that one connection with a log line, and the publish beside them
// goes on. A sink that is slow stops the server reading the publisher (backpressure).

import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { IngestListener, PublishGate } from '../../src/live/ingest-types.ts';
import { startRtmpServer } from '../../src/live/rtmp/index.ts';
import { captureLog, type RecordedPublish, recordingGate, ScriptedPublisher } from '../helpers/rtmp.ts';

const KEY = 'sEcReT-bad-input-key-71';
const IDLE_MS = 1500;
const { log, lines } = captureLog();
const recorder = recordingGate(() => true);
let server: IngestListener;
const clients: ScriptedPublisher[] = [];

async function publisher(key = KEY): Promise<{ client: ScriptedPublisher; rec: RecordedPublish }> {
  const client = await ScriptedPublisher.connect(server.port);
  clients.push(client);
  const n = recorder.publishes.length;
  const status = await client.publish(key);
  assert.equal(status?.code, 'NetStream.Publish.Start');
  return { client, rec: await recorder.nth(n) };
}

const video = (payload: Buffer, timestamp = 0) => ({ timestamp, typeId: 9, streamId: 1, payload });

/** An AVC keyframe tag body (legacy FLV: frame type 1, codec 7, NALU) of `n` bytes. */
const avc = (n: number): Buffer => Buffer.concat([Buffer.of(0x17, 1, 0, 0, 0), Buffer.alloc(n, 0x42)]);

describe('RTMP server with publishers that misbehave', () => {
  before(async () => {
    server = await startRtmpServer({ host: '127.0.0.1', port: 0, log, gate: recorder.gate, idleTimeoutMs: IDLE_MS });
  });
  after(async () => {
    for (const c of clients) c.socket.destroy();
    await server.close();
    assert.ok(!lines.text.includes(KEY), 'the stream key is in a log line');
  });

  for (const [what, payload, words] of [
    [
      'HEVC over enhanced RTMP',
      Buffer.concat([Buffer.of(0x90), Buffer.from('hvc1'), Buffer.alloc(30)]),
      /^HEVC over RTMP is not supported: send H\.264/,
    ],
    [
      'AV1 over enhanced RTMP',
      Buffer.concat([Buffer.of(0x90), Buffer.from('av01'), Buffer.alloc(30)]),
      /^AV1 over RTMP is not supported/,
    ],
    [
      'VP9 over enhanced RTMP',
      Buffer.concat([Buffer.of(0x91), Buffer.from('vp09'), Buffer.alloc(30)]),
      /^VP9 over RTMP is not supported/,
    ],
    [
      'HEVC as legacy codec id 12',
      Buffer.concat([Buffer.of(0x1c, 0), Buffer.alloc(30)]),
      /^HEVC over RTMP is not supported/,
    ],
  ] as const) {
    it(`refuses ${what} with NetStream.Publish.Rejected and the words OBS shows`, async () => {
      const { client, rec } = await publisher();
      const port = client.socket.localPort;
      client.send(video(avc(100)));
      client.send(video(payload, 33));
      const status = await client.nextCommand();
      assert.equal(status?.name, 'onStatus');
      const info = status?.args[0] as Record<string, unknown>;
      assert.equal(info.level, 'error');
      assert.equal(info.code, 'NetStream.Publish.Rejected');
      assert.match(String(info.description), words);
      await client.closed;
      await rec.done;
      assert.equal(rec.ended?.kind, 'refused');
      assert.match(rec.ended?.reason ?? '', words);
      // The header and the H.264 tag before it; nothing of the refused tag.
      assert.equal(rec.flv().length, 13 + 11 + 105 + 4);
      const line = lines.lines.find((l) => l.includes('media refused') && l.includes(`127.0.0.1:${port}`));
      assert.ok(line, 'a log line with the remote address');
    });
  }

  it('refuses another application than live, and a publish without a key, before the gate', async () => {
    const seen = recorder.publishes.length;
    const wrongApp = await ScriptedPublisher.connect(server.port);
    clients.push(wrongApp);
    const refused = await wrongApp.publish(KEY, 'vod');
    assert.equal(refused?.code, 'NetConnection.Connect.Rejected');
    await wrongApp.closed;
    const noKey = await ScriptedPublisher.connect(server.port);
    clients.push(noKey);
    const status = await noKey.publish('?only=query');
    assert.equal(status?.code, 'NetStream.Publish.BadName');
    assert.match(String(status?.description), /No stream key/);
    await noKey.closed;
    assert.equal(recorder.publishes.length, seen, 'the gate was asked');
  });

  it('closes a connection whose handshake is not RTMP, or not done in time', async () => {
    const http = net.connect(server.port, '127.0.0.1');
    http.on('error', () => {});
    http.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await once(http, 'close');
    assert.match(lines.text, /not a plain RTMP handshake \(version byte 71/);
    const slow = net.connect(server.port, '127.0.0.1');
    slow.on('error', () => {});
    slow.write(Buffer.of(3, 0, 0, 0)); // C0 and the start of C1, then nothing
    await once(slow, 'close');
    assert.match(lines.text, /the RTMP handshake was not done within/);
  });

  it('cuts a publisher that stalls, and ends one that leaves in the middle of a message', async () => {
    const stalled = await publisher();
    stalled.client.send(video(avc(50)));
    await stalled.rec.done;
    assert.equal(stalled.rec.ended?.kind, 'cut');
    assert.match(stalled.rec.ended?.reason ?? '', /nothing was received within 1.5 s/);

    const leaving = await publisher();
    leaving.client.send(video(avc(20)));
    // The first chunk of a 1000-byte message, then gone.
    leaving.client.socket.write(
      Buffer.concat([Buffer.of(0x04, 0, 0, 0, 0, 0x03, 0xe8, 9, 1, 0, 0, 0), Buffer.alloc(128)]),
    );
    leaving.client.socket.end();
    await leaving.rec.done;
    assert.deepEqual(leaving.rec.ended, {
      kind: 'left',
      reason: 'the publisher disconnected in the middle of a message',
    });
  });

  it('cuts a publisher that sends garbage after a valid publish; the one beside it goes on', async () => {
    const good = await publisher();
    const bad = await publisher();
    good.client.send(video(avc(100)));
    bad.client.send(video(avc(100)));
    bad.client.socket.write(Buffer.of(0x04, 0, 0, 0, 0xff, 0xff, 0xff, 0x09, 0x01, 0x00, 0x00, 0x00));
    await bad.rec.done;
    assert.equal(bad.rec.ended?.kind, 'cut');
    assert.match(bad.rec.ended?.reason ?? '', /^protocol error: a message of 16777215 bytes/);
    assert.match(lines.text, /rtmp: connection closed/);
    good.client.send(video(avc(100), 33));
    good.client.send(video(avc(100), 66));
    while (good.rec.flv().length < 13 + 3 * (11 + 105 + 4)) await new Promise((r) => setTimeout(r, 20));
    assert.equal(good.rec.ended, undefined);
    good.client.command('FCUnpublish', 5, null, KEY);
    await good.rec.done;
    assert.deepEqual(good.rec.ended, { kind: 'left', reason: 'the publisher stopped publishing' });
  });

  it('cuts a publisher whose metadata is not AMF0, and closes a connection whose command is not', async () => {
    const { client, rec } = await publisher();
    // @setDataFrame, then a string that claims 1000 bytes and has 3.
    client.send({ timestamp: 0, typeId: 18, streamId: 1, payload: Buffer.of(0x02, 0x03, 0xe8, 0x61, 0x62, 0x63) });
    await rec.done;
    assert.equal(rec.ended?.kind, 'cut');
    assert.match(rec.ended?.reason ?? '', /^protocol error: AMF0: a string runs past the end of the data/);
    await client.closed;
    const early = await ScriptedPublisher.connect(server.port);
    clients.push(early);
    early.send({ chunkStreamId: 3, timestamp: 0, typeId: 20, streamId: 0, payload: Buffer.of(0x02, 0, 7, 0x63, 0x6f) });
    await early.closed;
    assert.match(lines.text, /protocol error: AMF0: a string runs past the end of the data/);
  });

  it('cuts a publisher that floods tiny messages', async () => {
    const flooder = await publisher();
    flooder.client.send(video(Buffer.alloc(0)));
    // Format 3 headers of chunk stream 4 alone: each is a whole message of length 0.
    flooder.client.socket.write(Buffer.alloc(1024 * 1024, 0xc4));
    await flooder.rec.done;
    assert.equal(flooder.rec.ended?.kind, 'cut');
    assert.match(flooder.rec.ended?.reason ?? '', /more than 20000 messages in a second/);
  });

  it('ends a publish cut off while the gate decides, and one whose sink closes, as cut', async () => {
    const ends: { kind: string; reason: string }[] = [];
    const sinks: Writable[] = [];
    let calls = 0;
    const gate: PublishGate = async (attempt) => {
      calls += 1;
      if (calls === 1) attempt.disconnect('suspended meanwhile');
      await new Promise((r) => setTimeout(r, 50));
      const flv = new Writable({ write: (_c, _e, cb) => cb() });
      sinks.push(flv);
      return { accepted: true, sink: { flv, ended: (kind, reason) => ends.push({ kind, reason }) } };
    };
    const other = await startRtmpServer({ host: '127.0.0.1', port: 0, log, gate, idleTimeoutMs: 10_000 });
    try {
      const first = await ScriptedPublisher.connect(other.port);
      clients.push(first);
      assert.equal(await first.publish(KEY), undefined, 'the first publisher got an answer');
      while (ends.length < 1) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(ends[0], { kind: 'cut', reason: 'suspended meanwhile' });
      const second = await ScriptedPublisher.connect(other.port);
      clients.push(second);
      assert.equal((await second.publish(KEY))?.code, 'NetStream.Publish.Start');
      sinks[1]?.destroy();
      await second.closed;
      while (ends.length < 2) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(ends[1], { kind: 'cut', reason: "the stream's media sink closed" });
    } finally {
      await other.close();
    }
  });

  it('stops reading a publisher while its sink is full, and loses nothing', async () => {
    let release = (): void => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const written: Buffer[] = [];
    const slowGate: PublishGate = async () => ({
      accepted: true,
      sink: {
        flv: new Writable({
          highWaterMark: 1,
          write(chunk: Buffer, _enc, cb) {
            written.push(chunk);
            held.then(() => cb());
          },
        }),
        ended() {},
      },
    });
    const slow = await startRtmpServer({ host: '127.0.0.1', port: 0, log, gate: slowGate, idleTimeoutMs: 10_000 });
    try {
      const client = await ScriptedPublisher.connect(slow.port);
      clients.push(client);
      assert.equal((await client.publish(KEY))?.code, 'NetStream.Publish.Start');
      const tags = Array.from({ length: 24 }, (_, i) => avc(1024 * 1024 - 5 + i));
      for (const [i, t] of tags.entries()) client.send(video(t, i * 33));
      await new Promise((r) => setTimeout(r, 500));
      // The server read a tag and stopped: 24 MiB are still on their way.
      assert.ok(written.length <= 2, `${written.length} writes while the sink was full`);
      assert.ok(client.socket.writableLength > 0, 'the client could send everything');
      release();
      while (written.length < 1 + tags.length) await new Promise((r) => setTimeout(r, 20));
      for (const [i, t] of tags.entries()) assert.deepEqual(written[i + 1]?.subarray(11, 11 + t.length), t);
    } finally {
      await slow.close();
    }
  });
});
