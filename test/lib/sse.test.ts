import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough, Writable } from 'node:stream';
import { SseBatcher, SseParser, SseWriter, formatSse, parseSse, type SseEvent } from '../../src/lib/sse.ts';

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
  assert.deepEqual(
    parseInPieces(
      bytes,
      Array.from({ length: bytes.length }, (_, i) => i),
    ),
    expected,
  );
});

test('CRLF split between chunks, CR-only line ends, comments, multi-line data, id and retry', () => {
  const bytes = enc.encode(
    ': keep-alive\r\nid: 7\r\nretry: 1500\r\ndata: a\r\ndata: b\r\n\r\ndata: c\r\re\rdata: d\r\r',
  );
  for (let i = 0; i <= bytes.length; i++) {
    assert.deepEqual(
      parseInPieces(bytes, [i]),
      [
        { data: 'a\nb', id: '7', retry: 1500 },
        { data: 'c', id: '7' },
        { data: 'd', id: '7' },
      ],
      `cut at ${i}`,
    );
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

/** Feeds `bytes` cut at `cuts` to a batcher; returns each batch's bytes (or "parsed") and events. */
function batchInPieces(bytes: Buffer, cuts: number[]): Array<{ bytes: string | undefined; events: string[] }> {
  const b = new SseBatcher();
  const out: Array<{ bytes: string | undefined; events: string[] }> = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    const batch = b.push(bytes.subarray(from, cut));
    if (batch) {
      assert.equal(batch.count, batch.events.length, 'count without parsing agrees with the parse');
      out.push({
        bytes: batch.bytes?.toString(),
        events: batch.events.map((e) => (e.event ? `${e.event}:${e.data}` : e.data)),
      });
    }
    from = cut;
  }
  return out;
}

test('SseBatcher: whole LF-framed events pass as the bytes that came, one batch per chunk that completed any', () => {
  const wire = 'data: a\n\ndata: b\n\ndata: 🦙\n\nevent: error\ndata: x\n\ndata: [DONE]\n\n';
  const bytes = Buffer.from(wire);
  const cut1 = Buffer.byteLength('data: a\n\ndata: b\n\ndata: ') + 2; // inside the llama's four bytes
  assert.deepEqual(batchInPieces(bytes, [3, cut1]), [
    { bytes: 'data: a\n\ndata: b\n\n', events: ['a', 'b'] },
    { bytes: 'data: 🦙\n\nevent: error\ndata: x\n\ndata: [DONE]\n\n', events: ['🦙', 'error:x', '[DONE]'] },
  ]);
  // Every single cut: the batches' bytes put back together are the stream, and their events
  // are what the parser finds in the whole of it.
  const expected = ['a', 'b', '🦙', 'error:x', '[DONE]'];
  for (let i = 0; i <= bytes.length; i++) {
    const batches = batchInPieces(bytes, [i]);
    assert.equal(batches.map((x) => x.bytes).join(''), wire, `cut at ${i}`);
    assert.deepEqual(
      batches.flatMap((x) => x.events),
      expected,
      `cut at ${i}`,
    );
  }
});

test('SseBatcher: the first CR switches to the parser, without losing what was held back', () => {
  const bytes = Buffer.from('data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n\n');
  for (let i = 0; i <= bytes.length; i++) {
    const batches = batchInPieces(bytes, [i]);
    assert.deepEqual(
      batches.flatMap((x) => x.events),
      ['a', 'b', 'c', 'd'],
      `cut at ${i}`,
    );
    // Once a CR has been seen, batches carry only parsed events (the CRs are not passed on).
    assert.equal(batches.at(-1)?.bytes, undefined, `cut at ${i}`);
    assert.ok(
      batches.every((x) => !x.bytes?.includes('\r')),
      `cut at ${i}`,
    );
  }
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
  const p = w.send('an-event-longer-than-the-high-water-mark').then(() => {
    resolved = true;
  });
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
