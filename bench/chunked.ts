// Chunked encoding benchmark, not part of `npm test`:  node bench/chunked.ts
//
// One long input (BENCH_SECONDS, default 600; BENCH_SIZE, default 1920x1080; a stereo and a
// 5.1 track unless BENCH_TRACKS=stereo; the default ladder, HLS + MP4) through a `mediaplane
// api` process and `mediaplane worker` processes on one PostgreSQL, in these legs:
//   (one)   no chunking (MEDIAPLANE_CHUNK_THRESHOLD_SECS=0), one worker pinned to core 0
//   (c1)    chunked (the default threshold and chunk lengths), one worker pinned to core 0
//   (c2)    chunked, two workers pinned to cores 0 and 1 (`taskset -c`)
//   (free1) no chunking, one worker, one slot, not pinned (ffmpeg's threads on every core)
//   (free2) chunked, one worker with two slots (MEDIAPLANE_WORKER_CONCURRENCY=2), not pinned
// A round runs the legs in this order, the next round in the reverse order (BENCH_ROUNDS,
// default 1). Prints per leg the wall time (POST to completed), the workers' CPU seconds (Node
// and ffmpeg), when the task was first playable (`playableAt` on GET /api/task/{id}; where the
// service does not say, when the master and every media playlist it names with a segment
// were in the bucket), and for a chunked leg the split, audio pieces, chunks and stitch as seen
// through GET /api/task/{id} (polled every 250 ms); then one/c2 (pinned, target >= 1.8),
// free1/free2 (not pinned), c1/one (target <= 1.05) and the model (chunked-model.ts) of a 60-
// and a 120-minute film on 8, 32 and 128 two-core workers from the pinned legs' piece times.
//
// The input is served with Range support (as a CDN serves it): each piece reads its range.
// It is made once and kept in BENCH_MEDIA_DIR (default <tmp>/mediaplane-bench-media).
// Options: BENCH_SECONDS, BENCH_SIZE, BENCH_TRACKS, BENCH_ROUNDS, BENCH_LEGS (e.g. "one,c2"),
// BENCH_CHUNK_SECS, BENCH_AUDIO_CHUNK_SECS, BENCH_CHUNK_THRESHOLD_SECS (passed to the chunked
// legs' workers when set).
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { MEDIA_CACHE_ENV } from '../test/helpers/media-cache.ts';
import { startHttp } from '../test/helpers/http-input.ts';
import { stopTestPostgres, testPostgres } from '../test/helpers/postgres.ts';
import { startS3, type TestS3 } from '../test/helpers/s3.ts';
import { makeLongClip, serveRanges } from '../test/helpers/seams.ts';
import { cpuTimes, freePort } from './child.ts';
import { PieceCpu } from './chunked-cpu.ts';
import { BIN, sleep, startApi, startRole } from './chunked-roles.ts';
import { kindOf, type Measured, measure, model, type SeenPiece } from './chunked-model.ts';
import { median } from './stats.ts';

const run = promisify(execFile);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 600);
const [WIDTH, HEIGHT] = (process.env.BENCH_SIZE ?? '1920x1080').split('x').map(Number);
const SURROUND = (process.env.BENCH_TRACKS ?? 'stereo,5.1') !== 'stereo';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const POLL_MS = 250;
// The generated input outlives the run: a 10-minute 1080p input takes minutes to make.
process.env[MEDIA_CACHE_ENV] ??= process.env.BENCH_MEDIA_DIR ?? path.join(os.tmpdir(), 'mediaplane-bench-media');

