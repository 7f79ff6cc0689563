import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { type LlhlsTiming, LiveRendition, type PlaylistAnswer } from '../../src/live/llhls/index.ts';
import { fmp4File, topLevelBoxes } from './llhls-source.ts';

// Blocking playlist reload (RFC 8216bis, 6.2.5.2) and hinted parts: held requests answered
// by the part they wait for and not before, a thousand of them by one write, 400 past the
// limits, 503 past the hold limit, dropped when the client leaves.

const TIMING: LlhlsTiming = { partTargetSecs: 0.25, segmentTargetSecs: 1, windowSecs: 30 };
/** Names from 0.m4s and init-0.mp4, so the tests can name them. */
const FROM_ZERO = { firstMsn: 0, firstRun: 0 };

/** The file cut where a writer could stop: the init segment, then each moof+mdat (one part). */
async function pieces(secs: number): Promise<{ init: Buffer; parts: Buffer[] }> {
  const boxes = topLevelBoxes(await fmp4File(secs));
  const init = Buffer.concat(boxes.slice(0, 2).map((b) => b.bytes));
  const parts: Buffer[] = [];
  for (let i = 2; i + 1 < boxes.length; i += 2) {
    const [moof, mdat] = [boxes[i], boxes[i + 1]];
    if (moof?.type === 'moof' && mdat !== undefined) parts.push(Buffer.concat([moof.bytes, mdat.bytes]));
  }
  return { init, parts };
}

/** A rendition that has had the init and the first `n` parts. */
async function renditionWith(n: number, timing = TIMING): Promise<{ rendition: LiveRendition; rest: Buffer[] }> {
  const { init, parts } = await pieces(3);
  const rendition = new LiveRendition({ name: 'r', numbering: FROM_ZERO, timing });
  rendition.write(init);
  for (const part of parts.slice(0, n)) rendition.write(part);
  return { rendition, rest: parts.slice(n) };
}

