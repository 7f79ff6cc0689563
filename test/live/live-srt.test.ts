import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { openChromium } from '../helpers/browser.ts';
import { playRendition, publishTestSource } from '../helpers/live.ts';
import {
  blockingReload,
  createStream,
  deliveries,
  freeUdpPort,
  laddersStarted,
  SMALL_RUNG,
  startLiveService,
  startReceiver,
  subscribe,
  variantUrls,
  waitMultivariant,
} from './live-e2e.ts';

// End to end over SRT (srt://HOST:PORT?streamid=KEY, Livepeer's form): the same ladder and
// playback as RTMP's, reached through the relay's remux ffmpeg.

test('an SRT publish plays as low-latency HLS in Chromium, every rendition, with signed webhooks', async (t) => {
  const browser = await openChromium();
  if (typeof browser === 'string') return t.skip(browser);
  after(() => browser.close());
  const srtPort = await freeUdpPort();
  const service = await startLiveService({ srtPort });
  after(() => service.stop());
  const receiver = await startReceiver();
  after(() => receiver.server.close());
  await subscribe(service, receiver.url);
  const stream = await createStream(service, { name: 'srt end to end', profiles: [SMALL_RUNG] });
  const base = `${service.server.url}/media/live/${stream.playbackId}/`;

  const publish = await publishTestSource({
    url: `srt://127.0.0.1:${srtPort}?streamid=${stream.streamKey}`,
    protocol: 'srt',
    seconds: 12,
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
  const held = [];
  for (const url of variants) held.push(await blockingReload(url));
  const played = [];
  for (const url of variants) {
    const one = await playRendition(browser, { url, seconds: 2, source: publish });
    assert.ok(one.played && one.samples.length > 20, `${url}: ${one.error ?? ''} ${one.log.join('\n')}`);
    assert.equal(one.unreadable, 0);
    played.push(Math.round(one.p50));
  }
  t.diagnostic(
    `SRT: multivariant ${firstPartMs} ms after the publisher started; blocking reloads held ${held.join(', ')} ms; ` +
      `glass-to-glass p50 per rendition ${played.join(', ')} ms`,
  );
  assert.equal(await laddersStarted(service.server.url), 1);
  await publish.stop();
  const got = await deliveries(receiver.got, 2, 15_000);
  assert.deepEqual(
    got.map((d) => [d.event, d.stream.id, d.signed]),
    [
      ['stream.started', stream.id, true],
      ['stream.idle', stream.id, true],
    ],
  );
  const idle = await service.server.call('GET', `/api/stream/${stream.id}`, { key: service.key });
  assert.equal(idle.body.isActive, false);
  assert.ok(!service.server.logs.text.includes(stream.streamKey), 'the stream key was logged');
});
