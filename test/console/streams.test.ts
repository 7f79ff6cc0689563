// The console's Streams pages in headless system Chromium, as a person uses them: create a
// stream (the default ladder, or the source alone), see where to publish it (the RTMP server
// without the key, the key and the SRT URL hidden until shown, each copyable), suspend and
// resume it, delete it after a confirmation; a private (JWT) stream says it needs a token; the
// list pages as the other lists do; a stream page reads at 360 px. axe-core finds nothing serious, and no page logs a script error or
// a failed request.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { buildConsole, consoleIsStale } from '../../scripts/build-console.ts';
import { axeProblems, launchChromium, open, problemsOf } from '../helpers/console-page.ts';
import { freePort, freeUdpPort } from '../helpers/ports.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

const browser = await launchChromium();
const skip = typeof browser === 'string' ? browser : false;

describe('the console Streams pages', { skip }, () => {
  let server: TestServer;
  let key: string;
  let rtmpPort: number;
  let context: BrowserContext;
  const axe: string[] = [];
  before(async () => {
    if (consoleIsStale()) await buildConsole();
    rtmpPort = await freePort();
    const srtPort = await freeUdpPort();
    server = await startTestServer({
      roles: { api: true, worker: false },
      settings: { rtmpPort, srtPort, ingestHost: '127.0.0.1' },
    });
    key = await server.key('console-streams');
    if (typeof browser === 'string') return;
    // The copy buttons write to the clipboard; the test reads it back.
    context = await browser.newContext({ permissions: ['clipboard-read', 'clipboard-write'] });
  });
  after(async () => {
    await context?.close();
    if (typeof browser !== 'string') await browser.close();
    await server?.stop();
  });

  async function signedIn(o: { width?: number; key?: string } = {}): Promise<Page> {
    const page = await context.newPage();
    await page.setViewportSize({ width: o.width ?? 1280, height: 800 });
    await page.goto(`${server.url}/`);
    await page.getByLabel('API key').fill(o.key ?? key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    return page;
  }

  /** Creates a stream through the page's form; resolves with its id once its page shows. */
  async function create(page: Page, name: string, o: { sourceOnly?: boolean } = {}): Promise<string> {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Streams' }).click();
    await page.getByRole('heading', { level: 1, name: /^Streams$/ }).waitFor();
    await page.getByLabel('Name').fill(name);
    if (o.sourceOnly) await page.getByLabel('The source alone (no transcoding)').check();
    await page.getByRole('button', { name: 'Create stream' }).click();
    await page.getByRole('heading', { level: 1, name }).waitFor();
    return decodeURIComponent(/#\/streams\/([^/]+)$/.exec(page.url())?.[1] ?? '');
  }

  const clipboard = (page: Page) => page.evaluate<string>('navigator.clipboard.readText()');

  it('creates a stream and shows where to publish it, the key hidden until shown', async () => {
    const page = await signedIn();
    const problems = problemsOf(page);
    const id = await create(page, 'Console show');
    const stream = (await server.call('GET', `/api/stream/${id}`, { key })).body;
    assert.equal(stream.name, 'Console show');
    const streamKey: string = stream.streamKey;
    assert.ok(streamKey, 'the owner reads the key');

    const main = page.locator('main');
    const rtmp = `rtmp://127.0.0.1:${rtmpPort}/live`;
    await page.getByText(rtmp, { exact: true }).waitFor();
    assert.doesNotMatch(await main.innerText(), new RegExp(streamKey), 'the key is not shown unasked');
    assert.ok(!(await page.content()).includes(streamKey), 'nor anywhere in the page');
    assert.match(await main.innerText(), /Idle: the player starts when the stream goes live/);
    assert.match(
      await main.innerText(),
      /Renditions\s+240p0, 360p0, 480p0, 720p0 \(those up to the source's height\), and the source/,
    );
    axe.push(...(await axeProblems(page, 'a stream')));

    await page.getByRole('button', { name: 'Copy RTMP server' }).click();
    await waitFor(async () => (await clipboard(page)) === rtmp, 5000, 'the RTMP server in the clipboard');

    // Copying the key does not show it; showing it does.
    await page.getByRole('button', { name: 'Copy stream key' }).click();
    await waitFor(async () => (await clipboard(page)) === streamKey, 5000, 'the key in the clipboard');
    assert.ok(!(await page.content()).includes(streamKey), 'copied, still hidden');
    await page.getByRole('button', { name: 'Show stream key' }).click();
    await page.getByText(streamKey, { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Hide stream key' }).click();
    await page.getByText(streamKey, { exact: true }).waitFor({ state: 'detached' });

    await page.getByRole('button', { name: 'Show SRT URL' }).click();
    const srt = await page.getByText(/^srt:\/\//).innerText();
    assert.match(srt, new RegExp(`^srt://127\\.0\\.0\\.1:\\d+\\?streamid=${streamKey}$`));
    await page.getByRole('button', { name: 'Copy SRT URL' }).click();
    await waitFor(async () => (await clipboard(page)) === srt, 5000, 'the SRT URL in the clipboard');

    // ffmpeg's command names the server; the key is left to the shell.
    const command = await page.locator('pre.snippet').innerText();
    assert.match(command, new RegExp(`-f flv "${rtmp}/\\$STREAM_KEY"$`));
    assert.ok(!command.includes(streamKey));
    assert.match(await main.innerText(), /Custom…/, "OBS's steps");
    assert.match(await main.innerText(), /Keyframe Interval 1 s or 2 s/);
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('a stream of the source alone asks for no ladder', async () => {
    const page = await signedIn();
    const problems = problemsOf(page);
    const id = await create(page, 'Console source only', { sourceOnly: true });
    const stream = (await server.call('GET', `/api/stream/${id}`, { key })).body;
    assert.deepEqual(stream.profiles, []);
    assert.match(await page.locator('main').innerText(), /Renditions\s+the source alone/);
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('a private stream (JWT playback policy) is said to need a token instead of a player', async () => {
    const made = await server.call('POST', '/api/stream', {
      key,
      body: { name: 'Console private', playbackPolicy: { type: 'jwt' } },
    });
    assert.equal(made.status, 201);
    const page = await signedIn();
    const problems = problemsOf(page);
    await open(page, `#/streams/${made.body.id}`, /^Console private$/);
    await page.getByText(/plays with a signed token only \(playback policy JWT\)/).waitFor();
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('suspends and resumes a stream, then deletes it after a confirmation', async () => {
    const page = await signedIn();
    const problems = problemsOf(page);
    const id = await create(page, 'Console suspend');
    const state = page.getByRole('region', { name: 'State' });
    await state.getByText('idle', { exact: true }).waitFor();

    await page.getByRole('button', { name: 'Suspend stream' }).click();
    await state.getByText('suspended', { exact: true }).waitFor();
    assert.equal((await server.call('GET', `/api/stream/${id}`, { key })).body.suspended, true);
    await page.getByRole('button', { name: 'Resume stream' }).click();
    await state.getByText('idle', { exact: true }).waitFor();
    assert.equal((await server.call('GET', `/api/stream/${id}`, { key })).body.suspended, false);

    await page.getByRole('button', { name: 'Delete stream' }).click();
    await page.getByRole('button', { name: 'Keep it' }).click();
    assert.equal((await server.call('GET', `/api/stream/${id}`, { key })).status, 200, 'kept');
    await page.getByRole('button', { name: 'Delete stream' }).click();
    await page.getByRole('button', { name: 'Yes, delete it' }).click();
    await page.getByRole('heading', { level: 1, name: /^Streams$/ }).waitFor();
    assert.equal((await server.call('GET', `/api/stream/${id}`, { key })).status, 404);
    await page.getByRole('link', { name: 'Console show' }).waitFor();
    assert.equal(await page.getByRole('link', { name: 'Console suspend' }).count(), 0);
    axe.push(...(await axeProblems(page, 'streams')));
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('the list shows each stream idle or live, 20 a page, the next with Load more', async () => {
    const owner = await server.key('console-streams-paging');
    for (let i = 0; i < 21; i++) {
      const made = await server.call('POST', '/api/stream', { key: owner, body: { name: `paged ${i}` } });
      assert.equal(made.status, 201);
    }
    const page = await signedIn({ key: owner });
    const problems = problemsOf(page);
    await open(page, '#/streams', /^Streams$/);
    const rows = page.locator('.stream-table tbody tr');
    await waitFor(async () => (await rows.count()) === 20, 10_000, 'the first page');
    assert.match(await rows.first().innerText(), /paged \d+\s+idle/);
    await page.getByRole('button', { name: 'Load more' }).click();
    await waitFor(async () => (await rows.count()) === 21, 10_000, 'the second page');
    assert.equal(await page.getByRole('button', { name: 'Load more' }).count(), 0);
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('a stream page reads at 360 px, the header one row', async () => {
    const page = await signedIn({ width: 360 });
    const problems = problemsOf(page);
    await create(page, 'Console phone');
    const wide = await page.evaluate<number>('document.documentElement.scrollWidth');
    assert.ok(wide <= 360, `the stream page is ${wide} px wide`);
    const nav = page.getByRole('navigation', { name: 'Main' });
    const boxes = [
      ...(await Promise.all((await nav.getByRole('link').all()).map((l) => l.boundingBox()))),
      await page.getByRole('button', { name: 'Sign out' }).boundingBox(),
    ];
    const tops = boxes.map((b) => Math.round(b?.y ?? 0));
    assert.ok(Math.max(...tops) - Math.min(...tops) <= 4, `one row (tops ${tops.join(', ')})`);
    for (const b of boxes) assert.ok(b && b.x >= 0 && b.x + b.width <= 360, `in view at ${b?.x}+${b?.width}`);
    axe.push(...(await axeProblems(page, 'a stream at 360 px')));
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('axe-core finds no serious or critical violation on these pages', () => {
    assert.deepEqual(axe, []);
  });
});
