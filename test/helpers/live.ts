// Live-stream test equipment: a publisher of a generated source whose pixels carry the frame
// number, and a reader that plays HLS in headless Chromium and reads that number back from
// every presented frame, so glass-to-glass latency is measured from outside the service.
//
// The frame code: 16 cells across the top eighth of the picture, cell i white when bit i of
// the frame number n is set, on a black band. ffmpeg's `-re` reads frame n at start + n/fps
// (start: the publish's first frame), so a frame shown at wall time w was w - (start + n/fps)
// old. The cells are large (20x30 px at 320x240) and sampled at their centres, so they
// survive x264 and every rung's downscale.

import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream, readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const resolve = createRequire(import.meta.url).resolve;

/** Bits of the frame number drawn into the picture (65,536 frames: 36 min at 30 fps). */
export const FRAME_CODE_CELLS = 16;
/** The band of cells is this fraction of the picture's height, from its top. */
export const FRAME_CODE_BAND = 1 / 8;

// ---------------------------------------------------------------------------------------------
// The frame code

/**
 * ffmpeg's filter that draws the frame number of each frame into its top band; `offset` is
 * added to it (tests of the high bits).
 */
export function frameCodeFilter(width: number, height: number, offset = 0): string {
  const band = Math.max(8, Math.round((height * FRAME_CODE_BAND) / 2) * 2);
  const boxes = [`drawbox=x=0:y=0:w=iw:h=${band}:color=black:t=fill`];
  for (let i = 0; i < FRAME_CODE_CELLS; i++) {
    const x = Math.floor((i * width) / FRAME_CODE_CELLS);
    const w = Math.floor(((i + 1) * width) / FRAME_CODE_CELLS) - x;
    // drawbox's timeline option: `n` is the frame number; the quotes keep the commas inside.
    boxes.push(`drawbox=x=${x}:y=0:w=${w}:h=${band}:color=white:t=fill:enable='mod(floor((n+${offset})/${2 ** i}),2)'`);
  }
  return boxes.join(',');
}

/**
 * The frame number in an RGBA picture of the band alone (`width` x `height` pixels, cells
 * across it), or undefined when a cell is neither clearly black nor clearly white (a frame
 * caught mid-blend, or no code at all). Each cell's middle half is averaged, away from the
 * edges a codec or a scaler smears.
 *
 * It must stay self-contained: the player page runs this very function (its source is sent
 * to Chromium), so what test/live/latency-meter.test.ts checks is what the page decodes.
 */
