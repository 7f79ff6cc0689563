// Property-based fuzzing of the RTMP ingest: random bytes and mutations of a valid publisher's
// byte stream (handshake, connect, createStream, publish, metadata, audio and video), cut into
// random pieces. The parser alone: only its own protocol errors come out, never a TypeError or
// RangeError. A real server: every connection ends (closed by the server or by its idle
// timeout), no exception escapes, every accepted publish ends exactly once, no log line
// carries the key, and a valid publish afterwards is still taken. Bounded in runs and time; a
// failure prints fast-check's seed, which replays with `FUZZ_SEED=<seed>`.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { Amf0EcmaArray, encodeAmf0 } from '../../src/live/amf0.ts';
import type { IngestListener } from '../../src/live/ingest-types.ts';
import { ChunkReader } from '../../src/live/rtmp/chunk-reader.ts';
import { writeChunks } from '../../src/live/rtmp/chunk-writer.ts';
import { readCommand, type RtmpMessage } from '../../src/live/rtmp/messages.ts';
import { startRtmpServer } from '../../src/live/rtmp/index.ts';
import { isMediaplaneError } from '../../src/lib/errors.ts';
import { captureLog, recordingGate, ScriptedPublisher } from '../helpers/rtmp.ts';
import { fuzzOptions } from './options.ts';

const KEY = 'fuzz-StreamKey-0b9c8d7e6f';
/** The server's idle timeout: what closes a connection held open (generous: a loaded host delays the valid publish's answers). */
const IDLE_MS = 1500;
const options = fuzzOptions({ runs: 300, timeLimitMs: 10_000 });

const handshake = Buffer.concat([Buffer.of(3), Buffer.alloc(1536, 1), Buffer.alloc(1536, 2)]);

const message = (typeId: number, payload: Buffer, o: { csid?: number; streamId?: number; timestamp?: number } = {}) =>
  writeChunks(
    { chunkStreamId: o.csid ?? 3, timestamp: o.timestamp ?? 0, typeId, streamId: o.streamId ?? 0, payload },
    128,
  );

/** What a publisher sends after the handshake: commands, metadata, a chunk size change, media. */
function validSession(): Buffer {
  const chunkSize = Buffer.alloc(4);
  chunkSize.writeUInt32BE(256);
  const media = (typeId: number, n: number, t: number) =>
    writeChunks({ chunkStreamId: 6, timestamp: t, typeId, streamId: 1, payload: Buffer.alloc(n, t & 0xff) }, 256);
  return Buffer.concat([
    message(20, encodeAmf0('connect', 1, { app: 'live', tcUrl: 'rtmp://h/live', flashVer: 'FMLE/3.0' })),
    message(20, encodeAmf0('releaseStream', 2, null, KEY)),
    message(20, encodeAmf0('createStream', 3, null)),
    message(20, encodeAmf0('publish', 4, null, KEY, 'live'), { csid: 4, streamId: 1 }),
    message(1, chunkSize, { csid: 2 }),
    writeChunks(
      {
        chunkStreamId: 5,
        timestamp: 0,
        typeId: 18,
        streamId: 1,
        payload: encodeAmf0(
          '@setDataFrame',
          'onMetaData',
          new Amf0EcmaArray({ width: 320, height: 240, videocodecid: 7 }),
        ),
      },
      256,
    ),
    media(9, 300, 0),
    media(8, 40, 10),
    media(9, 1000, 33),
    media(8, 40, 0x1000000),
  ]);
}

type Mutation = { at: number; op: 'flip' | 'insert' | 'delete' | 'truncate' | 'repeat'; bytes: Uint8Array; n: number };

function mutate(base: Buffer, m: Mutation): Buffer {
  const at = m.at % (base.length + 1);
  switch (m.op) {
    case 'flip': {
      const copy = Buffer.from(base);
      for (const [i, b] of m.bytes.entries()) if (at + i < copy.length) copy[at + i] = b;
      return copy;
    }
    case 'insert':
      return Buffer.concat([base.subarray(0, at), m.bytes, base.subarray(at)]);
    case 'delete':
      return Buffer.concat([base.subarray(0, at), base.subarray(at + m.n)]);
    case 'truncate':
      return base.subarray(0, at);
    case 'repeat':
      return Buffer.concat([base.subarray(0, at + m.n), base.subarray(at)]);
  }
}

const mutation: fc.Arbitrary<Mutation> = fc.record({
  at: fc.nat(),
  op: fc.constantFrom('flip', 'flip', 'insert', 'delete', 'truncate', 'repeat'),
  bytes: fc.oneof(
    fc.uint8Array({ minLength: 1, maxLength: 8 }),
    fc.constantFrom(Uint8Array.of(0xff, 0xff, 0xff), Uint8Array.of(0)),
  ),
  n: fc.integer({ min: 1, max: 200 }),
});

