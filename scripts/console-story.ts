// The console's screenshot story (docs/console-story.md): a throwaway service with a worker,
// a real upload through the Upload page followed to ready, a transcode into the built-in
// store, a stream live from ffmpeg over RTMP, then each page screenshotted in headless Chromium at a desktop width (1280 px) and
// a phone's (390 px) into docs/console-story/. Run by hand when the console changes, never by
// the test suite:
//
//   npm run docs:console-story            (node scripts/console-story.ts)
//
// PNGs are reduced to a palette of 128 colours or fewer with ffmpeg, so each stays under 140 KB.

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createReadStream, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import dgram from 'node:dgram';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium, type Page } from 'playwright-core';
import { findChromium } from '../test/helpers/browser.ts';
import { startTestServer, type TestServer, waitFor } from '../test/helpers/server.ts';
import { buildConsole, consoleIsStale } from './build-console.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(root, 'docs/console-story');
/** Each PNG at most this big (the docs are read in a browser and in git). */
const MAX_BYTES = 140 * 1024;
const SAMPLE = path.resolve(root, '../shared/samples/13_butterfly_camera_h264_aac_720p30_7s.mp4');

/** The butterfly sample where the checkout has it, else a generated 8 s test pattern with a tone. */
function sampleVideo(): string {
  if (existsSync(SAMPLE)) return SAMPLE;
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'console-story-')), 'test-pattern.mp4');
  execFileSync('ffmpeg', [
    ...['-v', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=1280x720:rate=30:duration=8'],
    ...['-f', 'lavfi', '-i', 'sine=frequency=440:duration=8'],
    ...['-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-shortest', file],
  ]);
  return file;
}

/** One file over HTTP on port 0: the input of the story's transcode. */
async function serveFile(file: string): Promise<{ url: string; close(): void }> {
  const srv = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': statSync(file).size });
    createReadStream(file).pipe(res);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/${path.basename(file)}`,
    close: () => srv.close(),
  };
}

/** A TCP port free now: the story's RTMP listener. */
async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/** A UDP port free now: the story's SRT listener. */
async function freeUdpPort(): Promise<number> {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
  const port = socket.address().port;
  await new Promise<void>((r) => socket.close(() => r()));
  return port;
}

/** ffmpeg publishing a 426x240 test pattern with a tone over RTMP, a keyframe a second, until killed (ladder: 240p0 and the source). */
function publish(url: string): ChildProcess {
  return spawn(
    'ffmpeg',
    [
      ...['-v', 'error', '-re', '-f', 'lavfi', '-i', 'testsrc2=size=426x240:rate=30'],
      ...['-f', 'lavfi', '-i', 'sine=frequency=440'],
      ...['-c:v', 'libx264', '-preset', 'veryfast', '-tune', 'zerolatency', '-g', '30', '-pix_fmt', 'yuv420p'],
      ...['-c:a', 'aac', '-f', 'flv', url],
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
}

/** A screenshot as an 8-bit palette PNG: flat UI keeps its look at a fraction of the bytes. */
async function shoot(page: Page, name: string, fullPage = true): Promise<void> {
  const raw = path.join(OUT, `${name}.raw.png`);
  const png = path.join(OUT, `${name}.png`);
  await page.screenshot({ path: raw, fullPage });
  // Fewer colours until it is small enough: only a video frame needs many.
  for (const colours of [128, 64, 32]) {
    execFileSync('ffmpeg', [
      ...['-v', 'error', '-y', '-i', raw],
      ...['-vf', `split[a][b];[a]palettegen=max_colors=${colours}:stats_mode=full[p];[b][p]paletteuse=dither=none`],
      png,
    ]);
    if (statSync(png).size <= MAX_BYTES) break;
  }
  rmSync(raw);
  console.log(`${path.relative(root, png)}: ${Math.round(statSync(png).size / 1024)} KB`);
}

async function go(page: Page, hash: string, heading: RegExp): Promise<void> {
  await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
  await page.waitForLoadState('networkidle');
}

async function signIn(browser: Browser, o: { server: TestServer; key: string; width: number; height: number }) {
  const page = await browser.newPage({ viewport: { width: o.width, height: o.height }, deviceScaleFactor: 1 });
  await page.goto(`${o.server.url}/`);
  await page.getByLabel('API key').fill(o.key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
  return page;
}

/** The pages a person goes through, as they look once there is an asset, two tasks and a live stream. */
async function pages(
  page: Page,
  o: { prefix: string; assetId: string; taskId: string; streamId: string },
): Promise<void> {
  await go(page, '#/assets', /^Assets/);
  await shoot(page, `${o.prefix}-assets`);
  await go(page, `#/assets/${o.assetId}`, /./);
  await page.getByRole('option', { name: /720p/ }).waitFor({ state: 'attached' });
  await page.getByLabel('Video player').evaluate((v: { currentTime: number }) => {
    v.currentTime = 3;
  });
  await page.waitForTimeout(500);
  await shoot(page, `${o.prefix}-asset`);
  await go(page, '#/streams', /^Streams$/);
  await shoot(page, `${o.prefix}-streams`);
  await go(page, `#/streams/${o.streamId}`, /./);
  const live = page.getByLabel('Video player');
  await live.waitFor({ timeout: 60_000 }).catch(async (e) => {
    throw new Error(`${e.message}; the page says: ${await page.locator('main').innerText()}`);
  });
  await live.evaluate((v: { muted: boolean; play(): Promise<void> }) => {
    v.muted = true;
    return v.play();
  });
  await page.waitForTimeout(3000);
  await shoot(page, `${o.prefix}-stream`);
  await go(page, '#/tasks', /^Tasks$/);
  await shoot(page, `${o.prefix}-tasks`);
  await go(page, `#/tasks/${o.taskId}`, /^Transcode/);
  await page.locator('.timeline li').first().waitFor();
  await shoot(page, `${o.prefix}-task`);
}

