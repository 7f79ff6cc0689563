import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { openChromium } from '../helpers/browser.ts';
import { playRendition, publishTestSource, watchLatency } from '../helpers/live.ts';
import { freePort } from '../helpers/rtmp.ts';
import {
  blockingReload,
  createStream,
  deliveries,
  ladderEnded,
  laddersStarted,
  SMALL_RUNG,
  startLiveService,
  startReceiver,
  subscribe,
  variantUrls,
  waitMultivariant,
} from './live-e2e.ts';

// End to end over RTMP: ffmpeg publishes a frame-numbered source with audio; every rendition
// plays in headless Chromium with hls.js in low-latency mode, the playlists carry parts and
// answer blocking reloads, glass-to-glass latency is read from the played pixels, and the
// stream.started and stream.idle webhooks arrive signed.

test('an RTMP publish plays as low-latency HLS in Chromium, under 3 s glass to glass, with signed webhooks', async (t) => {
  const browser = await openChromium();
  if (typeof browser === 'string') return t.skip(browser);
  after(() => browser.close());
  const rtmpPort = await freePort();
  const service = await startLiveService({ rtmpPort });
  after(() => service.stop());
  const receiver = await startReceiver();
  after(() => receiver.server.close());
  await subscribe(service, receiver.url);
  const stream = await createStream(service, { name: 'rtmp end to end', profiles: [SMALL_RUNG] });
  const base = `${service.server.url}/media/live/${stream.playbackId}/`;

  const publish = await publishTestSource({
    url: `rtmp://127.0.0.1:${rtmpPort}/live/${stream.streamKey}`,
    protocol: 'rtmp',
    seconds: 15,
    width: 320,
    height: 240,
    fps: 30,
  });
  after(() => publish.stop());
  const t0 = Date.now();
  const multivariant = await waitMultivariant(`${base}index.m3u8`, 10_000);
  const firstPartMs = Date.now() - t0;
  const variants = variantUrls(multivariant, base);
  assert.deepEqual(
    variants.map((u) => u.slice(base.length)),
    ['160p0/index.m3u8', 'source/index.m3u8'],
  );
  assert.match(multivariant, /CODECS="avc1\.\w{6},mp4a\.40\.2"/);

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

  assert.equal(await laddersStarted(service.server.url), 1);

  await publish.stop();
  const got = await deliveries(receiver.got, 2, 15_000);
  assert.deepEqual(
    got.map((d) => [d.event, d.stream.id, d.stream.isActive, d.signed]),
    [
      ['stream.started', stream.id, true, true],
      ['stream.idle', stream.id, false, true],
    ],
  );
  for (const d of got) assert.ok(!d.body.includes(stream.streamKey), 'no stream key in a webhook');
  assert.ok(await ladderEnded(base), 'not live any more: every playlist ends');
  const idle = await service.server.call('GET', `/api/stream/${stream.id}`, { key: service.key });
  assert.equal(idle.body.isActive, false);
  assert.ok(idle.body.transcodedSegments > 3 && idle.body.sourceSegments > 3, JSON.stringify(idle.body));
  assert.ok(!service.server.logs.text.includes(stream.streamKey), 'the stream key was logged');
});