export function decodeFrameCells(
  rgba: ArrayLike<number>,
  width: number,
  height: number,
  cells = 16,
): number | undefined {
  let n = 0;
  const y0 = Math.floor(height / 4);
  const y1 = Math.max(y0 + 1, Math.ceil((height * 3) / 4));
  for (let i = 0; i < cells; i++) {
    const left = (i * width) / cells;
    const cellWidth = width / cells;
    const x0 = Math.floor(left + cellWidth / 4);
    const x1 = Math.max(x0 + 1, Math.ceil(left + (cellWidth * 3) / 4));
    let sum = 0;
    let count = 0;
    for (let y = y0; y < y1; y++)
      for (let x = x0; x < x1; x++) {
        const p = (y * width + x) * 4;
        sum += 0.299 * (rgba[p] ?? 0) + 0.587 * (rgba[p + 1] ?? 0) + 0.114 * (rgba[p + 2] ?? 0);
        count++;
      }
    const luma = sum / count;
    if (luma > 64 && luma < 192) return undefined;
    if (luma >= 192) n += 2 ** i;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// The publisher

export interface TestSourceOptions {
  /** rtmp://127.0.0.1:PORT/live/KEY, srt://127.0.0.1:PORT?streamid=KEY, or for 'hls' and 'file' a path. */
  url: string;
  /**
   * 'hls': bare ffmpeg writing ordinary HLS into the playlist's folder (the latency baseline);
   * 'file': an FLV file (a recorded source that benches publish again with `-c copy`).
   */
  protocol: 'rtmp' | 'srt' | 'hls' | 'file';
  /** Paced at the frame rate (-re; default true): false writes a 'file' as fast as it encodes. */
  realtime?: boolean;
  /** How long the source lasts (ffmpeg ends the publish then). */
  seconds: number;
  width?: number;
  height?: number;
  fps?: number;
  /** Video bitrate, kb/s (default: about 0.1 bit per pixel per frame, at least 300). */
  videoKbps?: number;
  /** Seconds between keyframes (default 1; OBS users are told 1-2). */
  keyframeSecs?: number;
  /** B-frames (default 0: x264's zerolatency; OBS's x264 uses 2). */
  bframes?: number;
  /** 'hls' only: the segment length (default 1 s). */
  hlsSegmentSecs?: number;
  /** 'rtmp' only: after this many seconds of valid publish, random bytes instead of ffmpeg's. */
  garbageAfterSeconds?: number;
  /** More output options, before the format (e.g. ['-profile:v', 'baseline']). */
  extraOutputArgs?: string[];
}

export interface TestPublish {
  child: ChildProcess;
  /** Resolves when ffmpeg exits, with its exit code or signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  fps: number;
  /**
   * Wall-clock ms at which frame 0 was read (then frame n at this + n * 1000 / fps):
   * the earliest of `-progress`'s reports less the frames it had encoded; undefined before
   * the first report.
   */
  firstFrameAt(): number | undefined;
  /** Frames encoded so far, as ffmpeg last reported. */
  frames(): number;
  /** The last 4 KB of ffmpeg's stderr, to say why a publish failed. */
  stderr(): string;
  /** With `garbageAfterSeconds`: resolves once the garbage was sent, with its byte count. */
  garbageSent?: Promise<number>;
  /** Ends the publish (SIGINT, then SIGKILL after 3 s) and resolves once ffmpeg has exited. */
  stop(): Promise<void>;
}

/** Every ffmpeg this file started and that still runs: killed if the test process exits first. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

/** The generated source, paced by -re: picture with the frame code, a sine for audio. */
function sourceArgs(o: { width: number; height: number; fps: number; seconds: number; realtime: boolean }): string[] {
  const re = o.realtime ? ['-re'] : [];
  return [
    ...[...re, '-f', 'lavfi', '-i', `testsrc2=size=${o.width}x${o.height}:rate=${o.fps}`],
    ...[...re, '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000'],
    ...['-t', String(o.seconds), '-map', '0:v', '-map', '1:a'],
    ...['-vf', frameCodeFilter(o.width, o.height)],
  ];
}

function encodeArgs(o: TestSourceOptions, fps: number, width: number, height: number): string[] {
  const gop = Math.max(1, Math.round((o.keyframeSecs ?? 1) * fps));
  const kbps = o.videoKbps ?? Math.max(300, Math.round((width * height * fps * 0.1) / 1000));
  return [
    ...['-c:v', 'libx264', '-preset', 'veryfast', '-tune', 'zerolatency', '-pix_fmt', 'yuv420p'],
    ...['-bf', String(o.bframes ?? 0), '-g', String(gop), '-keyint_min', String(gop), '-sc_threshold', '0'],
    // CBR with filler (x264's nal-hrd=cbr), as OBS users are told to stream: the publish sends
    // the bitrate its metadata declares even when the picture is easy to encode.
    ...['-b:v', `${kbps}k`, '-minrate', `${kbps}k`, '-maxrate', `${kbps}k`, '-bufsize', `${kbps}k`],
    ...['-x264-params', 'nal-hrd=cbr'],
    ...['-c:a', 'aac', '-b:a', '64k', '-ar', '48000'],
  ];
}

function outputArgs(o: TestSourceOptions, url: string): string[] {
  if (o.protocol === 'rtmp' || o.protocol === 'file') return ['-f', 'flv', '-y', url];
  if (o.protocol === 'srt') return ['-f', 'mpegts', url];
  const dir = path.dirname(o.url);
  return [
    ...['-f', 'hls', '-hls_time', String(o.hlsSegmentSecs ?? 1), '-hls_list_size', '10'],
    ...['-hls_flags', 'delete_segments+independent_segments+temp_file'],
    ...['-hls_segment_filename', path.join(dir, 'seg%d.ts'), o.url],
  ];
}

/**
 * Publishes the frame-numbered source with ffmpeg (H.264 + AAC, a keyframe every
 * `keyframeSecs`) to `url`. The caller stops it (or lets it end after `seconds`); every one
 * still running is killed when the test process exits.
 */
export async function publishTestSource(o: TestSourceOptions): Promise<TestPublish> {
  const fps = o.fps ?? 30;
  const width = o.width ?? 320;
  const height = o.height ?? 240;
  const garbage = o.garbageAfterSeconds !== undefined ? await garbageProxy(o) : undefined;
  const args = [
    ...['-hide_banner', '-nostdin', '-loglevel', 'warning', '-progress', 'pipe:1', '-stats_period', '0.1'],
    ...sourceArgs({ width, height, fps, seconds: o.seconds, realtime: o.realtime ?? true }),
    ...encodeArgs(o, fps, width, height),
    ...(o.extraOutputArgs ?? []),
    ...outputArgs(o, garbage?.url ?? o.url),
  ];
  const child = spawn('ffmpeg', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => {
      running.delete(child);
      garbage?.close();
      r({ code, signal });
    }),
  );
  const clock = progressClock(child, fps);
  let err = '';
  child.stderr?.on('data', (b: Buffer) => {
    err = (err + b.toString()).slice(-4096);
  });
  return {
    child,
    exited,
    fps,
    firstFrameAt: () => clock.start,
    frames: () => clock.frames,
    stderr: () => err,
    ...(garbage ? { garbageSent: garbage.sent } : {}),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGINT');
      const kill = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(kill);
    },
  };
}