/** Whether a promise has settled after the event loop has turned. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => {
    done = true;
  });
  await turn();
  await turn();
  return done;
}

function body(answer: PlaylistAnswer): string {
  assert.equal(answer.status, 200, JSON.stringify(answer));
  return answer.status === 200 ? answer.body : '';
}

describe('blocking playlist reload', () => {
  test('a request for the next part is answered when that part is written, not before', async () => {
    // Parts 0.0..0.3 written, then 1.0 (a keyframe): the next part is 1.1.
    const { rendition, rest } = await renditionWith(5);
    assert.match(body(await rendition.playlist({ msn: 1, part: 0 })), /URI="1\.0\.m4s"/);
    const held = rendition.playlist({ msn: 1, part: 1 });
    const wholeSegment = rendition.playlist({ msn: 1 });
    assert.equal(await settled(held), false);
    // Half a part: no box is whole yet.
    rendition.write((rest[0] as Buffer).subarray(0, 500));
    assert.equal(await settled(held), false);
    rendition.write((rest[0] as Buffer).subarray(500));
    const text = body(await held);
    assert.match(text, /#EXT-X-PART:DURATION=[\d.]+,URI="1\.1\.m4s"\n/);
    assert.match(text, /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="1\.2\.m4s"\n/);
    // Segment 1 is whole only once the next keyframe's part (2.0) comes.
    rendition.write(rest[1] as Buffer);
    rendition.write(rest[2] as Buffer);
    assert.equal(await settled(wholeSegment), false);
    rendition.write(rest[3] as Buffer);
    const whole = body(await wholeSegment);
    assert.match(whole, /#EXTINF:[\d.]+,\n1\.m4s\n/);
    assert.match(whole, /URI="2\.0\.m4s",INDEPENDENT=YES/);
  });

  test('a part index past the end of its segment is answered by the next segment (6.2.5.2)', async () => {
    const { rendition, rest } = await renditionWith(4);
    const held = rendition.playlist({ msn: 0, part: 4 });
    assert.equal(await settled(held), false);
    rendition.write(rest[0] as Buffer);
    assert.match(body(await held), /URI="1\.0\.m4s"/);
  });

  test('a thousand held requests are answered by one write, with one wake-up', async () => {
    const { rendition, rest } = await renditionWith(5);
    const controller = new AbortController();
    const held = Array.from({ length: 1000 }, () => rendition.playlist({ msn: 1, part: 1, signal: controller.signal }));
    await turn();
    assert.equal(rendition.stats().blocked, 1000);
    rendition.write(rest[0] as Buffer);
    const answers = await Promise.all(held);
    assert.ok(answers.every((a) => a.status === 200 && a.body.includes('URI="1.1.m4s"')));
    assert.equal(rendition.stats().blocked, 0);
    assert.equal(rendition.stats().wakeUps, 1);
  });

  test('400: _HLS_part without _HLS_msn, an msn more than two past the last, a part past the Advance Part Limit', async () => {
    const { rendition } = await renditionWith(5); // segment 0 whole, 1.0 written
    const refused = async (req: { msn?: number; part?: number }, reason: RegExp) => {
      const answer = await rendition.playlist(req);
      assert.equal(answer.status, 400, JSON.stringify(req));
      assert.match(answer.status === 400 ? answer.reason : '', reason);
    };
    await refused({ part: 1 }, /_HLS_part without _HLS_msn/);
    await refused({ msn: 3 }, /more than two segments past the last \(0\)/);
    await refused({ msn: -1 }, /whole number/);
    await refused({ msn: 1.5 }, /whole number/);
    // PART-TARGET under 0.3 s: the limit is 3 / PART-TARGET, 10 or 11 parts past 1.0.
    await refused({ msn: 1, part: 13 }, /Advance Part Limit/);
    await refused({ msn: 2, part: 12 }, /Advance Part Limit/);
    const within = rendition.playlist({ msn: 2, part: 0, signal: AbortSignal.abort() });
    assert.equal((await within).status, 503, 'held, then dropped by its signal, not refused');
  });

  test('with names from the wall clock, the first segment open: the next part is held, two segments on is refused', async () => {
    const { init, parts } = await pieces(1);
    const rendition = new LiveRendition({ name: 'r', timing: TIMING, now: () => 1_000_000 });
    rendition.write(init);
    rendition.write(parts[0] as Buffer);
    const held = rendition.playlist({ msn: 10_000, part: 1 });
    assert.equal(await settled(held), false);
    assert.equal((await rendition.playlist({ msn: 10_002, part: 0 })).status, 400);
    rendition.write(parts[1] as Buffer);
    assert.match(body(await held), /URI="10000\.1\.m4s"/);
  });

  test('503 once the hold limit (three target durations) passes without the part', async () => {
    const { rendition } = await renditionWith(2, { partTargetSecs: 0.05, segmentTargetSecs: 0.1, windowSecs: 30 });
    const started = performance.now();
    const answer = await rendition.playlist({ msn: 0, part: 2 });
    const waited = performance.now() - started;
    assert.equal(answer.status, 503);
    assert.match(answer.status === 503 ? answer.reason : '', /part 0\.2 did not come within the hold limit/);
    // Three times the longest segment so far (the 0.5 s one that the short target made).
    assert.ok(waited >= 3 * 500 - 20, `answered after ${waited} ms`);
    assert.equal(rendition.stats().blocked, 0);
  });

  test('a client that leaves is dropped at once', async () => {
    const { rendition } = await renditionWith(5);
    const controller = new AbortController();
    const held = rendition.playlist({ msn: 1, part: 1, signal: controller.signal });
    await turn();
    assert.equal(rendition.stats().blocked, 1);
    controller.abort();
    assert.equal((await held).status, 503);
    assert.equal(rendition.stats().blocked, 0);
  });

  test('end() answers held requests with the final playlist', async () => {
    const { rendition } = await renditionWith(5);
    const held = rendition.playlist({ msn: 1, part: 3 });
    assert.equal(await settled(held), false);
    rendition.end();
    assert.match(body(await held), /#EXT-X-ENDLIST\n$/);
  });

  test('a playlist without directives waits for the first part', async () => {
    const { init, parts } = await pieces(1);
    const rendition = new LiveRendition({ name: 'r', numbering: FROM_ZERO, timing: TIMING });
    const first = rendition.playlist({});
    rendition.write(init);
    assert.equal(await settled(first), false);
    assert.equal(rendition.ready, false);
    rendition.write(parts[0] as Buffer);
    assert.equal(rendition.ready, true);
    assert.match(body(await first), /URI="0\.0\.m4s",INDEPENDENT=YES/);
  });
});

describe('hinted parts', () => {
  test('the next part is waited for; a part further ahead is a 404 at once', async () => {
    const { rendition, rest } = await renditionWith(5);
    const hinted = rendition.file('1.1.m4s');
    const far = rendition.file('1.2.m4s');
    assert.equal(await far, undefined);
    assert.equal(await settled(hinted), false);
    rendition.write(rest[0] as Buffer);
    assert.deepEqual(await hinted, rest[0]);
  });

  test('a hint that names the other possible next part (a keyframe came) is answered 404 once the part is there', async () => {
    const { rendition, rest } = await renditionWith(4); // 0.0..0.3: the next part is 1.0
    const sameSegment = rendition.file('0.4.m4s');
    const nextSegment = rendition.file('1.0.m4s');
    assert.equal(await settled(sameSegment), false);
    rendition.write(rest[0] as Buffer);
    assert.equal(await sameSegment, undefined);
    assert.deepEqual(await nextSegment, rest[0]);
  });
});
