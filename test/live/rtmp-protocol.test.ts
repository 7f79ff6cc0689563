// What the RTMP server says to a publisher, message by message (Adobe's RTMP specification,
// sections 5.4, 7.1.7 and 7.2): connect's control messages and _result, releaseStream and
// FCPublish answered, createStream's stream id, StreamBegin before NetStream.Publish.Start,
// Ping answered, Acknowledgements in the window the publisher asked for, a handshake with a
// Flash digest in C1 accepted, and the key handed to the gate without its `?query`.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { IngestListener } from '../../src/live/ingest-types.ts';
import { startRtmpServer } from '../../src/live/rtmp/index.ts';
import { MessageType } from '../../src/live/rtmp/messages.ts';
import { captureLog, recordingGate, ScriptedPublisher } from '../helpers/rtmp.ts';

const { log } = captureLog();
const recorder = recordingGate(() => true);
let server: IngestListener;
const clients: ScriptedPublisher[] = [];

async function connect(): Promise<ScriptedPublisher> {
  const client = await ScriptedPublisher.connect(server.port);
  clients.push(client);
  return client;
}

const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};

describe('RTMP server messages', () => {
  before(async () => {
    server = await startRtmpServer({ host: '127.0.0.1', port: 0, log, gate: recorder.gate, idleTimeoutMs: 10_000 });
  });
  after(async () => {
    for (const c of clients) c.socket.destroy();
    await server.close();
  });

  it('answers connect with its control messages and NetConnection.Connect.Success', async () => {
    const client = await connect();
    client.command('connect', 1, { app: 'live/', tcUrl: 'rtmp://h/live/', flashVer: 'FMLE/3.0' });
    const result = await client.nextCommand();
    assert.equal(result?.name, '_result');
    assert.equal(result?.transactionId, 1);
    assert.equal((result?.args[0] as Record<string, unknown> | undefined)?.code, 'NetConnection.Connect.Success');
    const controls = client.received
      .filter((m) => m.chunkStreamId === 2)
      .map((m) => [m.typeId, m.payload.readUInt32BE(0)]);
    assert.deepEqual(controls, [
      [MessageType.WindowAckSize, 2_500_000],
      [MessageType.SetPeerBandwidth, 2_500_000],
      [MessageType.SetChunkSize, 4096],
    ]);
  });

  it('answers releaseStream, FCPublish and createStream, then StreamBegin and NetStream.Publish.Start', async () => {
    const client = await connect();
    client.command('connect', 1, { app: 'live' });
    await client.nextCommand();
    client.command('releaseStream', 2, null, 'k');
    client.command('FCPublish', 3, null, 'k');
    client.command('createStream', 4, null);
    const answers = [await client.nextCommand(), await client.nextCommand(), await client.nextCommand()];
    assert.deepEqual(
      answers.map((a) => [a?.name, a?.transactionId]),
      [
        ['_result', 2],
        ['_result', 3],
        ['_result', 4],
      ],
    );
    assert.equal(answers[2]?.args[0], 1, 'the stream id');
    const n = recorder.publishes.length;
    client.command('publish', 5, null, 'the-key?secret=1&x=2', 'live');
    const status = await client.nextCommand();
    assert.equal((status?.args[0] as Record<string, unknown> | undefined)?.code, 'NetStream.Publish.Start');
    const streamBegin = await client.find(
      (m) => m.typeId === MessageType.UserControl && m.payload.readUInt16BE(0) === 0,
    );
    const start = await client.find((m) => m.typeId === MessageType.CommandAmf0 && m.streamId === 1);
    assert.ok(streamBegin !== undefined && start !== undefined && streamBegin < start, 'StreamBegin before onStatus');
    assert.equal(client.received[streamBegin]?.payload.readUInt32BE(2), 1);
    assert.equal((await recorder.nth(n)).attempt.streamKey, 'the-key');
  });

  it('answers a Ping with its timestamp, and acknowledges each window of bytes the publisher asked for', async () => {
    const client = await connect();
    client.send({ chunkStreamId: 2, timestamp: 0, typeId: MessageType.WindowAckSize, streamId: 0, payload: u32(5000) });
    client.send({
      chunkStreamId: 2,
      timestamp: 0,
      typeId: MessageType.UserControl,
      streamId: 0,
      payload: Buffer.concat([Buffer.of(0, 6), u32(123456)]),
    });
    const pong = await client.find((m) => m.typeId === MessageType.UserControl && m.payload.readUInt16BE(0) === 7);
    assert.equal(pong === undefined ? undefined : client.received[pong]?.payload.readUInt32BE(2), 123456);
    client.command('connect', 1, { app: 'live', padding: 'x'.repeat(6000) });
    const ack = await client.find((m) => m.typeId === MessageType.Acknowledgement);
    const sequence = ack === undefined ? 0 : (client.received[ack]?.payload.readUInt32BE(0) ?? 0);
    // The handshake (3073 bytes) and at least one window since.
    assert.ok(sequence >= 5000, `acknowledged ${sequence} bytes`);
  });

  it('accepts a handshake whose C1 carries a Flash digest (non-zero version field)', async () => {
    const client = await ScriptedPublisher.connect(server.port, { c1Version: [9, 0, 124, 2] });
    clients.push(client);
    // S1's version field is zero, so digest clients (librtmp, ffmpeg) fall back to the plain handshake.
    assert.deepEqual([...client.s1.subarray(4, 8)], [0, 0, 0, 0]);
    assert.deepEqual(client.s2, client.c1);
    assert.equal((await client.publish('digest-key'))?.code, 'NetStream.Publish.Start');
  });
});
