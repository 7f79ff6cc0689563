// Live streams: what a publisher and a viewer of `mediaplane start` get on this host, against
// baselines measured in the same run. Not part of `npm test`.
//   node bench/live.ts [--only latency,first-part,cpu,recording,capacity,viewers] [--rounds 2] [--watch 20]
//                      [--seconds 60] [--cpu-size 1280x720] [--publishes 5] [--max-streams 4]
//                      [--viewers 500] [--window 20]
// Legs (each prints its figures; a summary against the targets closes the run):
// - latency: glass-to-glass through LL-HLS in Chromium (hls.js lowLatencyMode), read from the
//   frame number drawn into a 640x360p30 source published over RTMP (test/helpers/live.ts),
//   the default ladder; against bare ffmpeg writing ordinary HLS with 1 s segments from the
//   same source into a folder, watched the same way. A viewer joins a running stream (the
//   service's 4 s after its first parts, the baseline's once its playlist lists 4 segments)
//   and watches `--watch` s. Rounds alternate baseline, service. Target p50 <= 2.0 s, p95 <= 3.0 s.
// - first-part: from the publish's first frame (and from ffmpeg's start) to the multivariant
//   playlist's first answer, which the service gives once every rendition has its first part;
//   `--publishes` publishes of the default ladder. Target p50 <= 1.5 s.
// - cpu: the default ladder of a recorded `--cpu-size` p30 source (1280x720: 4 rungs;
//   `--seconds` long, copied in real time), the CPU of the service's ladder ffmpeg (the service's reaped children) and
//   of the service itself, against ladder.ts's command run bare on the same FLV from a pipe,
//   writing its renditions to /dev/null: b0 s1 b1, s1 against the mean of b0 and b1. Target <= 1.10.
// - recording: the CPU `record: true` adds to a live stream (bench/live-recording.ts): the
//   `--cpu-size` source published three times, without, with and without `record`, to a service
//   whose reconnect window outlasts the leg (no recording is encoded meanwhile). Target: under
//   5% of the ladder's CPU (the archive copies the source's parts; it encodes nothing).
// - capacity: streams of a recorded 720p30 source (30 s, looped) with the default ladder added one at a
//   time (admission's CPU capacity set out of the way) until one falls behind: a stream holds
//   real time when its 720p0 rendition gained at least 0.9 segments a second over `--window`
//   s and GET /api/stream says it is healthy with no issues.
// - viewers: `--viewers` loopback LL-HLS viewers of one 426x240p30 stream (the source alone),
//   each fetching the hinted part, then the playlist with _HLS_msn/_HLS_part (a blocking
//   reload), as hls.js does; the service process's own CPU (not its ffmpeg) over `--window` s,
//   against the same stream with no viewer. Target: under one core.

import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, rmSync } from 'node:fs';
import http from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Browser } from 'playwright-core';
import { planLiveLadder } from '../src/live/ladder.ts';
import { rungsFor } from '../src/live/profiles.ts';
import { openChromium } from '../test/helpers/browser.ts';
import { type LatencyReport, publishTestSource, serveFolder, watchLatency } from '../test/helpers/live.ts';
import {
  createStream,
  fetchStream,
  type LiveService,
  liveUrl,
  procCpu,
  publishFile,
  rtmpUrl,
  startLiveService,
  TIMING,
  waitIdle,
  waitLive,
} from './live-service.ts';
import { capacityLeg } from './live-capacity.ts';
import { median } from './stats.ts';
import { recordingLeg } from './live-recording.ts';
import { type ViewerCounts, viewer } from './live-viewers.ts';

