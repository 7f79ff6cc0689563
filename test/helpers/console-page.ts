import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page, Request } from 'playwright-core';
import { openChromium } from './browser.ts';
import { waitFor } from './server.ts';

// The console driven as a person uses it (STYLE.md 14): headless system Chromium, what went
// wrong in a page, when a page has loaded what it asked for, and axe-core's verdict.

const AXE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../node_modules/axe-core/axe.min.js');

/** Headless Chromium (the run's one, see openChromium), or why it cannot start (the tests skip with it). */
export const launchChromium = (): Promise<Browser | string> => openChromium();

/** A new page at `width`, signed in with `key`, its nav shown. */
export async function signedIn(browser: Browser, o: { url: string; key: string; width?: number }): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: o.width ?? 1280, height: 800 } });
  await page.goto(`${o.url}/`);
  await page.getByLabel('API key').fill(o.key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
  return page;
}

/** Goes to a page by its hash and waits for its heading. */
export async function open(page: Page, hash: string, heading: RegExp): Promise<void> {
  // A string: the root tsconfig has no DOM types.
  await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
}

/**
 * The page's requests in flight, and a wait until it has none for `quietMs`. The console
 * changes pages by the URL's hash, so Playwright's `networkidle` (once per document) says
 * nothing about what a page asked for after the first. Event streams stay open on purpose
 * and are not waited for.
 */
export function requestsOf(page: Page, o: { ignore?: RegExp } = {}): { idle(quietMs?: number): Promise<void> } {
  const ignore = o.ignore ?? /\/events(\?|$)/;
  const pending = new Set<Request>();
  let last = Date.now();
  const done = (r: Request) => {
    if (pending.delete(r)) last = Date.now();
  };
  page.on('request', (r) => {
    if (!ignore.test(r.url())) pending.add(r);
  });
  page.on('requestfinished', done);
  page.on('requestfailed', done);
  return {
    async idle(quietMs = 300) {
      await waitFor(
        async () => pending.size === 0 && Date.now() - last >= quietMs,
        20_000,
        'the page to finish its requests',
      );
    },
  };
}

/** Script errors, console errors, failed requests and 4xx/5xx answers, less those `expected` allows. */
export function problemsOf(page: Page, expected: RegExp[] = []): string[] {
  const problems: string[] = [];
  const add = (p: string) => {
    if (!expected.some((r) => r.test(p))) problems.push(p);
  };
  page.on('pageerror', (e) => add(`page error: ${e.message}`));
  page.on('console', (m) => {
    // Chromium logs every 4xx answer as a console error too; the response handler judges those.
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) add(`console: ${m.text()}`);
  });
  page.on('requestfailed', (r) => add(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('response', (r) => {
    if (r.status() >= 400) add(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`);
  });
  return problems;
}

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: unknown[] }[];
}

/** axe-core's serious and critical violations on the page as it is, named `name`. */
export async function axeProblems(page: Page, name: string): Promise<string[]> {
  // Evaluated through the DevTools protocol: the console's CSP blocks an inline <script> tag.
  if ((await page.evaluate('typeof window.axe')) === 'undefined')
    await page.evaluate(`${readFileSync(AXE, 'utf8')}\n;undefined`);
  const violations = await page.evaluate<AxeViolation[]>(
    'window.axe.run(document, { resultTypes: ["violations"] }).then((r) => r.violations)',
  );
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${name}: ${v.impact} ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}
