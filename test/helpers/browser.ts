import { accessSync, constants, createReadStream } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { type Browser, type BrowserServer, chromium, type Page } from 'playwright-core';
import type { TestS3 } from './s3.ts';

// Real-browser playback for transcode outputs (issue #19): the system Chromium (Debian's
// `chromium`, which plays H.264, AAC, AV1 and VP9) driven by playwright-core, which never
// downloads a browser of its own. One small HTTP server gives the page, the player
// libraries and the bucket's objects the same origin, so no CORS is needed anywhere.

const here = path.dirname(fileURLToPath(import.meta.url));
const resolve = createRequire(import.meta.url).resolve;

/** What a player reported after one play. */
export interface PlayResult {
  /** currentTime reached: past ~1 s, or the end of a clip shorter than that. */
  played: number;
  ended: boolean;
  duration: number;
  /** Height of the decoded picture (0 for audio only). */
  videoHeight: number;
  /** Text cues loaded into the media element (with `subtitles: true`). */
  cues: number;
  /** A fatal player or media error, or why playback never advanced. */
  error?: string;
  levels: { height: number | null; codecs: string }[];
  audioTracks: { lang: string; name: string; default: boolean }[];
  textTracks: { lang: string; kind: string }[];
  /** hls.js: the levels of the video fragments that went into the buffer. */
  fragmentLevels?: number[];
  /** hls.js: each LEVEL_SWITCHED event's level. */
  switchedTo?: number[];
  /** shaka-player: the variant that was active when the play ended. */
  playing?: { height: number | null; codecs: string };
  /** The page's console errors and uncaught exceptions, to say why a play failed. */
  log: string[];
  /** The media element's buffered ranges when the play ended, [start, end] seconds. */
  buffered?: [number, number][];
  /** hls.js and shaka-player: currentTime when playback began, and the stalls for data after it (issue #30). */
  startedAt?: number;
  stalls?: number;
}

/** Issue #30: play from `start` (seconds) until `start + seconds`, e.g. across a chunk seam. */
export interface PlayWindow {
  start?: number;
  seconds?: number;
}

export interface BrowserPlayer {
  /** The URL under which the page reaches an object of the test's S3 server. */
  mediaUrl(bucket: string, key: string): string;
  /** hls.js; `level` locks that level (ABR off), `subtitles` turns the first text track on. */
  playHls(url: string, opts?: { level?: number; subtitles?: boolean } & PlayWindow): Promise<PlayResult>;
  /** shaka-player on a DASH manifest; `videoCodec` prefers that codec's variants (e.g. 'av01'). */
  playDash(url: string, opts?: { videoCodec?: string; subtitles?: boolean } & PlayWindow): Promise<PlayResult>;
  /** A progressive file (MP4, M4A) in a bare <video>. */
  playFile(url: string): Promise<PlayResult>;
  close(): Promise<void>;
}