const mutatedSession = fc
  .array(mutation, { minLength: 1, maxLength: 4 })
  .map((ms) => ms.reduce(mutate, validSession()));
const randomBytes = fc.uint8Array({ maxLength: 4000 }).map((b) => Buffer.from(b));
const pieces = fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 30 });

/** Cuts `bytes` at the sizes in `sizes` (repeated), the last piece the rest. */
function cut(bytes: Buffer, sizes: number[]): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const n = sizes[i % sizes.length] ?? bytes.length;
    out.push(bytes.subarray(at, at + n));
    at += n;
  }
  return out;
}

describe('fuzz: the RTMP parser', () => {
  it('throws only its own protocol errors for random and mutated streams, in any pieces', () => {
    fc.assert(
      fc.property(fc.oneof(mutatedSession, randomBytes), pieces, (bytes, sizes) => {
        const reader = new ChunkReader({
          maxMessageBytes: 64 * 1024,
          maxChunkStreams: 16,
          maxBufferedBytes: 128 * 1024,
        });
        try {
          for (const piece of cut(bytes, sizes))
            for (const m of reader.push(piece)) if (m.typeId === 20) readCommand(m as RtmpMessage);
        } catch (err) {
          assert.ok(isMediaplaneError(err), `not a protocol error: ${String(err)}`);
        }
      }),
      options,
    );
  });
});

describe('fuzz: the RTMP server', () => {
  const { log, lines } = captureLog();
  const recorder = recordingGate((key) =>
    key === KEY ? true : { accepted: false, code: 'BadName', description: 'unknown' },
  );
  let server: IngestListener;
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown): void => {
    uncaught.push(err);
  };

  before(async () => {
    process.on('uncaughtException', onUncaught);
    server = await startRtmpServer({
      host: '127.0.0.1',
      port: 0,
      log,
      gate: recorder.gate,
      idleTimeoutMs: IDLE_MS,
      limits: { maxMessageBytes: 256 * 1024, maxBufferedBytes: 512 * 1024 },
    });
  });
  after(async () => {
    await server.close();
    process.off('uncaughtException', onUncaught);
  });

  /** Connections held open, each closed by the server's idle timeout at the latest. */
  const held: Promise<void>[] = [];

  /**
   * Sends the pieces, then half-closes and waits for the server to close the connection; or,
   * told to hold, leaves it open for the idle timeout to close (awaited at the end, together).
   */
  async function send(bytes: Buffer, sizes: number[], hold: boolean): Promise<void> {
    const socket = net.connect(server.port, '127.0.0.1');
    socket.on('error', () => {}); // the server resets connections it refuses
    socket.resume();
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    await once(socket, 'connect');
    for (const piece of cut(bytes, sizes)) {
      if (socket.destroyed) break;
      if (!socket.write(piece)) await Promise.race([once(socket, 'drain').catch(() => {}), closed]);
    }
    if (hold) held.push(closed);
    else {
      socket.end();
      await closed;
    }
  }

  it('closes every connection, whatever it sends, without an escaped exception', async () => {
    // One in five holds its connection open: the idle timeout must close it.
    const holds = fc.integer({ min: 0, max: 4 }).map((n) => n === 0);
    let runs = 0;
    const session = fc.oneof(
      { weight: 3, arbitrary: mutatedSession.map((s) => Buffer.concat([handshake, s])) },
      {
        weight: 1,
        arbitrary: fc
          .array(mutation, { maxLength: 2 })
          .map((ms) => ms.reduce(mutate, Buffer.concat([handshake, validSession()]))),
      },
      { weight: 1, arbitrary: randomBytes },
      { weight: 1, arbitrary: randomBytes.map((b) => Buffer.concat([handshake, b])) },
    );
    await fc.assert(
      fc.asyncProperty(session, pieces, holds, (bytes, sizes, hold) => {
        runs += 1;
        return send(bytes, sizes, hold);
      }),
      options,
    );
    await Promise.all(held);
    assert.deepEqual(uncaught, []);
    process.stderr.write(
      `# ${runs} connections, ${recorder.publishes.filter((p) => p.accepted).length} accepted publishes\n`,
    );
  });

  it('ends every accepted publish once, logs no key, and still takes a valid publish', async () => {
    await Promise.all(recorder.publishes.filter((p) => p.accepted).map((p) => p.done));
    for (const p of recorder.publishes.filter((p) => p.accepted)) assert.ok(p.ended, 'a publish that never ended');
    assert.ok(
      recorder.publishes.some((p) => p.accepted),
      'no mutated session was accepted: the fuzzing went nowhere',
    );
    assert.ok(!lines.text.includes(KEY), 'the key is in a log line');
    const client = await ScriptedPublisher.connect(server.port);
    const status = await client.publish(KEY);
    assert.equal(status?.code, 'NetStream.Publish.Start');
    client.socket.destroy();
  });
});
