// The console's Tasks, Webhooks and Chat pages, driven in headless system Chromium
// as a person uses them: the tasks page lists a task, follows it, cancels and retries it; a
// webhook created in the form is in the API, a bad URL gets the API's words under the URL
// field, a delivery shows in its log and can be resent; editing a webhook with its secret
// field left empty keeps it signing, and stopping that is a checkbox; a chat answer streams from the test
// model, which costs nothing here, so no credit is shown. Every page also reads at 360 px without sideways
// scrolling, and no page logs a script error or a request that failed unexpectedly.

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { launchChromium, problemsOf } from '../helpers/console-page.ts';
import type { Page } from 'playwright-core';
import { buildConsole, consoleIsStale } from '../../scripts/build-console.ts';
import { MODELS_DIR, TINY } from '../helpers/llm.ts';
import { startTestServer, type TestServer, transcodeBody, waitFor } from '../helpers/server.ts';

// A page left while its event stream is open cancels it: not a failure.
const LEFT_STREAM = /^request failed: .* net::ERR_ABORTED$/;

interface Delivery {
  path: string;
  signature: string | undefined;
  body: string;
}

/** A webhook receiver on port 0 that keeps every delivery and answers 204. */
async function startReceiver(): Promise<{ url: string; got: Delivery[]; close(): void }> {
  const got: Delivery[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const signature = req.headers['livepeer-signature'];
      got.push({
        path: req.url ?? '',
        signature: typeof signature === 'string' ? signature : undefined,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, got, close: () => server.close() };
}

const browser = await launchChromium();
const skip = typeof browser === 'string' ? browser : false;

describe('the console pages: tasks, webhooks, chat', { skip }, () => {
  let server: TestServer;
  let key: string;
  before(async () => {
    if (consoleIsStale()) await buildConsole();
    // No worker: a transcode task stays `waiting`, so the page can follow, cancel and retry it.
    server = await startTestServer({
      roles: { api: true, worker: false, gateway: true, orchestrator: true },
      settings: {
        modelsDir: MODELS_DIR,
        llmGpu: 'cpu',
        orchestratorModels: [TINY],
        gatewayPollMs: 60_000,
        // One resend a minute: the second one shows the 429's words and its Retry-After.
        webhookResendsPerMinute: 1,
      },
    });
    key = await server.key('console-pages');
  });
  after(async () => {
    if (typeof browser !== 'string') await browser.close();
    await server?.stop();
  });

  async function signedIn(o: { width?: number } = {}): Promise<Page> {
    if (typeof browser === 'string') throw new Error(browser);
    const page = await browser.newPage(o.width ? { viewport: { width: o.width, height: 800 } } : {});
    await page.goto(`${server.url}/`);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    return page;
  }

  /** Goes to a page by its hash and waits for its heading. */
  async function open(page: Page, hash: string, heading: RegExp): Promise<void> {
    // A string: the root tsconfig has no DOM types.
    await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
    await page.getByRole('heading', { level: 1, name: heading }).waitFor();
  }

  it('the tasks page lists a task, filters it, follows it, cancels and retries it', async () => {
    const created = await server.call('POST', '/api/transcode', { key, body: transcodeBody() });
    assert.equal(created.status, 200);
    const id: string = created.body.id;
    const page = await signedIn();
    const problems = problemsOf(page, [LEFT_STREAM]);
    await open(page, '#/tasks', /^Tasks$/);
    // Named by its input's file name, with the start of its id to tell it from the others.
    const row = page.getByRole('link', { name: `video.mp4 ${id.slice(0, 8)}` });
    await row.waitFor();
    assert.match(await page.getByRole('row').filter({ has: row }).innerText(), /transcode-file[\s\S]*waiting/);

    await page.getByLabel('Type').selectOption('upload');
    await row.waitFor({ state: 'detached' });
    await page.getByLabel('Type').selectOption('transcode-file');
    await page.getByLabel('Phase').selectOption('waiting');
    await row.waitFor();

    await row.click();
    await page.getByRole('heading', { level: 1, name: /^Transcode: video\.mp4/ }).waitFor();
    await page.getByRole('heading', { level: 2, name: 'Params' }).waitFor();
    const text = await page.locator('main').innerText();
    assert.match(text, /Input\s+video\.mp4 http:\/\/127\.0\.0\.1:9\/video\.mp4/, 'what it reads, first');
    assert.match(text, /endpoint\s+http:\/\/127\.0\.0\.1:9000/, 'the params as the API shows them');
    assert.match(text, /secretAccessKey\s+\*\*\*/, 'credentials as the API redacts them');
    assert.doesNotMatch(text, /sEcReT/, 'the secret stays redacted');
    assert.doesNotMatch(text, /"secretAccessKey"/, 'no raw JSON unless asked');
    const params = page.getByRole('region', { name: 'Params' });
    assert.equal(await params.locator('dt', { hasText: /^outputs$/ }).count(), 1, 'the outputs once, not twice');
    await page.getByText('The stored events, then the task live as this page follows it.').waitFor();
    await page.locator('.timeline').getByText('task.spawned').waitFor();

    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('button', { name: 'Retry' }).waitFor();
    assert.equal((await server.call('GET', `/api/task/${id}`, { key })).body.status.phase, 'cancelled');
    assert.match(await page.locator('.timeline').innerText(), /cancelled/);

    await page.getByRole('button', { name: 'Retry' }).click();
    await page.getByRole('button', { name: 'Cancel' }).waitFor();
    assert.equal((await server.call('GET', `/api/task/${id}`, { key })).body.status.phase, 'waiting');

    await page.getByRole('button', { name: 'Show the task as JSON' }).click();
    assert.match(await page.locator('pre').innerText(), /"secretAccessKey": "\*\*\*"/);

    // Paging: 20 a page, the next through the Link header's cursor.
    for (let i = 0; i < 20; i++) await server.call('POST', '/api/transcode', { key, body: transcodeBody() });
    await page.getByRole('link', { name: 'All tasks' }).click();
    await page.getByRole('button', { name: 'Load more' }).click();
    await row.waitFor();
    assert.equal(await page.locator('.task-table tbody tr').count(), 21);
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('a webhook created in the form is in the API; a refused URL shows the API words under it', async () => {
    const page = await signedIn();
    const problems = problemsOf(page, [/HTTP 422: POST .*\/api\/webhook$/, /HTTP 429: POST .*\/resend$/, LEFT_STREAM]);
    await open(page, '#/webhooks', /^Webhooks$/);
    await page.getByLabel('Name').fill('console hook');
    await page.getByLabel('URL', { exact: true }).fill('ftp://example.com/hook');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const urlError = page.locator('.field', { has: page.getByLabel('URL', { exact: true }) }).getByRole('alert');
    assert.match(await urlError.innerText(), /^url: /, 'the API words, under the URL field');

    // A receiver that refuses connections: its delivery fails, and shows in the log.
    await page.getByLabel('URL', { exact: true }).fill('http://127.0.0.1:9/hook');
    await page.getByLabel('task.spawned').check();
    await page.getByLabel('asset.ready').check();
    await page.getByLabel('Shared secret').fill('s3cr3t-console');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    await page.getByRole('link', { name: 'console hook' }).first().waitFor();

    const listed = await server.call('GET', '/api/webhook', { key });
    const hook = listed.body.find((w: { name: string }) => w.name === 'console hook');
    assert.ok(hook, 'the webhook is in the API');
    assert.equal(hook.url, 'http://127.0.0.1:9/hook');
    assert.deepEqual([...hook.events].sort(), ['asset.ready', 'task.completed', 'task.failed', 'task.spawned']);

    await server.call('POST', '/api/transcode', { key, body: transcodeBody() });
    await page.getByRole('link', { name: 'console hook' }).first().click();
    await page.getByRole('heading', { level: 1, name: 'Webhook: console hook' }).waitFor();
    const logRow = page.locator('.log-table tbody tr').first();
    await logRow.waitFor({ timeout: 20_000 });
    assert.match(await logRow.innerText(), /task\.spawned[\s\S]*ECONNREFUSED|task\.spawned/);
    await logRow.getByRole('button', { name: /^Resend/ }).click();
    await page.getByText(/^Sent again: /).waitFor();
    await logRow.getByRole('button', { name: /^Resend/ }).click();
    const refused = page.locator('.resend').getByRole('alert');
    await refused.waitFor();
    assert.match(await refused.innerText(), /Try again in \d+ seconds?\./, 'the Retry-After, in words');

    await page.getByLabel('Name').fill('console hook 2');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('heading', { level: 1, name: 'Webhook: console hook 2' }).waitFor();
    assert.equal((await server.call('GET', `/api/webhook/${hook.id}`, { key })).body.name, 'console hook 2');

    await page.getByRole('button', { name: 'Delete webhook' }).click();
    await page.getByRole('button', { name: 'Yes, delete it' }).click();
    await page.getByRole('heading', { level: 1, name: /^Webhooks$/ }).waitFor();
    assert.equal((await server.call('GET', `/api/webhook/${hook.id}`, { key })).status, 404);
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('editing a webhook with its secret field left empty keeps it signing; stopping that is explicit', async () => {
    const SECRET = 'console-keeps-this-secret';
    const receiver = await startReceiver();
    try {
      const made = await server.call('POST', '/api/webhook', {
        key,
        body: { name: 'signed hook', url: `${receiver.url}/first`, events: ['task.spawned'], sharedSecret: SECRET },
      });
      assert.equal(made.status, 200);
      const id: string = made.body.id;
      const page = await signedIn();
      const problems = problemsOf(page, [LEFT_STREAM]);
      await open(page, `#/webhooks/${id}`, /^Webhook: signed hook$/);
      const summary = page.locator('.props');
      assert.match(await summary.innerText(), /Signed\s+yes/);
      const hint = page.locator('.field', { has: page.getByLabel('Shared secret') }).locator('.hint');
      assert.match(await hint.innerText(), /Leave empty to keep the current secret/);

      // A new URL, the secret field untouched.
      await page.getByLabel('URL', { exact: true }).fill(`${receiver.url}/second`);
      await page.getByRole('button', { name: 'Save changes' }).click();
      await page.getByText(/^Saved at /).waitFor();
      const edited = (await server.call('GET', `/api/webhook/${id}`, { key })).body;
      assert.equal(edited.url, `${receiver.url}/second`);
      assert.equal(edited.signed, true, 'the API still says the webhook signs');
      const delivered = async (path: string, taskId: string) =>
        waitFor(
          async () => receiver.got.find((d) => d.path === path && JSON.parse(d.body).payload?.task?.id === taskId),
          20_000,
          `the delivery of ${taskId} to ${path}`,
        );
      const first = await server.call('POST', '/api/transcode', { key, body: transcodeBody() });
      const signed = await delivered('/second', first.body.id);
      const v1 = /^t=\d+,v1=([0-9a-f]+)$/.exec(signed.signature ?? '')?.[1];
      assert.equal(v1, createHmac('sha256', SECRET).update(signed.body).digest('hex'), 'signed with the same secret');

      // Stopping the signing is a checkbox of its own.
      await page.getByLabel('Stop signing deliveries (remove the secret)').check();
      assert.equal(await page.getByLabel('Shared secret').isDisabled(), true);
      await page.getByRole('button', { name: 'Save changes' }).click();
      await page.getByText(/^Saved at /).waitFor();
      await waitFor(async () => /Signed\s+no\b/.test(await summary.innerText()), 10_000, 'the summary to say unsigned');
      assert.equal((await server.call('GET', `/api/webhook/${id}`, { key })).body.signed, false);
      assert.equal(await page.getByLabel('Stop signing deliveries (remove the secret)').count(), 0);
      const second = await server.call('POST', '/api/transcode', { key, body: transcodeBody() });
      assert.equal((await delivered('/second', second.body.id)).signature, undefined, 'unsigned from now on');
      assert.deepEqual(problems, []);
      await page.close();
      await server.call('DELETE', `/api/webhook/${id}`, { key });
    } finally {
      receiver.close();
    }
  });

  it('a chat answer streams from the test model, which is free: no credit is shown', async () => {
    const page = await signedIn();
    const problems = problemsOf(page, [/HTTP 400: POST .*\/v1\/chat\/completions$/, LEFT_STREAM]);
    await open(page, '#/chat', /^Chat$/);
    await page.locator('option', { hasText: TINY }).waitFor({ state: 'attached' });
    await page.getByLabel('Model').selectOption(TINY);

    // Refused: the gateway's words under the field its `param` names, and the message kept.
    await page.getByLabel('max_tokens').fill('1000000');
    await page.getByLabel('Message').fill('Once upon a time');
    await page.getByRole('button', { name: 'Send' }).click();
    const tooMany = page.locator('.field', { has: page.getByLabel('max_tokens') }).getByRole('alert');
    assert.match(await tooMany.innerText(), /max_tokens/);
    assert.equal(await page.getByLabel('Message').inputValue(), 'Once upon a time');

    await page.getByLabel('max_tokens').fill('12');
    await page.getByLabel('Message').fill('Once upon a time');
    const answered = page.waitForResponse((r) => r.url().endsWith('/v1/chat/completions'));
    await page.getByRole('button', { name: 'Send' }).click();
    const res = await answered;
    assert.match(res.headers()['content-type'] ?? '', /text\/event-stream/);
    await page.getByText(/^Answer complete/).waitFor({ timeout: 60_000 });
    const answer = await page.locator('.chat-assistant .chat-text').last().innerText();
    assert.ok(answer.length > 0, 'the model answered');
    // The local orchestrator charges nothing (GET /v1/models: priced false): "$0 left" would read
    // as "buy credit", so the page says it is free instead (a priced model: test/console/chat.test.ts).
    assert.equal(await page.locator('.chat-cost').count(), 0);
    assert.match(await page.locator('.chat-free').innerText(), /costs nothing on this server: no credit is needed/);

    // The JSON-schema toggle: the answer parses and matches.
    await page.getByLabel('Answer in JSON that matches a schema').check();
    await page.getByLabel('max_tokens').fill('200');
    await page.getByLabel('Message').fill('Rate a story');
    await page.getByRole('button', { name: 'Send' }).click();
    const done = page.locator('.chat-assistant:not([aria-busy])');
    await waitFor(async () => (await done.count()) === 2, 60_000, 'the JSON answer');
    const json = JSON.parse(await done.last().locator('.chat-text').innerText());
    assert.equal(typeof json.title, 'string');
    assert.ok([1, 2, 3, 4, 5].includes(json.rating));
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('each page reads at 360 px without sideways scrolling', async () => {
    const page = await signedIn({ width: 360 });
    const problems = problemsOf(page, [LEFT_STREAM]);
    for (const [hash, heading] of [
      ['#/tasks', /^Tasks$/],
      ['#/webhooks', /^Webhooks$/],
      ['#/chat', /^Chat$/],
    ] as const) {
      await open(page, hash, heading);
      await page.waitForLoadState('networkidle');
      const wide = await page.evaluate<number>('document.documentElement.scrollWidth');
      assert.ok(wide <= 360, `${hash} is ${wide} px wide`);
    }
    assert.deepEqual(problems, []);
    await page.close();
  });
});
