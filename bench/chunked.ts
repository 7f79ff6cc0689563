// Chunked encoding benchmark (issue #30), not part of `npm test`:  node bench/chunked.ts
//
// One long input (BENCH_SECONDS, default 180; BENCH_SIZE, default 960x540; the default ladder,
// HLS + MP4) through a `mediaplane api` process and `mediaplane worker` processes on one
// PostgreSQL, each worker pinned to one core with `taskset`, in three legs:
//   (one) no chunking (MEDIAPLANE_CHUNK_THRESHOLD_SECS=0), one worker on core 0: today's path
//   (c1)  chunked (the default threshold and chunk length), one worker on core 0
//   (c2)  chunked, two workers, on cores 0 and 1
// A round runs the legs in this order, the next round in the reverse order (BENCH_ROUNDS,
// default 1). Prints per leg the wall time (POST to completed), the workers' CPU seconds (Node
// and ffmpeg), when the first HLS segment, the first media playlist and the master playlist
// appeared in the bucket, and for a chunked leg the split, audio, chunk and stitch times seen
// through GET /api/task/{id} (polled every 250 ms); then one/c2 (target >= 1.8), c1/one
// (target <= 1.05) and what 8 and 32 workers would give, from the measured times.
//
// The input is served with Range support (as a CDN serves it): each chunk reads its range.
// Options: BENCH_SECONDS, BENCH_SIZE, BENCH_ROUNDS, BENCH_LEGS (e.g. "one,c2"), BENCH_CHUNK_SECS,
// BENCH_CHUNK_THRESHOLD_SECS (passed to the chunked legs' workers when set).
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startHttp } from '../test/helpers/http-input.ts';
import { stopTestPostgres, testPostgres } from '../test/helpers/postgres.ts';
import { startS3, type TestS3 } from '../test/helpers/s3.ts';
import { makeLongClip, serveRanges } from '../test/helpers/seams.ts';
import { freePort } from './child.ts';
import { median } from './stats.ts';

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../bin/mediaplane.js', import.meta.url));
const SECONDS = Number(process.env.BENCH_SECONDS ?? 180);
const [WIDTH, HEIGHT] = (process.env.BENCH_SIZE ?? '960x540').split('x').map(Number);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const POLL_MS = 250;

interface Leg {
  name: 'one' | 'c1' | 'c2';
  what: string;
  cores: number[];
  chunked: boolean;
}
const LEGS: Leg[] = [
  { name: 'one', what: 'no chunking, one worker on one core', cores: [0], chunked: false },
  { name: 'c1', what: 'chunked, one worker on one core', cores: [0], chunked: true },
  { name: 'c2', what: 'chunked, two workers, each on its own core', cores: [0, 1], chunked: true },
];