type LegName = 'one' | 'c1' | 'c2' | 'free1' | 'free2';
interface Leg {
  name: LegName;
  what: string;
  /** One entry per worker process: the core it is pinned to, or undefined (not pinned). */
  cores: (number | undefined)[];
  chunked: boolean;
  /** Slots per worker (MEDIAPLANE_WORKER_CONCURRENCY). */
  slots: number;
}
const LEGS: Leg[] = [
  { name: 'one', what: 'no chunking, one worker on core 0', cores: [0], chunked: false, slots: 1 },
  { name: 'c1', what: 'chunked, one worker on core 0', cores: [0], chunked: true, slots: 1 },
  { name: 'c2', what: 'chunked, two workers on cores 0 and 1', cores: [0, 1], chunked: true, slots: 1 },
  {
    name: 'free1',
    what: 'no chunking, one worker, one slot, not pinned',
    cores: [undefined],
    chunked: false,
    slots: 1,
  },
  { name: 'free2', what: 'chunked, one worker, two slots, not pinned', cores: [undefined], chunked: true, slots: 2 },
];

interface PieceItem {
  label: string;
  phase: string;
  runs: number;
  worker?: string;
}
interface LegResult {
  leg: LegName;
  wall: number;
  cpu: number;
  ffmpegCpu: number;
  /** Seconds from the POST to the first playable playlists, and how the bench knew. */
  playable?: number;
  playableFrom?: 'playableAt' | 'bucket';
  pieces: SeenPiece[];
  /** CPU seconds of each piece (chunked-cpu.ts), and of the workers outside any piece. */
  pieceCpu: Map<string, number>;
  cpuOutside: number;
}

const load = (): string =>
  os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ');

interface Setup {
  env: NodeJS.ProcessEnv;
  api: string;
  key: string;
  s3: TestS3;
  input: string;
}

/** The worker settings of a leg: chunking on or off, the chunk lengths asked for, its slots. */
function legEnv(setup: Setup, leg: Leg): NodeJS.ProcessEnv {
  const given = (name: string, env: string) => (process.env[name] ? { [env]: process.env[name] } : {});
  return {
    ...setup.env,
    MEDIAPLANE_CHUNK_THRESHOLD_SECS: leg.chunked ? (process.env.BENCH_CHUNK_THRESHOLD_SECS ?? '120') : '0',
    MEDIAPLANE_WORKER_CONCURRENCY: String(leg.slots),
    ...given('BENCH_CHUNK_SECS', 'MEDIAPLANE_CHUNK_SECS'),
    ...given('BENCH_AUDIO_CHUNK_SECS', 'MEDIAPLANE_AUDIO_CHUNK_SECS'),
  };
}

/** POSTs the leg's task (HLS + MP4 into a new bucket); its id. */
async function postTask(setup: Setup, bucket: string, headers: Record<string, string>): Promise<string> {
  const res = await fetch(`${setup.api}/api/transcode`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      input: { url: setup.input },
      storage: {
        type: 's3',
        endpoint: setup.s3.endpoint,
        bucket,
        credentials: {
          accessKeyId: setup.s3.credentials.accessKeyId,
          secretAccessKey: setup.s3.credentials.secretAccessKey,
        },
      },
      outputs: { hls: { path: 'hls' }, mp4: { path: 'mp4' } },
    }),
  });
  const answer = (await res.json()) as { id?: string };
  if (!res.ok || !answer.id) throw new Error(`POST /api/transcode answered ${res.status}: ${JSON.stringify(answer)}`);
  return answer.id;
}

/** Whether the bucket holds the master and, for every playlist it names, a media playlist with a segment. */
async function playableInBucket(s3: TestS3, bucket: string): Promise<boolean> {
  const keys = new Set(await s3.keys(bucket));
  if (!keys.has('hls/index.m3u8')) return false;
  const master = (await s3.get(bucket, 'hls/index.m3u8')).body.toString();
  const uris = [
    ...master.split('\n').filter((l) => l.trim() && !l.startsWith('#')),
    ...[...master.matchAll(/URI="([^"]+)"/g)].map((m) => m[1] ?? ''),
  ].map((u) => path.posix.join('hls', u.trim()));
  for (const key of uris) {
    if (!keys.has(key)) return false;
    if (!(await s3.get(bucket, key)).body.toString().includes('#EXTINF')) return false;
  }
  return uris.length > 0;
}

interface TaskView {
  status: { phase: string; errorMessage?: string };
  pieces?: { items: PieceItem[] };
  playableAt?: number | string;
}

