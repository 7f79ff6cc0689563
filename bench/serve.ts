// Serving HLS segments (issue #27): GET /media/<key> of the whole service (the API role, its
// folder store, logging at the default level) against a bare node:http server that stats the
// file and pipes fs.createReadStream into the answer, on the same files, measured in the same
// run. Target: the service's req/s >= 0.8 of the bare server's. Not part of `npm test`.
//   node bench/serve.ts [--seconds 10] [--connections 10] [--rounds 3] [--stream]
// The segments are real MPEG-TS from ffmpeg (4 s of 1280x720 at ~3 Mb/s: 1-2 MB each), and
// requests go round them as players of one rendition would ask. Each server runs in a process
// of its own (this file, `--child service|bare`); autocannon runs here.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { createReadStream, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { startChild } from './child.ts';
import { median } from './stats.ts';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const SECONDS = arg('seconds', 10);
const CONNECTIONS = arg('connections', 10);
const ROUNDS = arg('rounds', 3);
const SELF = fileURLToPath(import.meta.url);
/** The line a child prints once it listens: its URL, as JSON. */
const URL_LINE = /"url":"(http:\/\/[^"]+)"/;
/** Where the segments are, under the folder store's root (`<dataDir>/media`). */
const KEY_PREFIX = 'task/bench/hls/720p0';

// As a child, this file serves and never goes on to the parent's code below (killed by it).
const CHILD = process.argv.includes('--child') ? process.argv[process.argv.indexOf('--child') + 1] : undefined;
if (CHILD) {
  process.once('disconnect', () => process.exit(1)); // the parent is gone
  await (CHILD === 'service' ? serveService() : serveBare(process.env.BENCH_MEDIA_ROOT ?? ''));
  await new Promise(() => {});
}

/** The API role as `mediaplane api` starts it (no worker competes for the CPU); prints its URL. */
async function serveService(): Promise<void> {
  // As bin/mediaplane.js does first thing.
  const { tuneGcForStreaming } = await import('../src/lib/gc-tuning.ts');
  tuneGcForStreaming();
  const { loadConfig } = await import('../src/config/index.ts');
  const { startRoles, stopOnSignals } = await import('../src/main.ts');
  const running = await startRoles(loadConfig(), { api: true, worker: false });
  // --stream: bodies through the store's read stream (fs.createReadStream), as a store without
  // writeTo sends them, to compare with the folder store's reused buffers.
  if (process.env.BENCH_STREAM) Object.defineProperty(running.core.builtinStore, 'writeTo', { value: undefined });
  void stopOnSignals(running, running.core.log).then(() => process.exit(0));
  console.log(JSON.stringify({ url: running.url }));
}

