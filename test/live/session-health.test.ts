import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SessionHealth } from '../../src/live/session-health.ts';

// The verdicts of a live session's health from what it observes, on a clock of the test's.

const totals = { segments: 0, secs: 0, bytes: 0 };

test('a ladder that keeps up is healthy; one whose output falls behind with media waiting drops a rung after 4 s', () => {
  const h = new SessionHealth({ segmentSecs: 1, now: 0 });
  // Keeping up: the output follows the input at a steady lag of 0.8 s.
  for (let t = 1000; t <= 6000; t += 500)
    assert.equal(h.observe({ now: t, inputSecs: t / 1000, outputSecs: t / 1000 - 0.8, blocked: false }), 'ok');
  // Then half speed with ffmpeg's input blocked: behind, and after 4 s, drop the top rung.
  const verdicts = [];
  for (let t = 6500; t <= 14_000; t += 500) {
    const out = 5.2 + (t - 6000) / 2000;
    verdicts.push(h.observe({ now: t, inputSecs: out + 1.2, outputSecs: out, blocked: true }));
  }
  assert.ok(verdicts.includes('behind'));
  assert.equal(verdicts.filter((v) => v === 'drop-top-rung').length, 1, verdicts.join(' '));
  const c = h.counters({
    now: 14_000,
    ingestRate: 0,
    declaredKbps: undefined,
    outBytes: 0,
    source: totals,
    transcoded: totals,
  });
  assert.equal(c.isHealthy, false);
  assert.match(c.issues.join('\n'), /the ladder is behind real time .* at 0\.\d\dx/);
  // After the restart the ladder is judged afresh.
  h.ladderStarted();
  assert.equal(h.behind, false);
});

test('a publisher that sends slowly is not the ladder falling behind; under its declared rate it is unhealthy', () => {
  const h = new SessionHealth({ segmentSecs: 1, now: 0 });
  // Media comes at half speed: the output follows it closely, nothing waits.
  for (let t = 1000; t <= 8000; t += 500)
    assert.equal(h.observe({ now: t, inputSecs: t / 2000, outputSecs: t / 2000 - 0.5, blocked: false }), 'ok');
  const slow = h.counters({
    now: 8000,
    ingestRate: 40_000,
    declaredKbps: 800,
    outBytes: 0,
    source: totals,
    transcoded: totals,
  });
  assert.equal(slow.isHealthy, false);
  assert.deepEqual(slow.issues, [
    'the publisher sends 320 kb/s, under the 800 kb/s its encoder declared: its upload may be too slow',
  ]);
  const fine = h.counters({
    now: 9000,
    ingestRate: 100_000,
    declaredKbps: 800,
    outBytes: 2000,
    source: totals,
    transcoded: totals,
  });
  assert.deepEqual([fine.isHealthy, fine.issues, fine.outgoingRate], [true, [], 2000]);
  h.event('HEVC over RTMP is not supported');
  h.event('HEVC over RTMP is not supported');
  assert.deepEqual(
    h.counters({
      now: 9500,
      ingestRate: 100_000,
      declaredKbps: 800,
      outBytes: 2000,
      source: totals,
      transcoded: totals,
    }).issues,
    ['HEVC over RTMP is not supported'],
  );
});