/** Follows the task to completion: its pieces' times, when it became playable, its wall time. */
async function follow(
  setup: Setup,
  o: { id: string; bucket: string; leg: Leg; posted: number; cpu: PieceCpu },
): Promise<LegResult> {
  const headers = { authorization: `Bearer ${setup.key}` };
  const at = (): number => (performance.now() - o.posted) / 1000;
  const postedAt = Date.now() - at() * 1000;
  const result: LegResult = {
    leg: o.leg.name,
    wall: 0,
    cpu: 0,
    ffmpegCpu: 0,
    pieces: [],
    pieceCpu: o.cpu.byLabel,
    cpuOutside: 0,
  };
  const pieces = new Map<string, SeenPiece>();
  for (;;) {
    await sleep(POLL_MS);
    const got = (await (await fetch(`${setup.api}/api/task/${o.id}`, { headers })).json()) as TaskView;
    const t = at();
    o.cpu.sample(got.pieces?.items ?? []);
    for (const p of got.pieces?.items ?? []) {
      const seen = pieces.get(p.label) ?? { label: p.label };
      if (p.phase === 'running' || p.phase === 'completed') seen.ran ??= t;
      if (p.phase === 'completed') seen.done ??= t;
      if (p.worker) seen.worker = p.worker;
      pieces.set(p.label, seen);
    }
    if (got.playableAt !== undefined && result.playableFrom !== 'playableAt') {
      const ms = typeof got.playableAt === 'number' ? got.playableAt : Date.parse(got.playableAt);
      result.playable = (ms - postedAt) / 1000;
      result.playableFrom = 'playableAt';
    }
    if (result.playable === undefined && (await playableInBucket(setup.s3, o.bucket))) {
      result.playable = t;
      result.playableFrom = 'bucket';
    }
    if (got.status.phase === 'completed') {
      result.wall = t;
      break;
    }
    if (got.status.phase === 'failed' || got.status.phase === 'cancelled')
      throw new Error(`leg ${o.leg.name}: the task ${got.status.phase}: ${got.status.errorMessage ?? ''}`);
  }
  result.pieces = [...pieces.values()];
  result.cpuOutside = o.cpu.outside;
  return result;
}

