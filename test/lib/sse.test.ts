import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough, Writable } from 'node:stream';
import { SseParser, SseWriter, formatSse, parseSse, parseSseBatches, type SseEvent } from '../../src/lib/sse.ts';

const enc = new TextEncoder();

function parseInPieces(bytes: Uint8Array, cuts: number[]): SseEvent[] {
  const p = new SseParser();
  const out: SseEvent[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    out.push(...p.push(bytes.subarray(from, cut)));
    from = cut;
  }
  out.push(...p.end());
  return out;
}

test('every split point of a stream with multi-byte UTF-8 gives the same events', () => {
  // "é" is 2 bytes, "€" 3 bytes, "🦙" 4 bytes: every cut lands inside one at some point.
  const wire = 'data: {"content":"café € 🦙"}\n\nevent: error\ndata: {"message":"naïve"}\n\ndata: [DONE]\n\n';
  const bytes = enc.encode(wire);
  const expected: SseEvent[] = [
    { data: '{"content":"café € 🦙"}' },
    { event: 'error', data: '{"message":"naïve"}' },
    { data: '[DONE]' },
  ];
  for (let i = 0; i <= bytes.length; i++) {
    assert.deepEqual(parseInPieces(bytes, [i]), expected, `single cut at byte ${i}`);
  }
  // and one byte at a time
  assert.deepEqual(parseInPieces(bytes, Array.from({ length: bytes.length }, (_, i) => i)), expected);
});

test('CRLF split between chunks, CR-only line ends, comments, multi-line data, id and retry', () => {
  const bytes = enc.encode(': keep-alive\r\nid: 7\r\nretry: 1500\r\ndata: a\r\ndata: b\r\n\r\ndata: c\r\re\rdata: d\r\r');
  for (let i = 0; i <= bytes.length; i++) {
    assert.deepEqual(parseInPieces(bytes, [i]), [
      { data: 'a\nb', id: '7', retry: 1500 },
      { data: 'c', id: '7' },
      { data: 'd', id: '7' },
    ], `cut at ${i}`);
  }
});

test('an event without its closing blank line is not dispatched; empty data lines count', () => {
  assert.deepEqual(parseInPieces(enc.encode('data\n\ndata: x'), []), [{ data: '' }]);
  assert.deepEqual(parseInPieces(enc.encode('event: ping\n\n'), []), [], 'no data, no event');
});

test('formatSse round-trips through the parser, multi-line data included', () => {
  const events: SseEvent[] = [{ data: 'line1\nline2' }, { event: 'error', data: '{"x":1}' }, { data: '' }];
  const wire = events.map(formatSse).join('');
  assert.equal(formatSse({ data: 'x' }), 'data: x\n\n');
  assert.deepEqual(parseInPieces(enc.encode(wire), [3, 11]), events);
  assert.throws(() => formatSse({ event: 'a\nb', data: '' }), /line break/);
});

test('parseSse over an async byte stream', async () => {
  async function* src(): AsyncGenerator<Uint8Array> {
    const b = enc.encode('data: 🦙\n\ndata: [DONE]\n\n');
    yield b.subarray(0, 7);
    yield b.subarray(7);
  }
  const got: string[] = [];
  for await (const ev of parseSse(src())) got.push(ev.data);
  assert.deepEqual(got, ['🦙', '[DONE]']);
});

test('parseSseBatches: the events each network chunk completed, never an empty batch', async () => {
  const b = enc.encode('data: a\n\ndata: b\n\ndata: 🦙\n\ndata: [DONE]\n\n');
  const cut1 = 'data: a\n\ndata: b\n\ndata: '.length + 2; // inside the llama's four bytes
  async function* src(): AsyncGenerator<Uint8Array> {
    yield b.subarray(0, 3); // no event completed yet
    yield b.subarray(3, cut1);
    yield b.subarray(cut1);
  }
  const batches: string[][] = [];
  for await (const batch of parseSseBatches(src())) batches.push(batch.map((e) => e.data));
  assert.deepEqual(batches, [['a', 'b'], ['🦙', '[DONE]']]);
});

test('formatSse writes one-line data as a single data line and splits the rest', () => {
  assert.equal(formatSse({ data: '{"a":"b\\nc"}' }), 'data: {"a":"b\\nc"}\n\n');
  assert.equal(formatSse({ data: 'x\r\ny\rz' }), 'data: x\ndata: y\ndata: z\n\n');
});

test('SseWriter waits for drain under backpressure and stops writing after close', async () => {
  const written: string[] = [];
  let release: (() => void) | undefined;
  const slow = new Writable({
    highWaterMark: 8,
    write(chunk: Buffer, _enc, cb) {
      written.push(chunk.toString());
      release = cb;
    },
  });
  const w = new SseWriter(slow);
  let resolved = false;
  const p = w.send('an-event-longer-than-the-high-water-mark').then(() => { resolved = true; });
  await new Promise((r) => setImmediate(r));
  assert.equal(resolved, false, 'send waits while the consumer has not drained');
  release?.();
  await p;
  assert.equal(resolved, true);
  assert.equal(written.join(''), 'data: an-event-longer-than-the-high-water-mark\n\n');

  const pt = new PassThrough();
  const w2 = new SseWriter(pt);
  pt.destroy();
  await w2.send('dropped');
  assert.equal(w2.closed, true);
});