async function main(): Promise<void> {
  const executablePath = findChromium();
  if (!executablePath) throw new Error('no chromium found (apt-get install chromium, or set MEDIAPLANE_CHROMIUM)');
  if (consoleIsStale()) await buildConsole();
  mkdirSync(OUT, { recursive: true });
  const video = sampleVideo();
  const input = await serveFile(video);
  const rtmpPort = await freePort();
  const server = await startTestServer({
    roles: { api: true, worker: true, ingest: true },
    settings: { rtmpPort, srtPort: await freeUdpPort(), ingestHost: '127.0.0.1' },
  });
  let publisher: ChildProcess | undefined;
  const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
  try {
    const key = await server.key('you');
    const desktop = await signIn(browser, { server, key, width: 1280, height: 800 });
    await go(desktop, '#/upload', /^Upload/);
    await desktop.getByLabel('Choose files').setInputFiles(video);
    await desktop.getByText('Processing: making the renditions').waitFor({ timeout: 120_000 });
    await shoot(desktop, 'desktop-upload-processing', false);
    await desktop.getByText('Ready to play').waitFor({ timeout: 180_000 });
    await shoot(desktop, 'desktop-upload-ready', false);
    const assets = await server.call('GET', '/api/asset', { key });
    const assetId: string = assets.body[0].id;
    const body = { input: { url: input.url }, outputs: { hls: { path: '/hls' }, mp4: { path: '/mp4' } } };
    const task = await server.call('POST', '/api/transcode', { key, body });
    const taskId: string = task.body.id;
    await waitFor(
      async () => (await server.call('GET', `/api/task/${taskId}`, { key })).body.status.phase === 'completed',
      180_000,
      'the transcode',
    );
    await server.call('POST', '/api/stream', { key, body: { name: 'Rehearsal' } });
    const stream = await server.call('POST', '/api/stream', { key, body: { name: 'Launch day' } });
    const streamId: string = stream.body.id;
    publisher = publish(`rtmp://127.0.0.1:${rtmpPort}/live/${stream.body.streamKey}`);
    await waitFor(
      async () => (await server.call('GET', `/api/stream/${streamId}`, { key })).body.isActive === true,
      30_000,
      'the stream to go live',
    );
    await pages(desktop, { prefix: 'desktop', assetId, taskId, streamId });
    const phone = await signIn(browser, { server, key, width: 390, height: 844 });
    await go(phone, '#/upload', /^Upload/);
    await shoot(phone, 'phone-upload', false);
    await pages(phone, { prefix: 'phone', assetId, taskId, streamId });
  } finally {
    publisher?.kill('SIGKILL');
    await browser.close();
    await server.stop();
    input.close();
  }
}

await main();