/** One leg: its workers started (not timed), one task POSTed and followed to completion, the workers stopped. */
async function runLeg(setup: Setup, leg: Leg): Promise<LegResult> {
  const env = legEnv(setup, leg);
  const workers = await Promise.all(
    leg.cores.map((core) => startRole(['worker'], env, { core, ready: (l) => l.includes('"worker started"') })),
  );
  const pids = workers.map((w) => w.child.pid ?? 0);
  // A worker gone reads as no CPU, rather than stop the leg.
  const cpuOf = (pid: number) => cpuTimes(pid).catch(() => ({ self: 0, children: 0 }));
  const before = await Promise.all(pids.map(cpuOf));
  const bucket = await setup.s3.createBucket();
  const headers = { authorization: `Bearer ${setup.key}`, 'content-type': 'application/json' };
  try {
    const cpu = new PieceCpu(pids);
    const posted = performance.now();
    const id = await postTask(setup, bucket, headers);
    const result = await follow(setup, { id, bucket, leg, posted, cpu });
    const after = await Promise.all(pids.map(cpuOf));
    const spent = (k: 'self' | 'children') => after.reduce((s, a, i) => s + a[k] - (before[i]?.[k] ?? 0), 0);
    result.ffmpegCpu = spent('children');
    result.cpu = spent('self') + result.ffmpegCpu;
    return result;
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
}

const f1 = (x: number | undefined): string => (x === undefined || !Number.isFinite(x) ? 'n/a' : x.toFixed(1));
const f2 = (x: number | undefined): string => (x === undefined || !Number.isFinite(x) ? 'n/a' : x.toFixed(2));

/** A chunked leg's pieces, by kind: how many, the slot seconds each took (median, max) and per media second. */
function piecesLine(r: LegResult, m: Measured, cpu: Measured): string {
  const kind = (k: 'audio' | 'chunk'): string => {
    const ps = r.pieces.filter((p) => kindOf(p.label) === k);
    const took = ps.map((p) => (p.done ?? Number.NaN) - (p.ran ?? Number.NaN));
    const span = Math.max(...ps.map((p) => p.done ?? 0)) - Math.min(...ps.map((p) => p.ran ?? Infinity));
    const [rate, cpuRate] = k === 'audio' ? [m.audioRate, cpu.audioRate] : [m.chunkRate, cpu.chunkRate];
    const secs = k === 'audio' ? m.audioSecs : m.chunkSecs;
    return `${ps.length} ${k === 'audio' ? 'audio pieces' : 'chunks'} of ${f1(secs)} s: ${f1(median(took))} s each (max ${f1(Math.max(...took))}), ${f2(rate)} s (CPU ${f2(cpuRate)} s) per media second, all done ${f1(span)} s after the first began`;
  };
  return `    split ${f1(m.split)} s; ${kind('audio')}; ${kind('chunk')}; stitch ${f1(m.stitch)} s (CPU ${f1(cpu.stitch)} s); a slot's gap between pieces ${f2(m.gap)} s; workers' CPU outside the pieces ${f1(r.cpuOutside)} s`;
}

function report(results: LegResult[]): void {
  const by = (leg: LegName) => results.filter((r) => r.leg === leg);
  for (const r of results) {
    const chunked = r.pieces.length > 0;
    console.log(
      `(${r.leg}) ${LEGS.find((l) => l.name === r.leg)?.what}: ${f1(r.wall)} s; workers' CPU ${f1(r.cpu)} s (ffmpeg ${f1(r.ffmpegCpu)}); first playable +${f1(r.playable)} s (${r.playableFrom ?? 'never before the end'})`,
    );
    if (chunked) {
      const o = { seconds: SECONDS, wall: r.wall };
      console.log(piecesLine(r, measure(r.pieces, o), measure(r.pieces, { ...o, cpu: r.pieceCpu })));
    }
  }
  const m = (leg: LegName, k: 'wall' | 'cpu') => median(by(leg).map((r) => r[k]));
  console.log(
    `one/c2 = ${f2(m('one', 'wall') / m('c2', 'wall'))} (pinned: two workers on two cores against one worker on one core, no chunking; target >= 1.8); c1/c2 = ${f2(m('c1', 'wall') / m('c2', 'wall'))}`,
  );
  console.log(
    `free1/free2 = ${f2(m('free1', 'wall') / m('free2', 'wall'))} (not pinned: one worker with two slots, chunked, against one slot, no chunking)`,
  );
  console.log(
    `c1/one = ${f2(m('c1', 'wall') / m('one', 'wall'))} wall, ${f2(m('c1', 'cpu') / m('one', 'cpu'))} CPU (chunking with one worker against no chunking; target <= 1.05)`,
  );
  const base = by('c2')[0] ?? by('c1')[0] ?? by('free2')[0];
  if (!base || base.pieces.length === 0) return;
  const o = { seconds: SECONDS, wall: base.wall };
  printModel(measure(base.pieces, o), `(${base.leg})'s wall times`);
  // On a host whose cores other work shares, the pieces' CPU seconds are what a core of its own would take.
  printModel(measure(base.pieces, { ...o, cpu: base.pieceCpu }), `(${base.leg})'s CPU seconds per piece`);
}

/** The model of a 60- and a 120-minute film on 8, 32 and 128 two-core workers (chunked-model.ts). */
function printModel(m: Measured, from: string): void {
  console.log(
    `model from ${from}: split ${f1(m.split)} s, audio ${f2(m.audioRate)} s per media second in pieces of ${f1(m.audioSecs)} s, video ${f2(m.chunkRate)} s per media second in chunks of ${f1(m.chunkSecs)} s, stitch ${f1(m.stitch)} s for ${SECONDS} s (${f2(m.stitch / SECONDS)} s per media second), gap ${f2(m.gap)} s`,
  );
  const target = model(m, { seconds: 3600, slots: 64, stitch: 'measured' }).wall;
  console.log(
    `  target: the 60-minute film published within 90 s on 32 workers (Mux's median 93.5 s): ${f1(target)} s with the stitch as measured, ${target <= 90 ? 'met' : 'missed'}`,
  );
  for (const minutes of [60, 120])
    for (const workers of [8, 32, 128]) {
      const o = { seconds: minutes * 60, slots: workers * 2 };
      const fixed = model(m, { ...o, stitch: 'measured' });
      const scaled = model(m, { ...o, stitch: 'scaled' });
      console.log(
        `  ${minutes} min film, ${workers} workers (${o.slots} slots): ${f1(fixed.wall)}-${f1(scaled.wall)} s = split ${f1(fixed.split)} + pieces ${f1(fixed.pieces)} (balanced ${f1(fixed.balanced)}) + stitch ${f1(fixed.stitch)}-${f1(scaled.stitch)}; first playable +${f1(fixed.firstPlayable)} s; critical path: ${fixed.critical}${scaled.critical === fixed.critical ? '' : ` (the stitch scaled: ${scaled.critical})`}`,
      );
    }
}

async function main(): Promise<void> {
  const pg = await testPostgres();
  if (!pg)
    throw new Error('bench:chunked needs PostgreSQL (apt-get install postgresql, or MEDIAPLANE_TEST_DATABASE_URL)');
  const work = await mkdtemp(path.join(os.tmpdir(), 'mp-bench-chunked-'));
  const s3 = await startS3({ verify: false });
  let api: { stop(): Promise<void> } | undefined;
  let web: { close(): Promise<void> } | undefined;
  try {
    const made = performance.now();
    const clip = await makeLongClip({
      width: WIDTH ?? 1920,
      height: HEIGHT ?? 1080,
      seconds: SECONDS,
      surround: SURROUND,
    });
    console.log(`input ready in ${f1((performance.now() - made) / 1000)} s: ${clip}`);
    const source = serveRanges(clip);
    const http = await startHttp({ '/in.mp4': source.route });
    web = http;
    const port = await freePort();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: await pg.createDatabase(),
      MEDIAPLANE_DATA_DIR: path.join(work, 'data'),
      MEDIAPLANE_HOST: '127.0.0.1',
      MEDIAPLANE_PORT: String(port),
      MEDIAPLANE_ALLOW_PRIVATE_URLS: 'true',
      MEDIAPLANE_LOG_LEVEL: 'info',
    };
    const key = (await run(process.execPath, [BIN, 'keys', 'create', '--owner', 'bench'], { env })).stdout.trim();
    const url = `http://127.0.0.1:${port}`;
    api = await startApi(env, url);
    const setup: Setup = { env, api: url, key, s3, input: http.url('/in.mp4') };
    const wanted = (process.env.BENCH_LEGS ?? 'one,c1,c2,free1,free2').split(',');
    // In the order asked: the legs that matter most first, when time is short.
    const legs = wanted.flatMap((w) => LEGS.filter((l) => l.name === w));
    const results: LegResult[] = [];
    console.log(
      `input: ${WIDTH}x${HEIGHT}, ${SECONDS} s, testsrc2 + ${SURROUND ? 'a stereo and a 5.1 track' : 'a stereo track'}; default ladder, HLS + MP4; ${os.cpus().length} CPUs; load average ${load()}`,
    );
    for (let round = 0; round < ROUNDS; round++)
      for (const leg of round % 2 ? [...legs].reverse() : legs) {
        const r = await runLeg(setup, leg);
        results.push(r);
        console.log(`  ${leg.name}: ${f1(r.wall)} s, CPU ${f1(r.cpu)} s; load average ${load()}`);
      }
    report(results);
    console.log(
      `source served ${(source.served.bytes / 2 ** 20).toFixed(0)} MiB in ${source.served.requests} requests for ${results.length} tasks; load average at the end ${load()}`,
    );
  } finally {
    await api?.stop();
    await Promise.all([s3.close(), web?.close()]);
    await stopTestPostgres();
    await rm(work, { recursive: true, force: true });
  }
}

await main();
