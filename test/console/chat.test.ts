// The Chat page on a fresh install, driven in headless system Chromium: with no model (the local
// orchestrator's model directory is empty) it says how to get one, naming the pull command, and
// shows no credit; a priced model shows the credit left (a free one's answer and its note are
// test/console/pages.test.ts's).

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { launchChromium } from '../helpers/console-page.ts';
import type { Page } from 'playwright-core';
import { buildConsole, consoleIsStale } from '../../scripts/build-console.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const AXE = fileURLToPath(new URL('../../node_modules/axe-core/axe.min.js', import.meta.url));
const PULL = './mediaplane models pull Qwen/Qwen2.5-0.5B-Instruct-GGUF';

/** An orchestrator that only advertises, at a price, the models in `models` (empty at first). */
async function advertiser(): Promise<{ url: string; models: string[]; server: Server }> {
  const models: string[] = [];
  const server = createServer((_req, res) => {
    const caps = {
      engine: 'fake',
      pricePerToken: 0.000001,
      models: models.map((id) => ({ id, warm: false, free: 1, total: 1, queued: 0 })),
    };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(caps));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, models, server };
}

/** Serious and critical axe-core violations of the page. */
async function axe(page: Page): Promise<string[]> {
  // Through the DevTools protocol: the console's CSP blocks an inline <script> tag.
  if ((await page.evaluate('typeof window.axe')) === 'undefined')
    await page.evaluate(`${readFileSync(AXE, 'utf8')}\n;undefined`);
  const found = await page.evaluate<Array<{ id: string; impact: string | null }>>(
    'window.axe.run(document, { resultTypes: ["violations"] }).then((r) => r.violations)',
  );
  return found.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.impact} ${v.id}`);
}

const browser = await launchChromium();
const skip = typeof browser === 'string' ? browser : false;

describe('the Chat page without a model', { skip }, () => {
  let server: TestServer;
  let key: string;
  let priced: Awaited<ReturnType<typeof advertiser>>;
  const modelsDir = mkdtempSync(path.join(tmpdir(), 'mediaplane-no-models-'));
  before(async () => {
    if (consoleIsStale()) await buildConsole();
    priced = await advertiser();
    // As `mediaplane start` on a fresh install: a local orchestrator with an empty model directory.
    server = await startTestServer({
      roles: { api: true, worker: false, gateway: true, orchestrator: true },
      settings: { modelsDir, gatewayOrchestrators: [priced.url], gatewayPollMs: 200, logLevel: 'warn' },
    });
    key = await server.key('console-chat');
  });
  after(async () => {
    if (typeof browser !== 'string') await browser.close();
    await server?.stop();
    priced?.server.close();
    rmSync(modelsDir, { recursive: true, force: true });
  });

  async function chatPage(): Promise<Page> {
    if (typeof browser === 'string') throw new Error(browser);
    const page = await browser.newPage();
    await page.goto(`${server.url}/`);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    await page.evaluate(`location.hash = '#/chat'`);
    await page.getByRole('heading', { level: 1, name: /^Chat$/ }).waitFor();
    return page;
  }

  it('says how to get a model, names the pull command, and shows no credit', async () => {
    const page = await chatPage();
    await page.getByRole('heading', { name: 'No model to chat with yet' }).waitFor();
    const text = await page.locator('main').innerText();
    assert.ok(text.includes(PULL), text);
    assert.match(text, /restart the server/);
    assert.doesNotMatch(text, /Credit left|credit/i, 'no credit is shown when nothing is priced');
    assert.equal(await page.locator('.chat-cost').count(), 0);
    assert.ok(await page.getByRole('button', { name: 'Send' }).isDisabled());
    assert.deepEqual(await axe(page), []);
    await page.close();
  });

  it('shows the credit left once a priced model is offered', async () => {
    priced.models.push('acme/priced');
    const page = await chatPage();
    await page.locator('option', { hasText: 'acme/priced' }).waitFor({ state: 'attached' });
    const cost = page.locator('.chat-cost');
    await cost.waitFor();
    assert.match(await cost.innerText(), /Credit left\s+\$0/);
    assert.equal(await page.getByRole('heading', { name: 'No model to chat with yet' }).count(), 0);
    await page.close();
  });
});
