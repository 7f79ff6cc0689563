import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type LlhlsTiming, LiveRendition, type TappedPart } from '../../src/live/llhls/index.ts';
import { fmp4File } from './llhls-source.ts';

// A rendition's taps (what the archive and restreaming ride on) fed a real ffmpeg fMP4 in
// awkward chunks: every run's init, every part with its place and date, in order, the end.

const TIMING: LlhlsTiming = { partTargetSecs: 0.25, segmentTargetSecs: 1, windowSecs: 30 };
const FROM_ZERO = { firstMsn: 0, firstRun: 0 };

function feed(r: LiveRendition, file: Buffer, chunk = 1777): void {
  for (let at = 0; at < file.length; at += chunk) r.write(file.subarray(at, at + chunk));
}

function recorder() {
  const seen: { inits: { run: number; bytes: Buffer }[]; parts: TappedPart[]; ends: number } = {
    inits: [],
    parts: [],
    ends: 0,
  };
  const tap = {
    init: (run: number, bytes: Buffer) => seen.inits.push({ run, bytes }),
    part: (p: TappedPart) => seen.parts.push(p),
    end: () => seen.ends++,
  };
  return { seen, tap };
}

const file = await fmp4File(3);

test('a tap is told each run’s init, each part as the playlist names it, and the end', async () => {
  let now = 1_000_000;
  const r = new LiveRendition({ name: 'source', timing: TIMING, numbering: FROM_ZERO, now: () => now });
  const { seen, tap } = recorder();
  r.tap(tap);
  feed(r, file);
  r.restart();
  now += 5000;
  feed(r, file);
  r.end();
  assert.deepEqual(
    seen.inits.map((i) => i.run),
    [0, 1],
  );
  assert.equal(seen.ends, 1);
  const firstRun = seen.parts.filter((p) => p.run === 0);
  const secondRun = seen.parts.filter((p) => p.run === 1);
  assert.ok(firstRun.length >= 10 && secondRun.length === firstRun.length, `${firstRun.length} / ${secondRun.length}`);
  // Each part is the file the playlist names {msn}.{part}.m4s.
  for (const p of seen.parts) assert.deepEqual(await r.file(`${p.msn}.${p.part}.m4s`), p.bytes);
  assert.ok(seen.parts[0]?.independent);
  for (const p of seen.parts.filter((x) => x.part === 0)) assert.ok(p.independent, `${p.msn}.0 independent`);
  // Within a segment, each part starts where the one before ended.
  for (const [i, p] of seen.parts.entries()) {
    const before = seen.parts[i - 1];
    if (before && before.msn === p.msn) {
      const gap = p.wallStartMs - (before.wallStartMs + before.durationSecs * 1000);
      assert.ok(Math.abs(gap) <= 1, `${p.msn}.${p.part}: ${gap} ms`);
    }
  }
  const total = seen.parts.reduce((a, p) => a + p.durationSecs, 0);
  assert.ok(Math.abs(total - 6) < 0.2, `${total} s`);
});

test('a tap added late gets the current run’s init first; a removed one hears nothing more', () => {
  const r = new LiveRendition({ name: 'source', timing: TIMING, numbering: FROM_ZERO });
  feed(r, file.subarray(0, Math.floor(file.length / 2)));
  const late = recorder();
  const gone = recorder();
  r.tap(late.tap);
  const remove = r.tap(gone.tap);
  assert.deepEqual(
    late.seen.inits.map((i) => i.run),
    [0],
  );
  remove();
  feed(r, file.subarray(Math.floor(file.length / 2)));
  r.end();
  assert.ok(late.seen.parts.length > 0);
  assert.equal(late.seen.ends, 1);
  assert.equal(gone.seen.parts.length, 0);
  assert.equal(gone.seen.ends, 0);
});

test('a tap that throws is dropped; the rendition and the other taps go on', async () => {
  const r = new LiveRendition({ name: 'source', timing: TIMING, numbering: FROM_ZERO });
  const good = recorder();
  r.tap({
    init: () => {
      throw new Error('broken tap');
    },
    part: () => {},
    end: () => {},
  });
  r.tap(good.tap);
  feed(r, file);
  r.end();
  assert.equal(good.seen.inits.length, 1);
  assert.ok(good.seen.parts.length >= 10);
  assert.equal((await r.playlist({})).status, 200);
});

test('an ended rendition tells a new tap its end at once', () => {
  const r = new LiveRendition({ name: 'source', timing: TIMING, numbering: FROM_ZERO });
  r.end();
  const { seen, tap } = recorder();
  r.tap(tap);
  assert.equal(seen.ends, 1);
});