interface PieceItem {
  label: string;
  phase: string;
  runs: number;
  worker?: string;
}
/** When the bench first saw a piece running and completed (seconds from the POST). */
interface PieceTimes {
  label: string;
  ran?: number;
  done?: number;
}
interface LegResult {
  leg: Leg['name'];
  wall: number;
  cpu: number;
  ffmpegCpu: number;
  firstSegment?: number;
  firstPlaylist?: number;
  master?: number;
  pieces: PieceTimes[];
  workers: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** CPU seconds of a process itself and of its waited-for children (ffmpeg), from /proc. */
async function cpuTimes(pid: number): Promise<{ self: number; children: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  return { self: ((f[11] ?? 0) + (f[12] ?? 0)) / 100, children: ((f[13] ?? 0) + (f[14] ?? 0)) / 100 };
}

/** A mediaplane role in a child process (`taskset -c CORE` when pinned); resolves once `ready` matches a line (at once without). */
async function startRole(
  args: string[],
  env: NodeJS.ProcessEnv,
  o: { core?: number; ready?: (line: string) => boolean },
): Promise<{ child: ChildProcess; stop(): Promise<void> }> {
  const [cmd, argv] =
    o.core === undefined
      ? [process.execPath, [BIN, ...args]]
      : ['taskset', ['-c', String(o.core), process.execPath, BIN, ...args]];
  const child = spawn(cmd, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  await new Promise<void>((resolve, reject) => {
    const onData = (b: Buffer): void => {
      tail = (tail + b.toString()).slice(-4000);
      if (o.ready && tail.split('\n').some(o.ready)) resolve();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (b: Buffer) => {
      tail = (tail + b.toString()).slice(-4000);
    });
    child.once('exit', (code) => reject(new Error(`mediaplane ${args[0]} exited with ${code}: ${tail}`)));
    if (!o.ready) resolve();
  });
  return {
    child,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(t);
    },
  };
}

interface Setup {
  env: NodeJS.ProcessEnv;
  api: string;
  key: string;
  s3: TestS3;
  input: string;
}

/** One leg: its workers started (not timed), one task POSTed and followed to completion, the workers stopped. */
async function runLeg(setup: Setup, leg: Leg): Promise<LegResult> {
  const env: NodeJS.ProcessEnv = {
    ...setup.env,
    MEDIAPLANE_CHUNK_THRESHOLD_SECS: leg.chunked ? (process.env.BENCH_CHUNK_THRESHOLD_SECS ?? '120') : '0',
    ...(process.env.BENCH_CHUNK_SECS ? { MEDIAPLANE_CHUNK_SECS: process.env.BENCH_CHUNK_SECS } : {}),
  };
  const workers = await Promise.all(
    leg.cores.map((core) => startRole(['worker'], env, { core, ready: (l) => l.includes('"worker started"') })),
  );
  const pids = workers.map((w) => w.child.pid ?? 0);
  const before = await Promise.all(pids.map(cpuTimes));
  const bucket = await setup.s3.createBucket();
  const headers = { authorization: `Bearer ${setup.key}`, 'content-type': 'application/json' };
  try {
    const posted = performance.now();
    const at = (): number => (performance.now() - posted) / 1000;
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
    const { id } = answer;
    if (!res.ok || !id) throw new Error(`POST /api/transcode answered ${res.status}: ${JSON.stringify(answer)}`);
    const result: LegResult = { leg: leg.name, wall: 0, cpu: 0, ffmpegCpu: 0, pieces: [], workers: leg.cores.length };
    const pieces = new Map<string, PieceTimes>();
    for (;;) {
      await sleep(POLL_MS);
      const got = (await (await fetch(`${setup.api}/api/task/${id}`, { headers })).json()) as {
        status: { phase: string; errorMessage?: string };
        pieces?: { items: PieceItem[] };
      };
      const t = at();
      for (const p of got.pieces?.items ?? []) {
        const seen = pieces.get(p.label) ?? { label: p.label };
        if (p.phase === 'running' || p.phase === 'completed') seen.ran ??= t;
        if (p.phase === 'completed') seen.done ??= t;
        pieces.set(p.label, seen);
      }
      const keys = await setup.s3.keys(bucket);
      if (keys.some((k) => /^hls\/[^/]+\/\d+\.ts$/.test(k))) result.firstSegment ??= t;
      if (keys.some((k) => /^hls\/[^/]+\/index\.m3u8$/.test(k))) result.firstPlaylist ??= t;
      if (keys.includes('hls/index.m3u8')) result.master ??= t;
      if (got.status.phase === 'completed') {
        result.wall = t;
        break;
      }
      if (got.status.phase === 'failed' || got.status.phase === 'cancelled')
        throw new Error(`leg ${leg.name}: the task ${got.status.phase}: ${got.status.errorMessage ?? ''}`);
    }
    const after = await Promise.all(pids.map(cpuTimes));
    result.cpu = after.reduce(
      (s, a, i) => s + a.self + a.children - (before[i]?.self ?? 0) - (before[i]?.children ?? 0),
      0,
    );
    result.ffmpegCpu = after.reduce((s, a, i) => s + a.children - (before[i]?.children ?? 0), 0);
    result.pieces = [...pieces.values()];
    return result;
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
}

const f2 = (x: number | undefined): string => (x === undefined || Number.isNaN(x) ? 'n/a' : x.toFixed(2));

/** Split, audio, chunks and stitch of a chunked leg, from the times its pieces were seen. */
function phasesOf(r: LegResult): {
  split: number;
  audio: number;
  chunks: number;
  perChunk: number;
  stitch: number;
  n: number;
} {
  const chunks = r.pieces.filter((p) => /chunk/i.test(p.label));
  const audio = r.pieces.find((p) => /audio/i.test(p.label));
  const stitch = r.pieces.find((p) => /stitch/i.test(p.label));
  const firstRan = Math.min(...r.pieces.map((p) => p.ran ?? Infinity));
  const chunkEnd = Math.max(...chunks.map((p) => p.done ?? NaN));
  const chunkStart = Math.min(...chunks.map((p) => p.ran ?? Infinity));
  const perChunk = median(chunks.map((p) => (p.done ?? NaN) - (p.ran ?? NaN)));
  return {
    split: firstRan,
    audio: (audio?.done ?? NaN) - (audio?.ran ?? NaN),
    chunks: chunkEnd - chunkStart,
    perChunk,
    stitch: r.wall - (stitch?.ran ?? NaN),
    n: chunks.length,
  };
}

function report(results: LegResult[]): void {
  const by = (leg: Leg['name']) => results.filter((r) => r.leg === leg);
  for (const r of results) {
    const p = r.pieces.length > 0 ? phasesOf(r) : undefined;
    console.log(
      `(${r.leg}) ${LEGS.find((l) => l.name === r.leg)?.what}: ${f2(r.wall)} s; workers' CPU ${f2(r.cpu)} s (ffmpeg ${f2(r.ffmpegCpu)}); first segment +${f2(r.firstSegment)} s, first media playlist +${f2(r.firstPlaylist)} s, master +${f2(r.master)} s`,
    );
    if (p)
      console.log(
        `    ${p.n} chunks; split ${f2(p.split)} s (POST to the first piece running), audio ${f2(p.audio)} s, chunks ${f2(p.chunks)} s (one chunk ${f2(p.perChunk)} s, median), stitch ${f2(p.stitch)} s`,
      );
  }
  const m = (leg: Leg['name'], k: 'wall' | 'cpu') => median(by(leg).map((r) => r[k]));
  console.log(
    `one/c2 = ${f2(m('one', 'wall') / m('c2', 'wall'))} (two workers on two cores against one worker on one core, no chunking; target >= 1.8); c1/c2 = ${f2(m('c1', 'wall') / m('c2', 'wall'))}`,
  );
  console.log(
    `c1/one = ${f2(m('c1', 'wall') / m('one', 'wall'))} wall, ${f2(m('c1', 'cpu') / m('one', 'cpu'))} CPU (chunking with one worker against no chunking; target <= 1.05)`,
  );
  const c2 = by('c2')[0] ?? by('c1')[0];
  if (!c2 || c2.pieces.length === 0) return;
  // A model, not a measurement: split and stitch as measured (the stitch grows with the
  // length: concat and playlists), the audio piece as measured and scaled with the length (it
  // encodes the whole file's audio on one worker), the chunks spread over N workers, each
  // with its own core; the worker that ran the audio takes chunks after it.
  const p = phasesOf(c2);
  for (const minutes of [SECONDS / 60, 120]) {
    const scale = (minutes * 60) / SECONDS;
    const chunks = Math.ceil(p.n * scale);
    const [stitch, audio] = [p.stitch * scale, (Number.isNaN(p.audio) ? 0 : p.audio) * scale];
    const wall = (n: number): number => {
      const rounds = Math.ceil((chunks + audio / p.perChunk) / n);
      return p.split + Math.max(audio, rounds * p.perChunk) + stitch;
    };
    const line = [1, 2, 8, 32].map((n) => `${n}: ${f2(wall(n))} s`).join(', ');
    console.log(
      `model, ${minutes.toFixed(0)} min input (${chunks} chunks of ${f2(p.perChunk)} s, audio ${f2(audio)} s, split ${f2(p.split)} s, stitch ${f2(stitch)} s), workers -> wall: ${line}`,
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
    const clip = await makeLongClip({ width: WIDTH ?? 960, height: HEIGHT ?? 540, seconds: SECONDS });
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
    api = await startRole(['api'], env, {});
    const url = `http://127.0.0.1:${port}`;
    for (
      let i = 0;
      !(await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      ));
      i++
    ) {
      if (i > 600) throw new Error('mediaplane api did not answer');
      await sleep(100);
    }
    const setup: Setup = { env, api: url, key, s3, input: http.url('/in.mp4') };
    const wanted = (process.env.BENCH_LEGS ?? 'one,c1,c2').split(',');
    const legs = LEGS.filter((l) => wanted.includes(l.name));
    const results: LegResult[] = [];
    console.log(
      `input: ${WIDTH}x${HEIGHT}, ${SECONDS} s, testsrc2 + tone; default ladder, HLS + MP4; ${os.cpus().length} CPUs; load average ${os
        .loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}`,
    );
    for (let round = 0; round < ROUNDS; round++)
      for (const leg of round % 2 ? [...legs].reverse() : legs) {
        const r = await runLeg(setup, leg);
        results.push(r);
        console.log(`  ${leg.name}: ${r.wall.toFixed(2)} s, CPU ${r.cpu.toFixed(2)} s`);
      }
    report(results);
    console.log(
      `source served ${(source.served.bytes / 2 ** 20).toFixed(0)} MiB in ${source.served.requests} requests for ${results.length} tasks; load average at the end ${os
        .loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}`,
    );
  } finally {
    await api?.stop();
    await Promise.all([s3.close(), web?.close()]);
    await stopTestPostgres();
    await rm(work, { recursive: true, force: true });
  }
}

await main();
