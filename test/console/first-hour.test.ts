// A new user's first hour with the console, in headless Chromium, on a default server with a
// worker: features the server is not set up for (C2PA signing, IPFS exports to its space) are
// explained with the settings that enable them, never offered; an upload is followed from
// its bytes to ready; its task reads as a person wants (input, asset name, outputs with
// links and human sizes, the stored events of a finished task), as does a transcode's; the
// task list names each task; the asset page has one set of player controls that plays; the
// embed snippet loads the service's own hls.js, which answers as JavaScript; on a phone the
// header is one row. axe-core finds nothing serious on any of these pages.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { buildConsole, consoleIsStale } from '../../scripts/build-console.ts';
import { axeProblems, launchChromium, open, problemsOf, requestsOf, signedIn } from '../helpers/console-page.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { makeClip } from '../helpers/media.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

/** The bits of an HTMLVideoElement the test reads (the root tsconfig has no DOM types). */
interface Media {
  currentTime: number;
  muted: boolean;
  controls: boolean;
}

const browser = await launchChromium();
const skip = typeof browser === 'string' ? browser : false;

describe("the console in a new user's first hour", { skip }, () => {
  let server: TestServer;
  let key: string;
  let input: TestHttp;
  let clip: string;
  /** The asset the upload test made, for the tests after it. */
  let uploaded: { assetId: string; taskId: string } | undefined;
  const axe: string[] = [];
  before(async () => {
    if (consoleIsStale()) await buildConsole();
    // Long enough for its processing to show between two reads of the asset (every 2 s).
    clip = await makeClip({ width: 1280, height: 720, seconds: 6 });
    input = await startHttp({ '/talk.mp4': serveFile(clip) });
    server = await startTestServer({ roles: { api: true, worker: true } });
    key = await server.key('first-hour');
  });
  after(async () => {
    if (typeof browser !== 'string') await browser.close();
    await server?.stop();
    await input?.close();
  });

  const page = async (width?: number): Promise<Page> =>
    signedIn(browser as Browser, { url: server.url, key, ...(width ? { width } : {}) });

  it('explains C2PA signing instead of offering it, and follows an upload from its bytes to ready', async () => {
    const p = await page();
    const problems = problemsOf(p);
    await open(p, '#/upload', /^Upload$/);
    const options = p.locator('fieldset', { hasText: 'Options for new assets' });
    await options.getByText('C2PA signing of the MP4s').waitFor();
    assert.equal(await p.getByLabel(/C2PA/).count(), 0, 'no control that asks for what the server cannot do');
    assert.match(
      await options.locator('.feature-off').innerText(),
      /is not set up on this server\. The server operator sets MEDIAPLANE_C2PA_KEY and MEDIAPLANE_C2PA_CERTS/,
    );

    // What the row says, every time it changes: the bytes, then the asset's phases.
    await p.evaluate(`(() => {
      window.seen = [];
      new MutationObserver(() => {
        const row = document.querySelector('.uploads li');
        const text = row && row.innerText.replace(/\\s+/g, ' ');
        if (text && window.seen.at(-1) !== text) window.seen.push(text);
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    })()`);
    await p.getByLabel('Choose files').setInputFiles(clip);
    const row = p.locator('.uploads li');
    await row.getByText('Ready to play').waitFor({ timeout: 120_000 });
    const seen = await p.evaluate<string[]>('window.seen');
    assert.ok(
      seen.some((t) => /Uploading|upload progress|Uploaded/.test(t)),
      `the bytes going: ${seen.join(' | ')}`,
    );
    assert.ok(
      seen.some((t) => /Processing: making the renditions/.test(t)),
      `processing shown: ${seen.join(' | ')}`,
    );
    assert.ok(
      seen.some((t) => /Processing: making the renditions \d+%/.test(t)),
      `the progress the server reports: ${seen.join(' | ')}`,
    );
    const link = row.getByRole('link', { name: /^Play / });
    const assetId = decodeURIComponent((await link.getAttribute('href'))?.split('/').pop() ?? '');
    const asset = await server.call('GET', `/api/asset/${assetId}`, { key });
    assert.equal(asset.body.status.phase, 'ready');
    const tasks = await server.call('GET', '/api/task', { key });
    const task = tasks.body.find((t: { outputAssetId?: string }) => t.outputAssetId === assetId);
    uploaded = { assetId, taskId: task.id };
    axe.push(...(await axeProblems(p, 'upload')));
    assert.deepEqual(problems, []);
    await p.close();
  });

  it("a finished upload's task shows its input, asset, human sizes and stored events", async () => {
    assert.ok(uploaded, 'the upload test ran');
    const p = await page();
    const problems = problemsOf(p);
    await open(p, `#/tasks/${uploaded.taskId}`, /^Upload: /);
    const name = clip.split('/').pop() ?? '';
    assert.match(await p.locator('h1').innerText(), new RegExp(`^Upload: ${name.replace('.', '\\.')}`));
    const summary = await p.locator('.card dl').first().innerText();
    assert.match(summary, /Input\s+a file sent to the upload URL/);
    assert.match(summary, new RegExp(`Asset\\s+${name.replace('.', '\\.')}`));
    const outputs = await p.locator('.outputs').innerText();
    assert.match(outputs, /Source: 0:06 · \d+(\.\d)? (KB|MB)/, 'length and size as a person reads them');
    assert.doesNotMatch(outputs, /\d{5,}/, 'no raw byte counts');
    // Finished before this page opened: the timeline is the stored events, not an empty list.
    const timeline = p.locator('.timeline');
    await timeline.getByText('task.completed').waitFor();
    const events = await timeline.innerText();
    assert.match(events, /task\.spawned[\s\S]*task\.updated running[\s\S]*task\.completed completed/);
    axe.push(...(await axeProblems(p, 'upload task')));
    assert.deepEqual(problems, []);
    await p.close();
  });

  it("a transcode's task lists its outputs as links with sizes, and the list names each task", async () => {
    const body = { input: { url: input.url('/talk.mp4') }, outputs: { hls: { path: '/hls' }, mp4: { path: '/mp4' } } };
    const made = await server.call('POST', '/api/transcode', { key, body });
    assert.equal(made.status, 200);
    const id: string = made.body.id;
    await waitFor(
      async () => (await server.call('GET', `/api/task/${id}`, { key })).body.status.phase === 'completed',
      120_000,
      'the transcode',
    );
    const p = await page();
    const problems = problemsOf(p);
    const requests = requestsOf(p);
    await open(p, '#/tasks', /^Tasks$/);
    await requests.idle();
    const names = await p.locator('.task-table td[data-label=Task]').allInnerTexts();
    const file = clip.split('/').pop() ?? '';
    assert.ok(
      names.some((n) => n.startsWith(`talk.mp4 ${id.slice(0, 8)}`)),
      `by its input: ${names.join(' | ')}`,
    );
    assert.ok(
      names.some((n) => n.startsWith(file)),
      `by its asset's name: ${names.join(' | ')}`,
    );

    await p.getByRole('link', { name: `talk.mp4 ${id.slice(0, 8)}` }).click();
    await p.getByRole('heading', { level: 1, name: /^Transcode: talk\.mp4/ }).waitFor();
    const outputs = p.locator('.outputs');
    const mp4 = outputs.locator('li', { hasText: /^MP4:/ }).getByRole('link', { name: /^360p0 · 640×360 · / });
    assert.match(await mp4.innerText(), / · \d+(\.\d)? (KB|MB)$/, 'its size as a person reads it');
    const href = (await mp4.getAttribute('href')) ?? '';
    assert.match(href, new RegExp(`^${server.url}/media/task/${id}/mp4/360p0\\.mp4$`));
    assert.equal((await fetch(href)).status, 200, 'the link is the file');
    assert.match(await outputs.innerText(), /HLS \(TS segments\): master playlist/);
    assert.match(await p.locator('main').innerText(), /Input\s+talk\.mp4 \(0:06, \d+(\.\d)? (KB|MB)\)/);
    await p.locator('.timeline').getByText('task.completed').waitFor();
    axe.push(...(await axeProblems(p, 'transcode task')));
    assert.deepEqual(problems, []);
    await p.close();
  });

  it('the asset page has one set of player controls, a snippet with the service hls.js, and no IPFS button', async () => {
    assert.ok(uploaded, 'the upload test ran');
    const p = await page();
    const problems = problemsOf(p, [/net::ERR_ABORTED$/]);
    await open(p, `#/assets/${uploaded.assetId}`, /./);
    const video = p.getByLabel('Video player');
    await video.waitFor();
    assert.equal(await video.evaluate((v: Media) => v.controls), false, "no browser controls beside the console's");
    assert.equal(await p.getByRole('slider').count(), 1, 'one seek bar');
    assert.equal(await p.getByRole('slider', { name: 'Seek' }).count(), 1);
    assert.equal(await p.getByText(/^\d+:\d\d \/ \d+:\d\d$/).count(), 1, 'one time display');
    await video.evaluate((v: Media) => {
      v.muted = true;
    });
    await p.getByRole('button', { name: 'Play', exact: true }).click();
    await waitFor(async () => (await video.evaluate((v: Media) => v.currentTime)) > 0.3, 30_000, 'playing');
    await p.getByRole('button', { name: 'Pause', exact: true }).click();
    await p.getByRole('button', { name: 'Play', exact: true }).waitFor();

    const snippet = await p.getByLabel('Embed snippet (HTML)').inputValue();
    const script = `${server.url}/player/hls.min.js`;
    assert.ok(snippet.includes(`<script src="${script}"></script>`), snippet);
    assert.doesNotMatch(snippet, /cdn|jsdelivr|unpkg/);
    const js = await fetch(script);
    assert.equal(js.status, 200);
    assert.match(js.headers.get('content-type') ?? '', /^text\/javascript/);
    assert.match((await js.text()).slice(0, 2000), /function/);

    const ipfs = p.getByRole('region', { name: 'Export to IPFS' });
    await ipfs.locator('.feature-off').waitFor();
    assert.equal(await ipfs.getByRole('button').count(), 0, 'no export button that can only fail');
    assert.match(await ipfs.innerText(), /MEDIAPLANE_DWEB_EXPORT_PROOF/);
    axe.push(...(await axeProblems(p, 'asset')));
    assert.deepEqual(problems, []);
    await p.close();
  });

  it('on a phone the header is one row, every nav link in view', async () => {
    for (const width of [390, 360]) {
      const p = await page(width);
      await open(p, '#/tasks', /^Tasks$/);
      const nav = p.getByRole('navigation', { name: 'Main' });
      const boxes = [
        ...(await Promise.all((await nav.getByRole('link').all()).map((l) => l.boundingBox()))),
        await p.getByRole('button', { name: 'Sign out' }).boundingBox(),
      ];
      const header = await p.locator('header').boundingBox();
      assert.ok(header && boxes.every(Boolean));
      const tops = boxes.map((b) => Math.round(b?.y ?? 0));
      assert.ok(Math.max(...tops) - Math.min(...tops) <= 4, `${width} px: one row (tops ${tops.join(', ')})`);
      const linkHeight = boxes[0]?.height ?? 0;
      assert.ok(header.height < linkHeight * 2, `${width} px: header ${header.height} px for ${linkHeight} px links`);
      for (const b of boxes)
        assert.ok(b && b.x >= 0 && b.x + b.width <= width, `${width} px: in view at ${b?.x}+${b?.width}`);
      assert.ok((await p.evaluate<number>('document.documentElement.scrollWidth')) <= width);
      axe.push(...(await axeProblems(p, `tasks at ${width} px`)));
      await p.close();
    }
  });

  it('axe-core finds no serious or critical violation on these pages', () => {
    assert.deepEqual(axe, []);
  });
});