/**
 * Reads `-progress` from ffmpeg's stdout. A report at wall time T saying `frame=N` means frame
 * N-1 was read no earlier than start + (N-1)/fps (-re never reads ahead), so start <= T -
 * (N-1)/fps, and the smallest such bound is the closest: with x264's zerolatency the encoder
 * holds no frame back, so a report lags the reading by the pipe's delay only.
 */
function progressClock(child: ChildProcess, fps: number): { start: number | undefined; frames: number } {
  const clock: { start: number | undefined; frames: number } = { start: undefined, frames: 0 };
  let pending = '';
  child.stdout?.on('data', (b: Buffer) => {
    const now = Date.now();
    pending += b.toString();
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      const m = /^frame=(\d+)/.exec(line);
      if (!m) continue;
      const frames = Number(m[1]);
      if (frames < 1) continue;
      clock.frames = frames;
      const bound = now - ((frames - 1) * 1000) / fps;
      clock.start = clock.start === undefined ? bound : Math.min(clock.start, bound);
    }
  });
  return clock;
}

/**
 * A TCP proxy in front of the RTMP server for ffmpeg to publish through: after
 * `garbageAfterSeconds` of forwarding, it stops forwarding ffmpeg's bytes and sends 256 KiB
 * of random bytes on the same connection instead, as a broken or hostile publisher would
 * after a valid handshake and publish. ffmpeg is left hanging until the server closes the
 * connection (then the proxy closes ffmpeg's side too).
 */
async function garbageProxy(o: TestSourceOptions): Promise<{ url: string; close(): void; sent: Promise<number> }> {
  const target = new URL(o.url);
  const sockets = new Set<net.Socket>();
  let sent: (bytes: number) => void = () => {};
  const sentPromise = new Promise<number>((r) => {
    sent = r;
  });
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 1935), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
    const timer = setTimeout(
      () => {
        client.unpipe(upstream);
        client.pause();
        void sendGarbage(upstream).then(sent);
      },
      (o.garbageAfterSeconds ?? 0) * 1000,
    );
    upstream.on('close', () => clearTimeout(timer));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = new URL(o.url);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as AddressInfo).port);
  return {
    url: url.toString(),
    sent: sentPromise,
    close() {
      for (const s of sockets) s.destroy();
      server.close();
      sent(0);
    },
  };
}

