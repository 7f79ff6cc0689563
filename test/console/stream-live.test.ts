// A stream's console page while ffmpeg publishes to it over RTMP, in headless system
// Chromium: the page, open before the publish, shows the stream go live, its ingest rate and
// a player that plays it with hls.js in low-latency mode (playlist requests with `_HLS_msn`:
// LL-HLS blocking reloads); when the publish ends the page shows it idle again. A 15 s
// publish of a 320x240 source with the default ladder (the 240p0 rung and the source).

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildConsole, consoleIsStale } from '../../scripts/build-console.ts';
import { axeProblems, launchChromium, problemsOf, signedIn } from '../helpers/console-page.ts';
import { publishTestSource } from '../helpers/live.ts';
import { freePort } from '../helpers/ports.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

/** The bits of an HTMLVideoElement the test reads (the root tsconfig has no DOM types). */
interface Media {
  currentTime: number;
  muted: boolean;
  play(): Promise<void>;
}

const browser = await launchChromium();
const skip = typeof browser === 'string' ? browser : false;

describe('a stream page while it is live', { skip }, () => {
  let server: TestServer;
  let key: string;
  let rtmpPort: number;
  before(async () => {
    if (consoleIsStale()) await buildConsole();
    rtmpPort = await freePort();
    server = await startTestServer({
      roles: { api: true, worker: false, ingest: true },
      settings: { rtmpPort, ingestHost: '127.0.0.1' },
    });
    key = await server.key('console-live');
  });
  after(async () => {
    if (typeof browser !== 'string') await browser.close();
    await server?.stop();
  });

  it('shows the stream go live, plays it in low-latency mode, then shows it idle', { timeout: 120_000 }, async (t) => {
    if (typeof browser === 'string') return;
    const made = await server.call('POST', '/api/stream', { key, body: { name: 'Console live' } });
    assert.equal(made.status, 201);
    const page = await signedIn(browser, { url: server.url, key });
    // hls.js cancels its held playlist requests when the player goes.
    const problems = problemsOf(page, [/^request failed: .* net::ERR_ABORTED$/]);
    const blocking: string[] = [];
    page.on('request', (r) => {
      if (/_HLS_msn=/.test(r.url())) blocking.push(r.url());
    });
    await page.evaluate(`location.hash = ${JSON.stringify(`#/streams/${made.body.id}`)}`);
    await page.getByRole('heading', { level: 1, name: 'Console live' }).waitFor();
    const state = page.getByRole('region', { name: 'State' });
    await state.getByText('idle', { exact: true }).waitFor();

    const started = Date.now();
    const publish = await publishTestSource({
      url: `rtmp://127.0.0.1:${rtmpPort}/live/${made.body.streamKey}`,
      protocol: 'rtmp',
      seconds: 15,
    });
    try {
      await state.getByText('live', { exact: true }).waitFor({ timeout: 20_000 });
      const liveAfter = Date.now() - started;
      const video = page.getByLabel('Video player');
      await video.waitFor({ timeout: 20_000 });
      await video.evaluate((v: Media) => {
        v.muted = true;
        return v.play();
      });
      await waitFor(async () => (await video.evaluate((v: Media) => v.currentTime)) > 1, 20_000, 'the player to play');
      // Seen, not bounded: the page polls every 3 s, and the host is shared.
      t.diagnostic(
        `live on the page ${liveAfter} ms after the publish began; 1 s played at ${Date.now() - started} ms`,
      );
      assert.ok(blocking.length > 0, 'hls.js asks for playlists with _HLS_msn: low-latency mode');
      await waitFor(async () => /Ingest rate\s+\d+(\.\d)? [kM]b\/s/.test(await state.innerText()), 10_000, 'a rate');
      assert.deepEqual(await axeProblems(page, 'a live stream'), []);
    } catch (e) {
      throw new Error(`${(e as Error).message}; ffmpeg: ${publish.stderr()}; page: ${problems.join('; ')}`);
    } finally {
      await publish.stop();
    }
    assert.deepEqual(problems, [], 'nothing failed while it was live');
    await state.getByText('idle', { exact: true }).waitFor({ timeout: 30_000 });
    await page.getByText('Idle: the player starts when the stream goes live.').waitFor();
    // Until the page reads the stream idle (its next poll), the player asks on, and the ended
    // stream's media is gone: 404.
    const gone = /^HTTP 404: GET .*\/media\/live\//;
    assert.deepEqual(
      problems.filter((p) => !gone.test(p)),
      [],
    );
    await page.close();
  });
});