/** The baseline: a file's size from stat, then its bytes piped from fs.createReadStream. */
async function serveBare(root: string): Promise<void> {
  const server = createServer((req, res) => {
    const file = join(root, (req.url ?? '/').slice('/media/'.length));
    let size: number;
    try {
      size = statSync(file).size;
    } catch {
      return void res.writeHead(404).end();
    }
    res.writeHead(200, { 'content-type': 'video/mp2t', 'content-length': size });
    createReadStream(file).pipe(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  console.log(JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
}

/** CPU seconds (user + system) a process has used, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Result {
  rps: number;
  mbps: number;
  p99: number;
  /** CPU milliseconds of the server process per request. */
  cpuMsPerReq: number;
}

async function run(title: string, server: { child: ChildProcess; url: string }, segments: string[]): Promise<Result> {
  const cpu0 = cpuSeconds(server.child.pid ?? 0);
  // Each connection asks for the segments in turn, as a player of one rendition does.
  const requests = segments.map((key) => ({ path: `/media/${key}` }));
  const r = await autocannon({ url: server.url, connections: CONNECTIONS, duration: SECONDS, requests });
  const cpu = cpuSeconds(server.child.pid ?? 0) - cpu0;
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${title}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
  const res = {
    rps: r.requests.average,
    mbps: r.throughput.average / 1e6,
    p99: r.latency.p99,
    cpuMsPerReq: (cpu * 1000) / Math.max(1, r.requests.total),
  };
  console.log(
    `${title.padEnd(22)} ${res.rps.toFixed(0).padStart(6)} req/s ${res.mbps.toFixed(0).padStart(6)} MB/s   p99 ${String(res.p99).padStart(4)} ms   server CPU ${res.cpuMsPerReq.toFixed(2)} ms/req`,
  );
  return res;
}

/** Real MPEG-TS segments from ffmpeg, 4 s each, in `dir`; returns their keys. */
function makeSegments(dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const ff = spawnSync(
    'ffmpeg',
    [
      ...['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=1280x720:rate=30', '-t', '48'],
      ...['-c:v', 'libx264', '-preset', 'ultrafast', '-b:v', '3M', '-maxrate', '3M', '-bufsize', '6M', '-g', '60'],
      ...['-f', 'hls', '-hls_time', '4', '-hls_playlist_type', 'vod', '-hls_segment_filename', join(dir, '%d.ts')],
      join(dir, 'index.m3u8'),
    ],
    { stdio: 'inherit' },
  );
  if (ff.status !== 0) throw new Error(`ffmpeg exited with ${ff.status}`);
  return readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `${KEY_PREFIX}/${f}`);
}

const dataDir = mkdtempSync(join(tmpdir(), 'mediaplane-bench-serve-'));
const mediaRoot = join(dataDir, 'media');
const segments = makeSegments(join(mediaRoot, KEY_PREFIX));
const sizes = segments.map((k) => statSync(join(mediaRoot, k)).size);
console.log(
  `${segments.length} segments of ${(Math.min(...sizes) / 1e6).toFixed(2)}-${(Math.max(...sizes) / 1e6).toFixed(2)} MB; autocannon ${CONNECTIONS} connections, ${SECONDS} s a run\n`,
);
const env = {
  MEDIAPLANE_DATA_DIR: dataDir,
  MEDIAPLANE_PORT: '0',
  BENCH_MEDIA_ROOT: mediaRoot,
  ...(process.argv.includes('--stream') ? { BENCH_STREAM: '1' } : {}),
};
const bare = await startChild([SELF, '--child', 'bare'], env, URL_LINE);
const service = await startChild([SELF, '--child', 'service'], env, URL_LINE);
try {
  const check = await fetch(`${service.url}/media/${segments[0]}`);
  if ((await check.arrayBuffer()).byteLength !== sizes[0]) throw new Error('the service did not serve the segment');
  // Warm-up of both (JIT, page cache), not counted.
  await autocannon({ url: `${bare.url}/media/${segments[0]}`, connections: CONNECTIONS, duration: 2 });
  await autocannon({ url: `${service.url}/media/${segments[0]}`, connections: CONNECTIONS, duration: 2 });
  // b0 s1 b1 s2 b2 ...: each service run is set against the mean of the bare runs either side.
  const bares = [await run('bare b0', bare, segments)];
  const ratios: { rps: number; mbps: number }[] = [];
  for (let i = 1; i <= ROUNDS; i++) {
    const s = await run(`mediaplane s${i}`, service, segments);
    const b = await run(`bare b${i}`, bare, segments);
    const before = bares[bares.length - 1] ?? b;
    bares.push(b);
    ratios.push({ rps: s.rps / ((before.rps + b.rps) / 2), mbps: s.mbps / ((before.mbps + b.mbps) / 2) });
  }
  const rps = ratios.map((r) => r.rps);
  console.log(
    `\nreq/s ratio mediaplane / bare: ${median(rps).toFixed(3)} median (rounds ${rps.map((r) => r.toFixed(3)).join(', ')}); MB/s ratio ${median(ratios.map((r) => r.mbps)).toFixed(3)} (target >= 0.8)`,
  );
} finally {
  bare.child.kill();
  service.child.kill('SIGTERM');
  await new Promise((r) => service.child.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
}