/** 256 KiB of random bytes to the server, with backpressure, until it closes the connection. */
async function sendGarbage(upstream: net.Socket): Promise<number> {
  let bytes = 0;
  for (let i = 0; i < 16 && !upstream.destroyed; i++) {
    const chunk = randomBytes(16 * 1024);
    bytes += chunk.length;
    if (!upstream.write(chunk)) await new Promise((r) => upstream.once('drain', r).once('close', r));
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// The latency reader

export interface LatencySample {
  /** The frame number read from the picture. */
  n: number;
  /** Wall-clock ms at which the frame was presented (requestVideoFrameCallback). */
  wall: number;
}

export interface LatencyReport {
  /** Playback started and frames carrying the code were presented. */
  played: boolean;
  samples: LatencySample[];
  /** Frames presented without a readable code (should be none, or nearly). */
  unreadable: number;
  /** Per sample, ms from the frame's capture to its presentation (with `source`). */
  latencies: number[];
  p50: number;
  p95: number;
  /**
   * Interruptions: presentation paused for more than `stallMs`, or the frame number went
   * backwards or jumped by more than a second of frames.
   */
  stalls: { afterN: number; gapMs: number; skippedFrames: number }[];
  /** hls.js's own estimate of its latency when the watch ended (s), and its target. */
  hlsLatency?: number;
  hlsTargetLatency?: number;
  /** Height of the pictures played, and the hls.js levels switched to. */
  videoHeight: number;
  error?: string;
  /** The page's console errors and hls.js's non-fatal errors. */
  log: string[];
}

export interface WatchOptions {
  url: string;
  lowLatency: boolean;
  /** Seconds of playback to watch, from the first presented frame. */
  seconds: number;
  /** The publish being watched: its first frame's time and fps turn samples into latencies. */
  source?: Pick<TestPublish, 'firstFrameAt' | 'fps'>;
  /** Longest pause between presented frames that is not a stall (default 500 ms). */
  stallMs?: number;
  /** How long playback may take to start (default 20 s). */
  startTimeoutMs?: number;
  /** More hls.js settings (e.g. { startLevel: 0 }). */
  hlsConfig?: Record<string, unknown>;
}

interface PageResult {
  samples: LatencySample[];
  unreadable: number;
  hlsLatency?: number;
  hlsTargetLatency?: number;
  videoHeight: number;
  error?: string;
  log: string[];
}

/**
 * Plays `url` with hls.js in headless Chromium (a page of `target`, or a new page of it when
 * it is a Browser: test/helpers/browser.ts openChromium) and reads the frame number of every
 * presented frame. With `source`, each sample becomes a latency.
 */
export async function watchLatency(target: Browser | Page, o: WatchOptions): Promise<LatencyReport> {
  const ownPage = 'newPage' in target && !('goto' in target);
  const page = ownPage ? await (target as Browser).newPage() : (target as Page);
  const log: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') log.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => log.push(`page error: ${e.message}`));
  try {
    const origin = await latencyPageOrigin();
    if (!page.url().startsWith(origin)) await page.goto(`${origin}/latency.html`);
    const args = {
      url: o.url,
      lowLatency: o.lowLatency,
      seconds: o.seconds,
      startTimeoutMs: o.startTimeoutMs ?? 20_000,
      band: FRAME_CODE_BAND,
      cells: FRAME_CODE_CELLS,
      hlsConfig: o.hlsConfig ?? {},
    };
    const result = (await page.evaluate(
      (a) => (globalThis as unknown as Record<string, (x: unknown) => Promise<unknown>>).watchFrames?.(a),
      args,
    )) as PageResult;
    return summarize({ ...result, log: [...log, ...result.log] }, o);
  } finally {
    if (ownPage) await page.close().catch(() => undefined);
  }
}

/** Plays one rendition's media playlist (hls.js takes one as well as a multivariant one). */
export function playRendition(
  target: Browser | Page,
  o: { url: string; seconds?: number; source?: WatchOptions['source'] },
): Promise<LatencyReport> {
  return watchLatency(target, { url: o.url, lowLatency: true, seconds: o.seconds ?? 2, ...optional(o.source) });
}

function optional(source: WatchOptions['source'] | undefined): Pick<WatchOptions, 'source'> {
  return source ? { source } : {};
}

function summarize(r: PageResult, o: WatchOptions): LatencyReport {
  const start = o.source?.firstFrameAt();
  const fps = o.source?.fps ?? 30;
  const latencies = start === undefined ? [] : r.samples.map((s) => s.wall - (start + (s.n * 1000) / fps));
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.floor(q * (sorted.length - 1))] ?? Number.NaN;
  return {
    played: r.samples.length > 0 && !r.error,
    samples: r.samples,
    unreadable: r.unreadable,
    latencies,
    p50: at(0.5),
    p95: at(0.95),
    stalls: findStalls(r.samples, { fps, stallMs: o.stallMs ?? 500 }),
    ...(r.hlsLatency !== undefined ? { hlsLatency: r.hlsLatency } : {}),
    ...(r.hlsTargetLatency !== undefined ? { hlsTargetLatency: r.hlsTargetLatency } : {}),
    videoHeight: r.videoHeight,
    ...(r.error ? { error: r.error } : {}),
    log: r.log,
  };
}

/** Pauses between presented frames longer than stallMs, and jumps of the frame number. */
export function findStalls(
  samples: readonly LatencySample[],
  o: { fps: number; stallMs: number },
): LatencyReport['stalls'] {
  const stalls: LatencyReport['stalls'] = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1];
    const b = samples[i];
    if (!a || !b) continue;
    const gapMs = b.wall - a.wall;
    const skippedFrames = b.n - a.n - 1;
    if (gapMs > o.stallMs || skippedFrames < -1 || skippedFrames > o.fps)
      stalls.push({ afterN: a.n, gapMs, skippedFrames });
  }
  return stalls;
}

