import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FeedQueue } from '../../src/live/multistream/feed-queue.ts';
import { redactUrls } from '../../src/live/multistream/push-process.ts';
import { guardedTargetUrl, targetUrlProblem } from '../../src/live/multistream/target-address.ts';
import type { TappedPart } from '../../src/live/session-plugins.ts';

// The pieces of restreaming that need no ffmpeg: the queue that keeps a slow target from
// holding the stream back, the address guard's answer for a target, the redaction of the
// target's url out of ffmpeg's words.

/** Parts of 0.25 s, a keyframe every fourth (one-second GOPs), numbered from `from`. */
function parts(count: number, from = 0): TappedPart[] {
  return Array.from({ length: count }, (_, i) => ({
    run: 1,
    msn: Math.floor((from + i) / 4),
    part: (from + i) % 4,
    bytes: Buffer.from([from + i]),
    durationSecs: 0.25,
    independent: (from + i) % 4 === 0,
    wallStartMs: (from + i) * 250,
  }));
}

const numbers = (q: FeedQueue): number[] => {
  const out: number[] = [];
  for (let p = q.shift(); p; p = q.shift()) out.push(p.bytes[0] ?? -1);
  return out;
};

test('the queue starts at an independent part and drops whole GOPs past its bound', () => {
  const q = new FeedQueue({ maxSecs: 2 });
  for (const p of parts(3, 1)) q.push(p); // 1, 2, 3: mid-GOP, waited past
  assert.equal(q.length, 0);
  for (const p of parts(8, 4)) q.push(p); // 4..11: two GOPs, 2 s
  assert.equal(q.secs, 2);
  q.push(parts(1, 12)[0] as TappedPart); // 12: over the bound, the oldest GOP goes
  assert.deepEqual(numbers(q), [8, 9, 10, 11, 12]);
  assert.equal(q.dropped, 3 + 4);
});

test('a queue with no keyframe left past its bound waits for the next one', () => {
  const q = new FeedQueue({ maxSecs: 0.5 });
  for (const p of parts(3)) q.push(p); // 0, 1, 2: 0.75 s, no second keyframe
  assert.equal(q.length, 0);
  q.push(parts(1, 3)[0] as TappedPart); // 3: mid-GOP, dropped
  q.push(parts(1, 4)[0] as TappedPart); // 4: a keyframe
  assert.deepEqual(numbers(q), [4]);
});

test('a new writer starts at the newest keyframe queued; a new run starts over', () => {
  const q = new FeedQueue({ maxSecs: 10 });
  for (const p of parts(10)) q.push(p);
  q.restartAtIndependent();
  assert.deepEqual(numbers(q), [8, 9]);
  for (const p of parts(2, 10)) q.push(p);
  q.clear();
  q.push(parts(1, 13)[0] as TappedPart);
  assert.equal(q.length, 0);
});

test('target urls: rtmp, rtmps and srt only, never quoted back', () => {
  assert.equal(targetUrlProblem('rtmp://a.example/live/key'), undefined);
  assert.equal(targetUrlProblem('srt://a.example:9000?streamid=key'), undefined);
  assert.match(targetUrlProblem('http://a.example/key') ?? '', /rtmp:\/\/, rtmps:\/\/ or srt:\/\//);
  assert.match(targetUrlProblem('srt://a.example?streamid=key') ?? '', /port/);
  assert.match(targetUrlProblem('not a url') ?? '', /must be a URL/);
});

test('the guard refuses a private target unless allowed, and ffmpeg gets the checked address', async () => {
  const secret = 'rtmp://ingest.example/live/secret-key-1';
  const privateName = async () => [{ address: '10.0.0.7', family: 4 }];
  const refused = await guardedTargetUrl(secret, { allowPrivate: false, resolve: privateName });
  assert.ok('refused' in refused);
  assert.match(refused.refused, /ingest\.example.*private/);
  assert.equal(refused.refused.includes('secret-key-1'), false);
  const local = await guardedTargetUrl('rtmp://localhost:1935/live/k', { allowPrivate: false });
  assert.ok('refused' in local);

  const publicName = async () => [{ address: '203.0.113.9', family: 4 }];
  // 203.0.113.0/24 is a documentation range: allowed here only because private addresses are.
  const allowed = await guardedTargetUrl(secret, { allowPrivate: true, resolve: publicName });
  assert.deepEqual(allowed, { url: 'rtmp://203.0.113.9/live/secret-key-1' });
  const srt = await guardedTargetUrl('srt://ingest.example:9000?streamid=k', {
    allowPrivate: true,
    resolve: async () => [{ address: '2001:db8::5', family: 6 }],
  });
  assert.deepEqual(srt, { url: 'srt://[2001:db8::5]:9000?streamid=k' });
  // TLS needs the name: rtmps keeps it.
  const tls = await guardedTargetUrl('rtmps://ingest.example/live/k', { allowPrivate: true, resolve: publicName });
  assert.deepEqual(tls, { url: 'rtmps://ingest.example/live/k' });
});

test("ffmpeg's lines lose every url in them", () => {
  assert.equal(redactUrls("Output #0, flv, to 'rtmp://1.2.3.4/live/secret':"), "Output #0, flv, to '<target url>':");
  assert.equal(redactUrls('srt://h:1?streamid=k&passphrase=p: Connection refused'), '<target url> Connection refused');
});
