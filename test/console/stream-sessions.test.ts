// A recorded stream's console page in headless system Chromium, as a person uses it: a
// restream target added through the form (its URL typed into a password field, never shown
// again: not in the page, not in an answer) and removed; a 10 s RTMP publish of a 320x240
// source with one small rung: the page shows the session with its recording waiting, "Clip the
// last 30 s" makes a clip asset the page links to; once the reconnect window (1 s here) has
// closed and the recording is made, the session links to the recording's asset, which opens.
// axe-core finds nothing serious, and nothing fails on the page.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { buildConsole, consoleIsStale } from '../../scripts/build-console.ts';
import { axeProblems, launchChromium, problemsOf, signedIn } from '../helpers/console-page.ts';
import { publishTestSource, type TestPublish } from '../helpers/live.ts';
import { freePort } from '../helpers/ports.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { SMALL_RUNG } from '../live/live-e2e.ts';

/** The restream target's URL: its path holds the other service's stream key. */
const TARGET_KEY = 'console-restream-secret-key';
const TARGET_URL = `rtmp://127.0.0.1:9/live/${TARGET_KEY}`;

const browser = await launchChromium();
const skip = typeof browser === 'string' ? browser : false;

describe("a recorded stream's sessions, restream targets and clips in the console", { skip }, () => {
  let server: TestServer;
  let key: string;
  let rtmpPort: number;
  let stream: { id: string; streamKey: string; playbackId: string };
  let page: Page;
  let problems: string[];
  let publish: TestPublish | undefined;
  const answers: string[] = [];

  before(async () => {
    if (consoleIsStale()) await buildConsole();
    rtmpPort = await freePort();
    server = await startTestServer({
      roles: { api: true, worker: true, ingest: true },
      settings: { rtmpPort, ingestHost: '127.0.0.1', liveReconnectSecs: 1 },
    });
    key = await server.key('console-sessions');
    const made = await server.call('POST', '/api/stream', {
      key,
      body: {
        name: 'Console recorded',
        profiles: [SMALL_RUNG],
        record: true,
        recordingSpec: { profiles: [{ name: '160p', width: 284, height: 160, bitrate: 200_000 }] },
      },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    stream = made.body;
    if (typeof browser === 'string') return;
    page = await signedIn(browser, { url: server.url, key });
    // hls.js cancels its held playlist requests when the player goes; the ended stream's
    // media is a 404 until the page reads it idle.
    problems = problemsOf(page, [/^request failed: .* net::ERR_ABORTED$/, /^HTTP 404: GET .*\/media\/live\//]);
    page.on('response', async (r) => {
      if (r.url().includes('/api/')) answers.push(await r.text().catch(() => ''));
    });
    await page.evaluate(`location.hash = ${JSON.stringify(`#/streams/${stream.id}`)}`);
    await page.getByRole('heading', { level: 1, name: 'Console recorded' }).waitFor();
  });
  after(async () => {
    await publish?.stop();
    if (typeof browser !== 'string') await browser.close();
    await server?.stop();
  });

  it('adds a restream target without ever showing its URL, then removes it', async () => {
    const restream = page.getByRole('region', { name: 'Restream' });
    await restream.getByText('No targets: the stream is pushed nowhere else.').waitFor();
    const form = restream.getByRole('form', { name: 'Add a restream target' });
    await form.getByLabel('Target name').fill('youtube');
    const url = form.getByLabel('Target URL');
    assert.equal(await url.getAttribute('type'), 'password');
    await url.fill(TARGET_URL);
    await form.getByLabel('Rendition pushed (copied, not encoded again)').selectOption(SMALL_RUNG.name);
    await form.getByRole('button', { name: 'Add target' }).click();
    await restream.getByText(`(${SMALL_RUNG.name})`).waitFor();
    await restream.getByText('youtube').waitFor();
    assert.equal(await url.inputValue(), '', 'the URL field is cleared once sent');
    assert.ok(!(await page.content()).includes(TARGET_KEY), 'the URL is not on the page');
    assert.ok(!answers.some((a) => a.includes(TARGET_KEY)), 'no answer carried the URL');
    assert.deepEqual(await axeProblems(page, 'a stream with a restream target'), []);
    await restream.getByRole('button', { name: 'Remove youtube' }).click();
    await restream.getByText('No targets: the stream is pushed nowhere else.').waitFor();
    assert.ok(!server.logs.text.includes(TARGET_KEY), 'the URL was logged');
  });

  it('shows the live session recording, and clips the last 30 s into an asset', { timeout: 120_000 }, async () => {
    const sessions = page.getByRole('region', { name: 'Sessions' });
    await sessions.getByText('None yet: the stream has never been live.').waitFor();
    publish = await publishTestSource({
      url: `rtmp://127.0.0.1:${rtmpPort}/live/${stream.streamKey}`,
      protocol: 'rtmp',
      seconds: 10,
    });
    await page.getByRole('region', { name: 'State' }).getByText('live', { exact: true }).waitFor({ timeout: 20_000 });
    await sessions.getByText('recording: waiting').waitFor({ timeout: 15_000 });
    const clip = page.getByRole('region', { name: 'Clip' });
    await clip.getByRole('button', { name: 'Clip the last 30 s' }).click();
    const link = clip.getByRole('list', { name: 'Clips made' }).getByRole('link');
    await link.waitFor({ timeout: 20_000 });
    assert.match((await link.getAttribute('href')) ?? '', /^#\/assets\/[\w-]+$/);
    assert.deepEqual(await axeProblems(page, 'a live recorded stream'), []);
  });

  it('links the ended session to its recording asset once it is made', { timeout: 240_000 }, async () => {
    await publish?.exited;
    const sessions = page.getByRole('region', { name: 'Sessions' });
    const recording = sessions.getByRole('link', { name: 'Recording', exact: true });
    await recording.waitFor({ timeout: 200_000 });
    assert.ok(await sessions.getByRole('link', { name: 'MP4' }).isVisible());
    const rows = await sessions.getByRole('row').count();
    assert.equal(rows, 2, 'one session (and the header row)');
    await recording.click();
    await page.getByRole('heading', { level: 1, name: /Console recorded/ }).waitFor();
    assert.match(page.url(), /#\/assets\/[\w-]+$/);
    assert.deepEqual(problems, [], 'nothing failed on the page');
  });
});