// ---------------------------------------------------------------------------------------------
// The page and the files it plays

let pageServer: Promise<{ origin: string; mounts: Map<string, string> }> | undefined;

/** The player page's origin (one small server per test process, which never holds it open). */
function latencyPageOrigin(): Promise<string> {
  pageServer ??= startLatencyPageServer();
  return pageServer.then((s) => s.origin);
}

/**
 * Serves `dir` under the latency page's origin (no CORS needed): returns its URL prefix, e.g.
 * for bare ffmpeg's HLS folder.
 */
export async function serveFolder(dir: string): Promise<string> {
  pageServer ??= startLatencyPageServer();
  const s = await pageServer;
  const id = String(s.mounts.size + 1);
  s.mounts.set(id, dir);
  return `${s.origin}/files/${id}/`;
}

const PAGE = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>latency</title>
<script src="/lib/hls.js"></script><script src="/decode.js"></script><script src="/latency.js"></script>
</head><body></body></html>`;

const TYPES: Record<string, string> = {
  '.m3u8': 'application/vnd.apple.mpegurl',
  '.ts': 'video/mp2t',
  '.m4s': 'video/iso.segment',
  '.mp4': 'video/mp4',
};

async function startLatencyPageServer(): Promise<{ origin: string; mounts: Map<string, string> }> {
  const mounts = new Map<string, string>();
  const decoder = `globalThis.decodeFrameCells = ${decodeFrameCells.toString()};`;
  const server = http.createServer((req, res) => {
    const pathname = new URL(req.url ?? '/', 'http://x').pathname;
    const send = (type: string, body: string | Buffer) =>
      res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' }).end(body);
    if (pathname === '/latency.html') return send('text/html; charset=utf-8', PAGE);
    if (pathname === '/decode.js') return send('text/javascript', decoder);
    if (pathname === '/latency.js')
      return send('text/javascript', readFileSync(path.join(here, 'latency-page/latency.js')));
    if (pathname === '/lib/hls.js') return send('text/javascript', readFileSync(resolve('hls.js')));
    if (pathname === '/favicon.ico') return void res.writeHead(204).end();
    const m = /^\/files\/(\d+)\/([\w.-]+)$/.exec(pathname);
    const dir = m?.[1] ? mounts.get(m[1]) : undefined;
    if (!dir || !m?.[2]) return void res.writeHead(404).end();
    const file = path.join(dir, m[2]);
    try {
      const size = statSync(file).size;
      res.writeHead(200, {
        'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream',
        'content-length': size,
        'cache-control': 'no-cache',
      });
      createReadStream(file).pipe(res);
    } catch {
      res.writeHead(404).end();
    }
  });
  server.on('connection', (s) => s.unref());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  server.unref();
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, mounts };
}