const { values: opt } = parseArgs({
  options: {
    only: { type: 'string', default: 'latency,first-part,cpu,recording,capacity,viewers' },
    rounds: { type: 'string', default: '2' },
    watch: { type: 'string', default: '20' },
    seconds: { type: 'string', default: '60' },
    publishes: { type: 'string', default: '5' },
    'max-streams': { type: 'string', default: '4' },
    'cpu-size': { type: 'string', default: '1280x720' },
    viewers: { type: 'string', default: '500' },
    window: { type: 'string', default: '20' },
  },
});
const LEGS = new Set(opt.only.split(','));
const ROUNDS = Number(opt.rounds);
const WATCH = Number(opt.watch);
const SECONDS = Number(opt.seconds);
const WINDOW = Number(opt.window);
/** The source of the latency and first-part legs: small enough to leave the ladder the CPU. */
const SMALL = { width: 640, height: 360, fps: 30 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg()[0]?.toFixed(1);
const s2 = (ms: number) => (ms / 1000).toFixed(2);
const summary: string[] = [];

// ---------------------------------------------------------------------------------------------
// latency

async function bareHlsLatency(browser: Browser): Promise<LatencyReport> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-live-hls-'));
  const url = join(dir, 'index.m3u8');
  const pub = await publishTestSource({ url, protocol: 'hls', seconds: WATCH + 30, ...SMALL });
  try {
    const prefix = await serveFolder(dir);
    const deadline = Date.now() + 30_000;
    while ((await segmentsListed(`${prefix}index.m3u8`)) < 4) {
      if (Date.now() > deadline) throw new Error(`bare HLS never listed 4 segments: ${pub.stderr()}`);
      await sleep(100);
    }
    return await watchLatency(browser, { url: `${prefix}index.m3u8`, lowLatency: true, seconds: WATCH, source: pub });
  } finally {
    await pub.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function segmentsListed(url: string): Promise<number> {
  const res = await fetch(url);
  return res.ok ? (await res.text()).split('#EXTINF').length - 1 : 0;
}

async function serviceLatency(svc: LiveService, browser: Browser, round: number): Promise<LatencyReport> {
  const s = await createStream(svc, `latency ${round}`);
  const pub = await publishTestSource({ url: rtmpUrl(svc, s), protocol: 'rtmp', seconds: WATCH + 30, ...SMALL });
  try {
    await waitLive(svc, s);
    await sleep(4000);
    return await watchLatency(browser, { url: liveUrl(svc, s), lowLatency: true, seconds: WATCH, source: pub });
  } finally {
    await pub.stop();
    await waitIdle(svc, s).catch(() => undefined);
  }
}

function latencyLine(title: string, r: LatencyReport): string {
  if (!r.played) return `${title.padEnd(26)} did not play: ${r.error ?? r.log.slice(0, 3).join('; ')}`;
  return (
    `${title.padEnd(26)} p50 ${s2(r.p50)} s  p95 ${s2(r.p95)} s  (hls.js ${r.hlsLatency?.toFixed(2) ?? '-'} s)  ` +
    `${r.samples.length} frames, ${r.unreadable} unreadable, ${r.stalls.length} stalls, ${r.videoHeight}p`
  );
}

async function latencyLeg(svc: LiveService, browser: Browser): Promise<void> {
  console.log(`\n## latency (${ROUNDS} rounds, ${WATCH} s watched each, load ${load()})`);
  const live: LatencyReport[] = [];
  const bare: LatencyReport[] = [];
  for (let r = 1; r <= ROUNDS; r++) {
    const b = await bareHlsLatency(browser);
    console.log(latencyLine(`bare ffmpeg HLS 1 s, b${r}`, b));
    bare.push(b);
    const l = await serviceLatency(svc, browser, r);
    console.log(latencyLine(`mediaplane LL-HLS, s${r}`, l));
    live.push(l);
  }
  const p = (rs: LatencyReport[], k: 'p50' | 'p95') => median(rs.filter((r) => r.played).map((r) => r[k]));
  summary.push(
    `| glass-to-glass p50 / p95 (LL-HLS, Chromium) | ${s2(p(live, 'p50'))} / ${s2(p(live, 'p95'))} s; bare ffmpeg HLS ${s2(p(bare, 'p50'))} / ${s2(p(bare, 'p95'))} s | <= 2.0 / 3.0 s |`,
  );
}

// ---------------------------------------------------------------------------------------------
// first part of every rendition

async function firstPartLeg(svc: LiveService): Promise<void> {
  const n = Number(opt.publishes);
  console.log(`\n## publish to the first part of every rendition (${n} publishes, load ${load()})`);
  const fromFrame: number[] = [];
  const fromSpawn: number[] = [];
  for (let i = 1; i <= n; i++) {
    const s = await createStream(svc, `first part ${i}`);
    const spawnedAt = Date.now();
    const pub = await publishTestSource({ url: rtmpUrl(svc, s), protocol: 'rtmp', seconds: 10, ...SMALL });
    try {
      const readyAt = await waitLive(svc, s);
      const first = pub.firstFrameAt() ?? Number.NaN;
      fromFrame.push(readyAt - first);
      fromSpawn.push(readyAt - spawnedAt);
      console.log(
        `publish ${i}: ${s2(readyAt - first)} s from its first frame, ${s2(readyAt - spawnedAt)} s from ffmpeg's start`,
      );
    } finally {
      await pub.stop();
      await waitIdle(svc, s).catch(() => undefined);
    }
  }
  summary.push(
    `| publish to the first part of every rendition | p50 ${s2(median(fromFrame))} s from the first frame (max ${s2(Math.max(...fromFrame))}); ${s2(median(fromSpawn))} s from ffmpeg's start | p50 <= 1.5 s |`,
  );
}

// ---------------------------------------------------------------------------------------------
// the ladder's CPU

/** What the session learns of a recorded source (ladder.ts plans from it). */
interface RecordedSource {
  file: string;
  info: { videoCodec: 'h264'; audioCodec: 'aac'; width: number; height: number; fps: number };
}

/** The frame-numbered source at `width`x`height` p30, written to an FLV as fast as x264 goes. */
async function recordSource(
  dir: string,
  o: { seconds: number; width: number; height: number },
): Promise<RecordedSource> {
  const file = join(dir, `source-${o.width}x${o.height}p30.flv`);
  const pub = await publishTestSource({ url: file, protocol: 'file', realtime: false, fps: 30, ...o });
  const { code } = await pub.exited;
  if (code !== 0) throw new Error(`recording the ${o.width}x${o.height} source failed: ${pub.stderr()}`);
  return { file, info: { videoCodec: 'h264', audioCodec: 'aac', width: o.width, height: o.height, fps: 30 } };
}

/** ladder.ts's command run bare on the recording fed in real time from a pipe; CPU seconds from bash's `times`. */
async function bareLadder(src: RecordedSource): Promise<{ cpu: number; wall: number }> {
  const plan = planLiveLadder({ rungs: rungsFor(null, src.info), source: src.info, timing: TIMING });
  const devnull = openSync('/dev/null', 'w');
  const stdio: ('pipe' | number)[] = ['pipe', 'pipe', 'pipe'];
  for (const r of plan.renditions) stdio[r.fd] = devnull;
  const started = Date.now();
  const ladder = spawn('bash', ['-c', 'ffmpeg "$@"; s=$?; times; exit $s', 'ladder', ...plan.args], { stdio });
  const feeder = spawn(
    'ffmpeg',
    ['-hide_banner', '-loglevel', 'error', '-re', '-i', src.file, '-c', 'copy', '-f', 'flv', 'pipe:1'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  feeder.stdout.pipe(ladder.stdin as NodeJS.WritableStream);
  let out = '';
  let err = '';
  ladder.stdout?.on('data', (b: Buffer) => {
    out += b.toString();
  });
  ladder.stderr?.on('data', (b: Buffer) => {
    err = (err + b.toString()).slice(-2000);
  });
  const code = await new Promise<number | null>((r) => ladder.once('exit', r));
  if (code !== 0) throw new Error(`the bare ladder exited with ${code}: ${err}`);
  // `times`: the shell's own user and system time, then its children's (ffmpeg's).
  const children = out.trim().split('\n').at(-1) ?? '';
  const cpu = [...children.matchAll(/(\d+)m([\d.]+)s/g)].reduce((a, m) => a + Number(m[1]) * 60 + Number(m[2]), 0);
  return { cpu, wall: (Date.now() - started) / 1000 };
}

/**
 * The same FLV published to the service: its ladder's CPU (reaped children) and its own, and
 * the issues the stream showed while live (a ladder that fell behind or stopped ran less).
 */
async function serviceLadder(
  svc: LiveService,
  flv: string,
): Promise<{ ladder: number; self: number; wall: number; issues: string[] }> {
  const s = await createStream(svc, 'cpu');
  const c0 = svc.cpu();
  const started = Date.now();
  const feeder = publishFile(flv, rtmpUrl(svc, s), SECONDS);
  const issues = new Set<string>();
  const watching = (async () => {
    while (feeder.child.exitCode === null && feeder.child.signalCode === null) {
      for (const i of (await fetchStream(svc, s)).issues) issues.add(i);
      await sleep(2000);
    }
  })();
  await feeder.exited;
  await watching;
  await waitIdle(svc, s, 60_000);
  await sleep(1000);
  const c1 = svc.cpu();
  const wall = (Date.now() - started) / 1000;
  return { ladder: c1.children - c0.children, self: c1.self - c0.self, wall, issues: [...issues] };
}

async function cpuLeg(svc: LiveService, src: RecordedSource): Promise<void> {
  const size = `${src.info.width}x${src.info.height}p30`;
  console.log(`\n## the ladder's CPU (default ladder of ${size}, ${SECONDS} s, load ${load()})`);
  const idle0 = svc.cpu();
  await sleep(5000);
  const idle = (svc.cpu().self - idle0.self) / 5;
  const b0 = await bareLadder(src);
  console.log(`bare b0: ${b0.cpu.toFixed(1)} CPU s in ${b0.wall.toFixed(1)} s`);
  const s1 = await serviceLadder(svc, src.file);
  console.log(
    `service s1: ladder ffmpeg ${s1.ladder.toFixed(1)} CPU s, service process ${s1.self.toFixed(1)} CPU s (idle: ${idle.toFixed(3)} cores) in ${s1.wall.toFixed(1)} s`,
  );
  if (s1.issues.length > 0) console.log(`service s1's issues while live: ${JSON.stringify(s1.issues)}`);
  const b1 = await bareLadder(src);
  console.log(`bare b1: ${b1.cpu.toFixed(1)} CPU s in ${b1.wall.toFixed(1)} s`);
  const bare = (b0.cpu + b1.cpu) / 2;
  const ladder = s1.ladder / bare;
  // The service process's own CPU beyond what it spends idle (the webhook dispatcher's and the
  // worker's polls) over the same time: what the ingest, the packaging and the counters cost.
  const live = Math.max(0, s1.self - idle * s1.wall);
  const whole = (s1.ladder + live) / bare;
  console.log(
    `ladder / bare ${ladder.toFixed(3)}; ladder + the service process beyond idle (${live.toFixed(1)} CPU s) / bare ${whole.toFixed(3)} (load ${load()})`,
  );
  // A publish cut short, or a ladder that dropped a rung or stopped, did less work than bare
  // ffmpeg: its ratio says nothing of the overhead (a ladder that lagged a moment and caught
  // up did the same work).
  const comparable = s1.wall >= 0.9 * SECONDS && !s1.issues.some((i) => /dropped|stopped/.test(i));
  const why = comparable ? '' : ` (not comparable: the service's ladder ran ${s1.wall.toFixed(0)} s, with issues)`;
  summary.push(
    `| the ladder's CPU against bare ffmpeg | ffmpeg alone ${ladder.toFixed(3)}; with the service process beyond idle ${whole.toFixed(3)} (${bare.toFixed(1)} CPU s bare for ${SECONDS} s)${why} | <= 1.10 |`,
  );
}

// ---------------------------------------------------------------------------------------------
// 500 viewers

async function viewersLeg(svc: LiveService): Promise<void> {
  const n = Number(opt.viewers);
  console.log(
    `\n## ${n} LL-HLS viewers doing blocking reloads (one 426x240p30 stream, the source alone, load ${load()})`,
  );
  const s = await createStream(svc, 'viewers', []);
  const pub = await publishTestSource({
    url: rtmpUrl(svc, s),
    protocol: 'rtmp',
    seconds: 2 * WINDOW + 25,
    width: 426,
    height: 240,
    fps: 30,
  });
  const stop = new AbortController();
  const agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  try {
    await waitLive(svc, s);
    await sleep(2000);
    const i0 = svc.cpu();
    await sleep(WINDOW * 1000);
    const idle = (svc.cpu().self - i0.self) / WINDOW;
    const counts: ViewerCounts = { playlists: 0, parts: 0, errors: 0 };
    const url = liveUrl(svc, s, 'source');
    const loops = Array.from({ length: n }, () => viewer(url, { agent, stop: stop.signal, counts }));
    await sleep(3000);
    const c0 = svc.cpu();
    const me0 = procCpu('self').self;
    const k0 = { ...counts };
    await sleep(WINDOW * 1000);
    const busy = (svc.cpu().self - c0.self) / WINDOW;
    const mine = (procCpu('self').self - me0) / WINDOW;
    const perSec = (k: 'playlists' | 'parts' | 'errors') => (counts[k] - k0[k]) / WINDOW;
    stop.abort();
    await Promise.all(loops);
    // Each viewer asks for a part and a playlist every part: what all of them need at full
    // rate, from the service's CPU a request (a loaded host serves fewer than that).
    const requests = perSec('playlists') + perSec('parts');
    const msPerRequest = ((busy - idle) * 1000) / requests;
    const fullRate = 1 / TIMING.partSecs;
    const needed = (msPerRequest * n * 2 * fullRate) / 1000;
    const perViewer = perSec('parts') / n;
    console.log(
      `service process: ${idle.toFixed(3)} cores with no viewer, ${busy.toFixed(3)} cores with ${n}; ` +
        `${requests.toFixed(0)} requests/s, ${perViewer.toFixed(2)} parts/s a viewer (${fullRate} at full rate), ` +
        `${perSec('errors').toFixed(1)} errors/s; ${msPerRequest.toFixed(2)} ms of service CPU a request, ` +
        `${needed.toFixed(2)} cores at full rate; the viewers' process ${mine.toFixed(2)} cores; load ${load()}`,
    );
    summary.push(
      `| ${n} loopback LL-HLS viewers, blocking reloads | service process ${busy.toFixed(2)} cores (${idle.toFixed(2)} with none) at ${perViewer.toFixed(2)} parts/s a viewer; ${msPerRequest.toFixed(2)} ms a request: ${needed.toFixed(1)} cores at ${fullRate} parts/s a viewer | < 1 core |`,
    );
  } finally {
    stop.abort();
    agent.destroy();
    await pub.stop();
  }
}

// ---------------------------------------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), 'bench-live-'));
// Admission's CPU capacity out of the way: the capacity leg measures what the host holds.
const svc = await startLiveService({ MEDIAPLANE_LIVE_CPU_CAPACITY: '64' });
let browser: Browser | string | undefined;
try {
  console.log(`mediaplane ${svc.url}, RTMP ${svc.rtmpPort}; legs: ${[...LEGS].join(', ')}; load ${load()}`);
  if (LEGS.has('latency')) {
    browser = await openChromium();
    if (typeof browser === 'string') console.log(`latency: skipped: ${browser}`);
    else await latencyLeg(svc, browser);
  }
  if (LEGS.has('first-part')) await firstPartLeg(svc);
  const [width, height] = opt['cpu-size'].split('x').map(Number);
  const cpuSource = { seconds: SECONDS, width: width ?? 1280, height: height ?? 720 };
  const cpuFlv = LEGS.has('cpu') || LEGS.has('recording') ? await recordSource(dir, cpuSource) : undefined;
  if (cpuFlv && LEGS.has('cpu')) await cpuLeg(svc, cpuFlv);
  if (cpuFlv && LEGS.has('recording')) await recordingLeg({ flv: cpuFlv.file, seconds: SECONDS, summary });
  if (LEGS.has('capacity'))
    await capacityLeg(svc, await recordSource(dir, { seconds: 30, width: 1280, height: 720 }), {
      maxStreams: Number(opt['max-streams']),
      window: WINDOW,
      summary,
    });
  if (LEGS.has('viewers')) await viewersLeg(svc);
  for (const line of svc.errors().slice(-5)) console.log(`service error: ${line.slice(0, 1500)}`);
} finally {
  if (browser && typeof browser !== 'string') await browser.close();
  await svc.stop();
  rmSync(dir, { recursive: true, force: true });
}
console.log(`\n| figure | measured (load ${load()}) | target |\n| --- | --- | --- |\n${summary.join('\n')}`);
