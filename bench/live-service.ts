// What bench/live.ts needs of the service: `mediaplane start` in a child process with RTMP
// ingest on a free port, its default segment and part lengths, streams made through the API and
// their health, the live playlists' URLs, and the CPU the service process and its children (the
// ladders' ffmpeg) used, read from /proc.

import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort } from './child.ts';

const BIN = fileURLToPath(new URL('../bin/mediaplane.js', import.meta.url));
const run = promisify(execFile);

/** The service's defaults (MEDIAPLANE_LIVE_SEGMENT_SECS, MEDIAPLANE_LIVE_PART_SECS). */
export const TIMING = { segmentSecs: 1, partSecs: 0.25 };

export interface LiveService {
  pid: number;
  url: string;
  key: string;
  rtmpPort: number;
  /** The service's data folder (the built-in store's files when it is not an S3 bucket). */
  dataDir: string;
  /** CPU seconds (user + system) of the service process itself and of its reaped children. */
  cpu(): { self: number; children: number };
  /** The service's error log lines so far (pino JSON), to say why a ladder stopped. */
  errors(): string[];
  stop(): Promise<void>;
}

export interface BenchStream {
  id: string;
  streamKey: string;
  playbackId: string;
}

/** CPU seconds of `pid` from /proc: its own (utime + stime) and its waited-for children's (cutime + cstime). */
export function procCpu(pid: number | 'self'): { self: number; children: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  const tick = (i: number) => Number(fields[i] ?? Number.NaN) / 100;
  return { self: tick(11) + tick(12), children: tick(13) + tick(14) };
}

/**
 * `mediaplane start` as an operator runs it (API, worker, RTMP ingest; SRT off), logging
 * warnings only; `env` adds settings (e.g. MEDIAPLANE_LIVE_CPU_CAPACITY), `command` runs
 * another role (`ingest`, `api`: the nodes of bench/live-cluster.ts).
 */
export async function startLiveService(
  env: Record<string, string> = {},
  command: 'start' | 'ingest' | 'api' = 'start',
): Promise<LiveService> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mediaplane-bench-live-'));
  const rtmpPort = await freePort();
  const fullEnv = {
    ...process.env,
    MEDIAPLANE_DATA_DIR: dataDir,
    MEDIAPLANE_PORT: String(await freePort()),
    MEDIAPLANE_HOST: '127.0.0.1',
    MEDIAPLANE_RTMP_PORT: String(rtmpPort),
    MEDIAPLANE_SRT_PORT: '0',
    MEDIAPLANE_LOG_LEVEL: 'warn',
    // e.g. --cpu-prof --cpu-prof-dir=/tmp/prof: where the service's own CPU goes.
    ...(process.env.BENCH_SERVICE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVICE_NODE_OPTIONS } : {}),
    ...env,
  };
  const key = (
    await run(process.execPath, [BIN, 'keys', 'create', '--owner', 'bench'], { env: fullEnv })
  ).stdout.trim();
  const child = spawn(process.execPath, [BIN, command], { env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const keep = (b: Buffer) => {
    tail = (tail + b.toString()).slice(-4000);
  };
  const errors: string[] = [];
  let partial = '';
  child.stdout.on('data', (b: Buffer) => {
    keep(b);
    const lines = (partial + b.toString()).split('\n');
    partial = lines.pop() ?? '';
    // pino's level 50 and above: error, fatal.
    errors.push(...lines.filter((l) => /"level":(5|6)0/.test(l)));
  });
  child.stderr.on('data', keep);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = `http://127.0.0.1:${fullEnv.MEDIAPLANE_PORT}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`mediaplane ${command} exited with ${child.exitCode}: ${tail}`);
    if (
      await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (Date.now() > deadline) throw new Error(`mediaplane ${command} did not answer: ${tail}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const pid = child.pid ?? 0;
  return {
    pid,
    url,
    key,
    rtmpPort,
    dataDir,
    cpu: () => procCpu(pid),
    errors: () => errors,
    async stop() {
      child.kill('SIGTERM');
      const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(kill);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A JSON call to the service's API with the bench's key. */
export async function api(svc: LiveService, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${svc.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${svc.key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : undefined;
}

/** POST /api/stream; `profiles` undefined: the default ladder. */
export async function createStream(svc: LiveService, name: string, profiles?: unknown[]): Promise<BenchStream> {
  const s = await api(svc, 'POST', '/api/stream', { name, ...(profiles ? { profiles } : {}) });
  return { id: s.id, streamKey: s.streamKey, playbackId: s.playbackId };
}

export function rtmpUrl(svc: LiveService, s: BenchStream): string {
  return `rtmp://127.0.0.1:${svc.rtmpPort}/live/${s.streamKey}`;
}

/** The multivariant playlist of a live stream, or one rendition's media playlist. */
export function liveUrl(svc: LiveService, s: BenchStream, rendition?: string): string {
  return `${svc.url}/media/live/${s.playbackId}/${rendition ? `${rendition}/` : ''}index.m3u8`;
}

/**
 * Polls the multivariant playlist every 20 ms until it answers (the service answers it once
 * every rendition has its first part); resolves with the wall time of that answer.
 */
export async function waitLive(svc: LiveService, s: BenchStream, timeoutMs = 30_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const res = await fetch(liveUrl(svc, s)).catch(() => undefined);
    if (res?.ok) {
      await res.arrayBuffer();
      return Date.now();
    }
    await res?.arrayBuffer();
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`stream ${s.id} had no multivariant playlist within ${timeoutMs} ms`);
}

/** Waits until GET /api/stream/{id} says the stream is no longer active (its session ended). */
export async function waitIdle(svc: LiveService, s: BenchStream, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!(await api(svc, 'GET', `/api/stream/${s.id}`)).isActive) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`stream ${s.id} still active after ${timeoutMs} ms`);
}

/** The media sequence number of a rendition's newest segment (its playlist's last EXTINF). */
export async function newestSegment(url: string): Promise<number | undefined> {
  const res = await fetch(url).catch(() => undefined);
  if (!res?.ok) return undefined;
  const text = await res.text();
  const first = Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(text)?.[1] ?? Number.NaN);
  const segments = text.split('#EXTINF').length - 1;
  return Number.isFinite(first) ? first + segments - 1 : undefined;
}

/** ffmpeg copying a recorded FLV to `url` in real time, looped (`-stream_loop -1`) for `seconds`. */
export function publishFile(file: string, url: string, seconds: number) {
  const child = spawn(
    'ffmpeg',
    [
      ...['-hide_banner', '-nostdin', '-loglevel', 'error', '-re', '-stream_loop', '-1', '-i', file],
      ...['-t', String(seconds), '-c', 'copy', '-f', 'flv', url],
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let err = '';
  child.stderr.on('data', (b: Buffer) => {
    err = (err + b.toString()).slice(-2000);
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    child,
    exited,
    stderr: () => err,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** GET /api/stream/{id}: whether the service says the stream is healthy, and its issues. */
export async function fetchStream(svc: LiveService, s: BenchStream): Promise<{ isHealthy: boolean; issues: string[] }> {
  const res = await fetch(`${svc.url}/api/stream/${s.id}`, { headers: { authorization: `Bearer ${svc.key}` } });
  const body = (await res.json()) as { isHealthy?: boolean; issues?: string[] };
  return { isHealthy: body.isHealthy === true, issues: body.issues ?? [] };
}
