import assert from 'node:assert/strict';
import { test } from 'node:test';
import { playRendition, watchLatency } from '../helpers/live.ts';
import { blockingReload, endEndToEnd, ladderEnded, openEndToEnd } from './live-e2e.ts';

// End to end over RTMP: ffmpeg publishes a frame-numbered source with audio; every rendition
// plays in headless Chromium with hls.js in low-latency mode, the playlists carry parts and
// answer blocking reloads, glass-to-glass latency is read from the played pixels, and the
// stream.started and stream.idle webhooks arrive signed.

test('an RTMP publish plays as low-latency HLS in Chromium, under 3 s glass to glass, with signed webhooks', async (t) => {
  const run = await openEndToEnd('rtmp', 15);
  if (typeof run === 'string') return t.skip(run);
  const { browser, service, stream, base, publish, variants, firstPartMs } = run;
  assert.match(run.multivariant, /CODECS="avc1\.\w{6},mp4a\.40\.2"/);

  // Read while the publish surely runs (the players below may take a while on a loaded host).
  // The session reports its counters every 2 s.
  let live = await service.server.call('GET', `/api/stream/${stream.id}`, { key: service.key });
  for (let i = 0; i < 50 && !(live.body.ingestRate > 0); i++) {
    await new Promise((r) => setTimeout(r, 100));
    live = await service.server.call('GET', `/api/stream/${stream.id}`, { key: service.key });
  }
  assert.equal(live.body.isActive, true);
  assert.ok(live.body.ingestRate > 0, `ingestRate ${live.body.ingestRate}`);

  const held = [];
  for (const url of variants) held.push(await blockingReload(url));

  const report = await watchLatency(browser, {
    url: `${base}index.m3u8`,
    lowLatency: true,
    seconds: 4,
    source: publish,
  });
  t.diagnostic(
    `RTMP: multivariant ${firstPartMs} ms after the publisher started; blocking reloads held ${held.join(', ')} ms; ` +
      `glass-to-glass p50 ${Math.round(report.p50)} ms, p95 ${Math.round(report.p95)} ms over ${report.samples.length} frames, ` +
      `${report.stalls.length} stalls; hls.js latency ${report.hlsLatency?.toFixed(2)} s`,
  );
  assert.equal(report.error, undefined, report.log.join('\n'));
  assert.ok(report.played && report.samples.length > 30, `${report.samples.length} frames played`);
  assert.equal(report.unreadable, 0);
  assert.ok(report.p50 < 3000, `glass-to-glass p50 ${report.p50} ms`);
  // Every rendition plays by itself too.
  for (const url of variants) {
    const one = await playRendition(browser, { url, seconds: 1 });
    assert.ok(one.played && one.samples.length > 5, `${url}: ${one.error ?? ''} ${one.log.join('\n')}`);
  }

  const idle = await endEndToEnd(run);
  assert.ok(await ladderEnded(base), 'not live any more: every playlist ends');
  assert.ok(idle.transcodedSegments > 3 && idle.sourceSegments > 3, JSON.stringify(idle));
});
