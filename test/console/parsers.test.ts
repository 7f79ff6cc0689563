// The console's two parsers, byte by byte (STYLE.md 10): the event-stream decoder behind
// task events and streamed chat, and the storyboard VTT behind the seek bar's thumbnails.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readSse, SseDecoder, type SseEvent } from '../../console/src/sse.ts';
import { cueAt, parseStoryboard } from '../../console/src/storyboard.ts';

const STREAM =
  ': comment\r\nevent: task\r\ndata: {"id":"t1","name":"é😀"}\r\n\r\n' +
  'data: line one\ndata: line two\n\n' +
  'id: 7\revent: error\rdata: {"error":{"message":"boom"}}\r\r' +
  'data: [DONE]\n\n';

const EXPECTED: SseEvent[] = [
  { event: 'task', data: '{"id":"t1","name":"é😀"}' },
  { event: 'message', data: 'line one\nline two' },
  { event: 'error', data: '{"error":{"message":"boom"}}', id: '7' },
  { event: 'message', data: '[DONE]', id: '7' },
];

describe('the console SSE decoder', () => {
  it('decodes every event whatever the line ends', () => {
    const got: SseEvent[] = [];
    new SseDecoder((e) => got.push(e)).push(STREAM);
    assert.deepEqual(got, EXPECTED);
  });

  it('gives the same events when the bytes come split at every offset, mid-character and mid-CRLF', async () => {
    const bytes = new TextEncoder().encode(STREAM);
    for (let cut = 1; cut < bytes.length; cut++) {
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(bytes.slice(0, cut));
          c.enqueue(bytes.slice(cut));
          c.close();
        },
      });
      const got: SseEvent[] = [];
      await readSse(body, (e) => got.push(e));
      assert.deepEqual(got, EXPECTED, `cut at ${cut}`);
    }
  });

  it('dispatches a last event the server ended without a blank line', async () => {
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('data: tail'));
        c.close();
      },
    });
    const got: SseEvent[] = [];
    await readSse(body, (e) => got.push(e));
    assert.deepEqual(got, [{ event: 'message', data: 'tail' }]);
  });
});

describe('the console storyboard parser', () => {
  const vtt = [
    'WEBVTT',
    '',
    '00:00:00.000 --> 00:00:02.000',
    'sprite-0.jpg#xywh=0,0,160,90',
    '',
    '00:00:02.000 --> 00:00:04.000',
    'sprite-0.jpg#xywh=160,0,160,90',
    '',
    '01:02.000 --> 01:03.500',
    'sprite-1.jpg#xywh=0,90,160,90',
    '',
  ].join('\r\n');
  const base = 'http://h/media/asset/p/hls/thumbnails/thumbnails.vtt';

  it('reads each cue with its sheet resolved against the VTT', () => {
    const cues = parseStoryboard(vtt, base);
    assert.equal(cues.length, 3);
    assert.deepEqual(cues[1], {
      start: 2,
      end: 4,
      url: 'http://h/media/asset/p/hls/thumbnails/sprite-0.jpg',
      x: 160,
      y: 0,
      w: 160,
      h: 90,
    });
    assert.equal(cues[2]?.start, 62);
    assert.equal(cues[2]?.end, 63.5);
  });

  it('finds the cue of a time, the last one past the end', () => {
    const cues = parseStoryboard(vtt, base);
    assert.equal(cueAt(cues, 0)?.x, 0);
    assert.equal(cueAt(cues, 3.99)?.x, 160);
    assert.equal(cueAt(cues, 63.5)?.y, 90);
    assert.equal(cueAt(cues, 10), undefined);
  });
});
