// What scripts/test.ts makes once for every test file of a run and hands down in environment
// variables: a migrated PostgreSQL database that each file's databases copy with
// CREATE DATABASE ... TEMPLATE, a migrated embedded database whose files each test server's
// data dir starts from, one Chromium the browser tests connect to, and a folder for generated
// inputs. A file run without them (node --test one file) makes its own, as the helpers say.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BrowserServer } from 'playwright-core';
import { BROWSER_WS_ENV, launchChromiumServer } from '../test/helpers/browser.ts';
import { EMBEDDED_TEMPLATE_ENV, makeEmbeddedTemplate } from '../test/helpers/embedded-template.ts';
import { MEDIA_CACHE_ENV } from '../test/helpers/media-cache.ts';
import {
  DATABASE_TEMPLATE_ENV,
  makeMigratedTemplate,
  stopTestPostgres,
  testPostgres,
} from '../test/helpers/postgres.ts';

export interface RunResources {
  env: NodeJS.ProcessEnv;
  /** What could not be made (the files then make their own or skip), for the run's log. */
  notes: string[];
  close(): Promise<void>;
}

/** Makes the run's resources side by side; the PostgreSQL server is testPostgres's own. */
export async function startRunResources(): Promise<RunResources> {
  const dir = mkdtempSync(path.join(tmpdir(), 'mediaplane-test-run-'));
  const notes: string[] = [];
  const env: NodeJS.ProcessEnv = {
    // `start` listens for live ingest on fixed ports (1935, 2935): the services and CLI runs the
    // files start side by side would collide there, so ingest listens only where a test asks.
    MEDIAPLANE_RTMP_PORT: '0',
    MEDIAPLANE_SRT_PORT: '0',
    ...process.env,
    [MEDIA_CACHE_ENV]: path.join(dir, 'media'),
    // Every test file's process, and every service or CLI process a test starts, strips and
    // compiles much of src/: Node's module compile cache does that once per run for all of them.
    NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? path.join(dir, 'compile-cache'),
  };
  let browser: BrowserServer | undefined;
  const postgres = async () => {
    const server = await testPostgres();
    if (!server) return notes.push('no PostgreSQL server: the files run their embedded cases only');
    env.MEDIAPLANE_TEST_DATABASE_URL = server.url;
    env[DATABASE_TEMPLATE_ENV] = await makeMigratedTemplate(server.url);
  };
  const embedded = async () => {
    env[EMBEDDED_TEMPLATE_ENV] = await makeEmbeddedTemplate(path.join(dir, 'embedded'));
  };
  const chromium = async () => {
    const started = await launchChromiumServer();
    if (typeof started === 'string') return notes.push(started);
    browser = started;
    env[BROWSER_WS_ENV] = started.wsEndpoint();
  };
  const close = async () => {
    await browser?.close().catch(() => undefined);
    await stopTestPostgres();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all([postgres(), embedded(), chromium()]);
  } catch (e) {
    await close();
    throw e;
  }
  return { env, notes, close };
}
