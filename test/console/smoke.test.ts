// The browser console, smoke level: served at `/` with its favicon, signs in with
// an API key in headless system Chromium, shows the nav and every page without a script error
// or a failed request; the first load stays under 500 KB of compressed script and style. The
// whole story (upload, play, clip, webhook, chat) is test/console/story.test.ts's.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { Page } from 'playwright-core';
import { buildConsole, consoleIsStale } from '../../scripts/build-console.ts';
import { launchChromium, requestsOf } from '../helpers/console-page.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const dist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../console/dist');

/** Pages being navigated away from (a reload, a goto): the requests they abort are expected. */
const leaving = new WeakSet<Page>();

/** Everything that went wrong in a page: script errors, console errors, failed or 4xx/5xx requests. */
function watch(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('requestfailed', (r) => {
    // What a navigation cancels is no failure of the page's (a reload with a request still
    // out); requestsOf() waits for each page's requests, so none should be left anyway.
    if (r.failure()?.errorText === 'net::ERR_ABORTED' && leaving.has(page)) return;
    problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`);
  });
  return problems;
}

const browser = await launchChromium();
const skip = typeof browser === 'string' ? browser : false;

describe('the console', { skip }, () => {
  let server: TestServer;
  let key: string;
  before(async () => {
    if (consoleIsStale()) await buildConsole();
    server = await startTestServer({
      roles: { api: true, worker: false, gateway: true },
      settings: { gatewayPollMs: 60_000 },
    });
    key = await server.key('console-smoke');
  });
  after(async () => {
    if (typeof browser !== 'string') await browser.close();
    await server?.stop();
  });

  it('is served at / with a favicon, fresh index and long-cached hashed files', async () => {
    const index = await fetch(`${server.url}/`);
    assert.equal(index.status, 200);
    assert.match(index.headers.get('content-type') ?? '', /text\/html/);
    assert.equal(index.headers.get('cache-control'), 'no-cache');
    assert.equal(index.headers.get('x-content-type-options'), 'nosniff');
    // Its own scripts and styles only, hls.js's blob: worker and MediaSource, media from the API's base.
    const csp = index.headers.get('content-security-policy') ?? '';
    for (const directive of [
      "default-src 'self'",
      "script-src 'self'",
      "style-src 'self'",
      `media-src 'self' ${server.url} blob:`,
      `connect-src 'self' ${server.url}`,
      "worker-src 'self' blob:",
      "object-src 'none'",
      "frame-ancestors 'none'",
    ])
      assert.ok(csp.split('; ').includes(directive), `${directive} in ${csp}`);
    assert.ok(!/unsafe-inline|unsafe-eval/.test(csp), csp);
    const html = await index.text();
    assert.ok(!/<script(?![^>]*\bsrc=)/.test(html), 'no inline script the policy would block');
    const script = /src="(\/assets\/main-[\w]+\.js)"/.exec(html)?.[1];
    assert.ok(script, 'index.html names its script');
    const js = await fetch(server.url + script);
    assert.equal(js.status, 200);
    assert.match(js.headers.get('cache-control') ?? '', /immutable/);
    for (const icon of ['/favicon.ico', '/favicon.svg']) {
      const res = await fetch(server.url + icon);
      assert.equal(res.status, 200, icon);
      assert.equal(res.headers.get('content-type'), 'image/svg+xml');
    }
  });

  it('leaves unknown paths answering JSON in their API shape', async () => {
    const asset = await server.call('GET', '/assets/nope.js');
    assert.equal(asset.status, 404);
    assert.equal(typeof asset.body, 'object');
    const api = await server.call('GET', '/api/nope', { key });
    assert.equal(api.status, 404);
    assert.deepEqual(api.body, { errors: ['not found'] });
    const other = await server.call('GET', '/nope');
    assert.equal(other.status, 404);
    assert.equal(typeof other.body, 'object');
    const llm = await server.call('GET', '/v1/nope', { key });
    assert.equal(llm.status, 404);
    assert.equal(typeof llm.body.error?.message, 'string', 'the LLM routes keep the OpenAI error shape');
    const spec = await server.call('GET', '/api/openapi.json');
    assert.equal(spec.body.paths['/'], undefined, 'the console is no API operation');
  });

  it('first loads under 500 KB of compressed script and style, and stays under it with hls.js', () => {
    const gz = (f: string) => gzipSync(readFileSync(path.join(dist, f))).length;
    const html = readFileSync(path.join(dist, 'index.html'), 'utf8');
    const first = [...html.matchAll(/(?:src|href)="\/(assets\/[^"]+\.(?:js|css))"/g)].map((m) => m[1] ?? '');
    assert.ok(first.length >= 2, 'a script and a style');
    const firstLoad = first.reduce((n, f) => n + gz(f), 0);
    assert.ok(firstLoad < 500_000, `first load ${firstLoad} bytes gzip`);
    // Every script and style there is, the lazily loaded hls.js chunk included.
    const all = readdirSync(path.join(dist, 'assets'))
      .filter((f) => /\.(js|css)$/.test(f))
      .reduce((n, f) => n + gz(`assets/${f}`), 0);
    assert.ok(all < 500_000, `everything ${all} bytes gzip`);
  });

  it('signs in with a key, shows the nav and each page without an error', async () => {
    if (typeof browser === 'string') return;
    const page = await browser.newPage();
    // Chromium logs what the CSP blocks as a console error; this also names the directive.
    await page.addInitScript(
      "document.addEventListener('securitypolicyviolation', (e) => console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI))",
    );
    await page.goto(`${server.url}/`);
    await page.getByLabel('API key').fill('not-a-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').waitFor();
    assert.match(await page.getByRole('alert').innerText(), /\w/, 'the API says why');

    const problems = watch(page);
    // A page counts as shown once its own requests are answered: the heading comes first, its
    // data after. Leaving earlier would have the reload abort them (net::ERR_ABORTED).
    const requests = requestsOf(page);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const nav = page.getByRole('navigation', { name: 'Main' });
    await nav.waitFor();
    const links = await nav.getByRole('link').allInnerTexts();
    assert.deepEqual(links, ['Upload', 'Assets', 'Streams', 'Tasks', 'Webhooks', 'Chat']);
    for (const name of links) {
      await nav.getByRole('link', { name }).click();
      await page.getByRole('heading', { level: 1, name: new RegExp(name) }).waitFor();
      await requests.idle();
    }
    leaving.add(page);
    await page.reload();
    leaving.delete(page);
    await nav.waitFor();
    await requests.idle();
    assert.deepEqual(problems, []);
    await page.close();
  });
});
