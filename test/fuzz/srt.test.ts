// Property-based fuzzing of the SRT ingest: random bytes and mutations of valid handshakes
// (an induction, a conclusion with HSREQ and a stream id). The parser alone: it never throws,
// and what it reads writes back to the same handshake. A real relay: mutated conclusions sent
// with a cookie the relay gave (so they reach the stream-id and gate checks), beside random
// datagrams: no exception escapes, no log line carries the key, no remux starts for anything
// but the key, and a valid ffmpeg publish afterwards is still taken. Bounded in runs and time;
// a failure prints fast-check's seed, which replays with `FUZZ_SEED=<seed>`.

import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  encodeStreamId,
  ExtensionType,
  type Handshake,
  HandshakeType,
  inductionRequest,
  inductionResponse,
  parseHandshake,
  rejection,
  streamIdOf,
  writeHandshake,
} from '../../src/live/srt/handshake.ts';
import { publishTarget } from '../../src/live/srt/stream-id.ts';
import { KEY, publish, startRelay } from '../live/srt-harness.ts';
import { fuzzOptions } from './options.ts';

const options = fuzzOptions({ runs: 300, timeLimitMs: 10_000 });

function conclusion(o: { streamId: string; cookie: number; socketId: number }): Handshake {
  return {
    ...inductionRequest({ socketId: o.socketId, initialSequence: 1000 }),
    version: 5,
    extensionField: 0x5,
    type: HandshakeType.conclusion,
    cookie: o.cookie,
    extensions: [
      { type: ExtensionType.hsreq, content: Buffer.from('00010501000000bf00780000', 'hex') },
      { type: ExtensionType.sid, content: encodeStreamId(o.streamId) },
    ],
  };
}

const valid = [
  writeHandshake(inductionRequest({ socketId: 7, initialSequence: 1 }), { timestamp: 0, destinationSocketId: 0 }),
  writeHandshake(conclusion({ streamId: `#!::r=${KEY},m=publish`, cookie: 9, socketId: 7 }), {
    timestamp: 0,
    destinationSocketId: 0,
  }),
];

/** A datagram: random bytes, or a valid handshake with bytes flipped, cut short or junk appended. */
const datagram = (base: fc.Arbitrary<Buffer>) =>
  fc.oneof(
    fc.uint8Array({ maxLength: 1600 }).map((b) => Buffer.from(b)),
    fc
      .tuple(
        base,
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 8 }),
        fc.nat(),
        fc.uint8Array({ maxLength: 16 }),
      )
      .map(([packet, flips, cut, junk]) => {
        const b = Buffer.from(packet);
        for (const [at, value] of flips) b[at % b.length] = value;
        const kept = cut % 3 === 0 ? b.subarray(0, cut % (b.length + 1)) : b;
        return cut % 5 === 0 ? Buffer.concat([kept, junk]) : kept;
      }),
  );

describe('SRT handshake parser', () => {
  it('never throws, and what it reads writes back to the same handshake', () => {
    fc.assert(
      fc.property(datagram(fc.constantFrom(...valid)), (packet) => {
        const hs = parseHandshake(packet);
        if (!hs) return;
        publishTarget(streamIdOf(hs));
        rejection(hs, 1403);
        inductionResponse(hs, 1);
        const again = parseHandshake(writeHandshake(hs, { timestamp: 0, destinationSocketId: 0 }));
        // Extension contents are padded to whole words when written.
        const padded = hs.extensions.map((e) => ({
          type: e.type,
          content: Buffer.concat([e.content, Buffer.alloc((4 - (e.content.length % 4)) % 4)]),
        }));
        assert.deepEqual(again, { ...hs, extensions: padded });
      }),
      options,
    );
  });
});

/** Sends an induction from `socket` and returns the relay's cookie for it. */
async function cookieFor(socket: Socket, port: number): Promise<number> {
  const answer = new Promise<number>((resolve) =>
    socket.once('message', (msg) => resolve(parseHandshake(msg)?.cookie ?? 0)),
  );
  socket.send(valid[0] ?? Buffer.alloc(0), port, '127.0.0.1');
  return answer;
}

describe('SRT relay', () => {
  it('takes mutated conclusions and random datagrams without harm, then a valid publish', async (t) => {
    const h = await startRelay(t);
    const sockets = await Promise.all(
      [0, 1, 2].map(async () => {
        const s = createSocket('udp4');
        await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
        return s;
      }),
    );
    t.after(() => {
      for (const s of sockets) s.close();
    });
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: 2 }), fc.string({ maxLength: 40 }), fc.nat(), async (which, id, seed) => {
        const socket = sockets[which] ?? sockets[0];
        if (!socket) return;
        const cookie = await cookieFor(socket, h.relay.port);
        const base = writeHandshake(conclusion({ streamId: id, cookie, socketId: seed }), {
          timestamp: 0,
          destinationSocketId: 0,
        });
        const packets = fc.sample(datagram(fc.constant(base)), { numRuns: 3, seed });
        for (const p of [base, ...packets]) {
          socket.send(p, h.relay.port, '127.0.0.1');
          sent++;
        }
      }),
      { ...options, numRuns: Math.min(options.numRuns, 150) },
    );
    await new Promise((r) => setTimeout(r, 300));
    t.diagnostic(`${sent} datagrams, ${h.attempts.length} gate attempts`);
    assert.equal(h.relay.remuxStarts, 0, 'a remux started for a key that is not ours');
    const pub = publish(t, { port: h.relay.port, streamId: KEY, seconds: 2 });
    const { code, stderr } = await pub.exited;
    assert.equal(code, 0, stderr);
    assert.equal((await h.ends[0])?.kind, 'left');
    assert.equal(h.relay.remuxStarts, 1);
    assert.ok(!h.logs.join('').includes(KEY), 'the key is in a log line');
  });
});