/** Where the Chromium binary is: MEDIAPLANE_CHROMIUM, /usr/bin/chromium, or one on PATH. */
export function findChromium(): string | undefined {
  const onPath = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter(Boolean)
    .flatMap((dir) => ['chromium', 'chromium-browser'].map((name) => path.join(dir, name)));
  const candidates = [process.env.MEDIAPLANE_CHROMIUM, '/usr/bin/chromium', ...onPath];
  return candidates.find((file): file is string => {
    if (!file) return false;
    try {
      accessSync(file, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Set by scripts/test.ts: the ws endpoint of the run's one Chromium, which every file connects to. */
export const BROWSER_WS_ENV = 'MEDIAPLANE_TEST_BROWSER_WS';

// No sandbox: tests run as root in containers, where Chromium's sandbox cannot start. Players
// start without a click; what they play is heard by nobody.
const CHROMIUM_ARGS = ['--no-sandbox', '--autoplay-policy=no-user-gesture-required', '--mute-audio'];
const NO_CHROMIUM = 'Chromium cannot start: no chromium found (apt-get install chromium, or set MEDIAPLANE_CHROMIUM)';

/**
 * Chromium as a server for the whole run (scripts/test.ts): one launch instead of one per
 * file. Resolves with the reason when it cannot start.
 */
export async function launchChromiumServer(): Promise<BrowserServer | string> {
  const executablePath = findChromium();
  if (!executablePath) return NO_CHROMIUM;
  try {
    return await chromium.launchServer({ executablePath, headless: true, timeout: 30_000, args: CHROMIUM_ARGS });
  } catch (e) {
    return `Chromium cannot start: ${executablePath}: ${launchFailure((e as Error).message)}`;
  }
}

/**
 * The run's Chromium (BROWSER_WS_ENV), or one of this process's own when a file runs on its
 * own or the run's cannot be reached; resolves with the reason instead when none can start.
 * Each page opened on it gets a browser context of its own, and close() closes only those.
 */
export async function openChromium(): Promise<Browser | string> {
  const endpoint = process.env[BROWSER_WS_ENV];
  if (endpoint) {
    try {
      return await chromium.connect(endpoint, { timeout: 30_000 });
    } catch {}
  }
  const executablePath = findChromium();
  if (!executablePath) return NO_CHROMIUM;
  try {
    return await chromium.launch({ executablePath, headless: true, timeout: 30_000, args: CHROMIUM_ARGS });
  } catch (e) {
    return `Chromium cannot start: ${executablePath}: ${launchFailure((e as Error).message)}`;
  }
}

/**
 * Opens headless Chromium (openChromium) and the page server for `s3`'s objects. Resolves with
 * the reason instead when Chromium is missing or cannot start, for the tests to skip with.
 * Without `s3` the page plays absolute URLs of another origin (the service's /media, which
 * sends CORS).
 */
export async function startBrowserPlayer(s3?: TestS3): Promise<BrowserPlayer | { skip: string }> {
  const browser = await openChromium();
  if (typeof browser === 'string') return { skip: browser };
  const server = await startPageServer(s3);
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const pages = pageKeeper(browser, origin);
  const play = (fn: string, args: unknown[]): Promise<PlayResult> => pages.play(fn, args);
  return {
    mediaUrl: (bucket, key) => `${origin}/media/${bucket}/${key.replace(/^\/+/, '')}`,
    playHls: (url, opts = {}) => play('playHls', [url, opts]),
    playDash: (url, opts = {}) => play('playDash', [url, opts]),
    playFile: (url) => play('playFile', [url]),
    async close() {
      await browser.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * Playwright's launch error in a line: its first line, what Chromium wrote to stderr (a
 * missing library, a sandbox refusal) and the exit code, without the long argument list.
 */
function launchFailure(message: string): string {
  const lines = message.split('\n');
  const stderr = lines.filter((l) => /^\[pid=\d+\]\[err\] /.test(l)).map((l) => l.replace(/^\[pid=\d+\]\[err\] /, ''));
  const exit = /process did exit: (exitCode=\d+)/.exec(message)?.[1];
  return [lines[0], ...stderr.slice(0, 3), exit].filter(Boolean).join('; ');
}

/**
 * One player page for every play: a new page and the libraries' parse cost about 2 s on a
 * 2-core host, longer than the play. Each play destroys its player and media element; a
 * play that throws (a crashed page) gets a fresh page next time.
 */
function pageKeeper(browser: Browser, origin: string): { play(fn: string, args: unknown[]): Promise<PlayResult> } {
  let page: Page | undefined;
  let log: string[] = [];
  const open = async (): Promise<Page> => {
    const p = await browser.newPage();
    p.on('console', (m) => {
      if (m.type() === 'error') log.push(`console: ${m.text()}`);
    });
    p.on('pageerror', (e) => log.push(`page error: ${e.message}`));
    await p.goto(`${origin}/player.html`);
    return p;
  };
  return {
    async play(fn, args) {
      log = [];
      page ??= await open();
      try {
        // The functions live in player.js; tsc knows no DOM here, so they are called by name.
        const result = await page.evaluate(
          ([name, a]) => (globalThis as unknown as Record<string, (...x: unknown[]) => Promise<unknown>>)[name]?.(...a),
          [fn, args] as const,
        );
        return { ...(result as Omit<PlayResult, 'log'>), log };
      } catch (e) {
        await page.close().catch(() => undefined);
        page = undefined;
        throw e;
      }
    },
  };
}

const ASSETS: Record<string, { file: string; type: string }> = {
  '/player.html': { file: path.join(here, 'player/player.html'), type: 'text/html; charset=utf-8' },
  '/player.js': { file: path.join(here, 'player/player.js'), type: 'text/javascript' },
  '/lib/hls.js': { file: resolve('hls.js'), type: 'text/javascript' },
  '/lib/shaka-player.js': { file: resolve('shaka-player'), type: 'text/javascript' },
};

/** The page, the player libraries, and /media/<bucket>/<key> read from S3 (Range passed on). */
async function startPageServer(s3: TestS3 | undefined): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const pathname = new URL(req.url ?? '/', 'http://x').pathname;
    const asset = ASSETS[pathname];
    if (asset) {
      res.writeHead(200, { 'content-type': asset.type });
      createReadStream(asset.file).pipe(res);
      return;
    }
    if (pathname === '/favicon.ico') {
      // Asked for by every page; a 404 would read as a failure in the page's console log.
      res.writeHead(204).end();
      return;
    }
    const media = /^\/media\/([^/]+)\/(.+)$/.exec(pathname);
    if (!s3 || !media?.[1] || !media[2]) {
      res.writeHead(404).end();
      return;
    }
    void serveObject(s3, { bucket: media[1], key: decodeURIComponent(media[2]), req, res });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return server;
}

async function serveObject(
  s3: TestS3,
  o: { bucket: string; key: string; req: http.IncomingMessage; res: http.ServerResponse },
): Promise<void> {
  const range = o.req.headers.range;
  try {
    const got = await s3.client.send(
      new GetObjectCommand({ Bucket: o.bucket, Key: o.key, ...(range ? { Range: range } : {}) }),
    );
    const headers: Record<string, string | number> = { 'accept-ranges': 'bytes' };
    if (got.ContentType) headers['content-type'] = got.ContentType;
    if (got.ContentLength !== undefined) headers['content-length'] = got.ContentLength;
    if (got.ContentRange) headers['content-range'] = got.ContentRange;
    o.res.writeHead(got.ContentRange ? 206 : 200, headers);
    if (got.Body instanceof Readable) got.Body.pipe(o.res);
    else o.res.end(Buffer.from((await got.Body?.transformToByteArray()) ?? []));
  } catch (e) {
    const status = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode ?? 502;
    o.res.writeHead(status, { 'content-type': 'text/plain' }).end(`${o.key}: ${(e as Error).name}`);
  }
}
