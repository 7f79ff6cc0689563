import assert from 'node:assert/strict';
import { test } from 'node:test';
import { playRendition } from '../helpers/live.ts';
import { blockingReload, endEndToEnd, openEndToEnd } from './live-e2e.ts';

// End to end over SRT (srt://HOST:PORT?streamid=KEY, Livepeer's form): the same ladder and
// playback as RTMP's, reached through the relay's remux ffmpeg.

test('an SRT publish plays as low-latency HLS in Chromium, every rendition, with signed webhooks', async (t) => {
  const run = await openEndToEnd('srt', 12);
  if (typeof run === 'string') return t.skip(run);
  const { browser, publish, variants, firstPartMs } = run;
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
  await endEndToEnd(run);
});
