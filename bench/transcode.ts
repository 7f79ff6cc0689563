// Transcoding benchmark (issue 3), not part of `npm test`:  node bench/transcode.ts
//
//   (a) the whole task through the API: a `mediaplane start` service in its own process,
//       POST /api/transcode (HTTP input served here, the local S3 server, s3rver, as storage), then
//       GET /api/task/{id}/events (SSE) until completed: download, probe, encode, upload
//   (b) the bare ffmpeg command line the pipeline runs (same ladder, the same storyboard and
//       poster branch, outputs on local disk)
//   (c) one ffmpeg process per rendition, one after the other (the naive pipeline)
// (c) runs first; then (b) and (a) alternate, b0 a1 b1 a2 b2 ..., and each (a) is set against
// the mean of the (b) runs on either side of it. The service runs one small warm-up task before
// the first (a). Prints a/b per round and their median (target <= 1.10) and c/b, then moves
// a 2 GB input through the download and a 2 GB file through the upload in child processes
// and reports their peak RSS (target under 250 MB: media is streamed, never buffered whole).
//
// Options: BENCH_SECONDS (default 30), BENCH_SIZE (default 1920x1080), BENCH_GB (default 2),
// BENCH_ROUNDS (runs of (a), default 3: the median of three rounds is not moved by one slow minute), BENCH_SKIP_LADDER=1 / BENCH_SKIP_RSS=1 to run one half, BENCH_SKIP_C=1 to leave out (c),
// BENCH_SERVICE_NODE_OPTIONS for the service process (e.g. --cpu-prof --cpu-prof-dir=DIR),
// BENCH_POLL_MS: poll GET /api/task/{id} this often instead of following its event stream,
// BENCH_PER_TITLE=1: leave the per-title ladder (issue #31) on in (a); off by default, since
// (b) runs the fixed ladder's command and (a) must do the same work.
//
// The AV1 leg (issue #19): one AV1 rendition at 720p30 (SVT-AV1 at the preset the x264 one
// maps to), (p) through the pipeline (runPipeline: probe, the one ffmpeg run writing fMP4 and
// MP4, CODECS, playlists, a local store) against (s) bare ffmpeg with the same libsvtav1
// arguments writing one MP4, alternating s0 p1 s1 p2 s2; prints each one's real-time factor
// (seconds per second of media) and p/s. BENCH_AV1_SECONDS (default 20), BENCH_AV1_ROUNDS
// (default 2), BENCH_SKIP_AV1=1 to leave it out.
//
// The thumbnails leg (issue #19): the default ladder of a 1080p30 clip with HLS + MP4 outputs
// through the pipeline (runPipeline, local store) with the storyboard and poster branch (t)
// and without it (w), alternating w0 t1 w1 t2 w2 ...; prints t/w per round against the mean
// of its neighbours and their median (target <= 1.05). BENCH_THUMBS_SECONDS (default 20),
// BENCH_THUMBS_ROUNDS (default 3), BENCH_SKIP_THUMBS=1 to leave it out.
import { execFile, spawn, type ChildProcess } from 'node:child_process';

import { mkdir, mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadConfig } from '../src/config/index.ts';
import { HttpInput, S3ObjectStore } from '../src/storage/index.ts';
import type { PipelineJob } from '../src/transcode/index.ts';
import { freePort } from './child.ts';
import { median } from './stats.ts';

// The measuring child loads what a worker loads for a transfer (config, storage); the test
// servers (s3rver) and the encoder side are loaded by the parent only, so the child's peak
// RSS is not inflated by code a worker never runs.
const parentOnly = async () => ({
  ...(await import('../src/transcode/index.ts')),
  ...(await import('../src/transcode/outputs/index.ts')),
  ...(await import('../test/helpers/http-input.ts')),
  ...(await import('../test/helpers/media.ts')),
  ...(await import('../test/helpers/s3.ts')),
});

const run = promisify(execFile);
const GB = Number(process.env.BENCH_GB ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** 0 (default): (a) follows GET /api/task/{id}/events; else how often it polls GET /api/task/{id}, in ms. */
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 0);
const config = loadConfig({ env: {}, overrides: { allowPrivateUrls: true } });

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
}

async function ladderBench(): Promise<void> {
  const { makeClip, startS3, startHttp, serveFile, probe, requireVideo, planLadder, buildFfmpegArgs, planThumbnails } =
    await parentOnly();
  const [w, h] = (process.env.BENCH_SIZE ?? '1920x1080').split('x').map(Number);
  const clip = await makeClip({
    width: w ?? 1920,
    height: h ?? 1080,
    seconds: Number(process.env.BENCH_SECONDS ?? 30),
  });
  const work = await mkdtemp(path.join(os.tmpdir(), 'mp-bench-'));
  // s3rver alone: the tests' SigV4-checking proxy is test equipment, and on this machine every
  // byte it copies would be CPU taken from ffmpeg and counted against the pipeline.
  const s3 = await startS3({ verify: false });
  const warm = await makeClip({ width: 640, height: 360, seconds: 4 });
  const web = await startHttp({ '/in.mp4': serveFile(clip), '/warm.mp4': serveFile(warm) });
  let service: Service | undefined;
  try {
    const info = requireVideo(await probe(clip, { ffprobePath: 'ffprobe', signal: new AbortController().signal }));
    const renditions = planLadder(info, { maxFps: config.maxOutputFps });
    const kinds = { hls: true, mp4: true, fmp4: false };
    // (b) does the work (a) does: the service's HLS output has the storyboard and poster
    // branch (on by default), so the bare command has it too (issue #30).
    const thumbnails = planThumbnails({ underTree: true, media: info, duration: info.duration, enabled: true });
    const common = {
      input: clip,
      probe: info,
      kinds,
      segmentSecs: 6,
      preset: config.x264Preset,
      threads: config.ffmpegThreads,
      thumbnails,
    };
    const outDir = async (name: string): Promise<string> => {
      const d = path.join(work, name);
      for (const r of renditions) await mkdir(path.join(d, 'hls', r.name), { recursive: true });
      await mkdir(path.join(d, 'mp4'), { recursive: true });
      await mkdir(path.join(d, 'thumbnails'), { recursive: true });
      return d;
    };
    // Each (b)'s CPU seconds too: on a shared host whose load swings wall times by 2x, the
    // CPU spent for the same output is the steadier comparison.
    const bCpu: number[] = [];
    const bare = async (name: string): Promise<number> => {
      const cwd = await outDir(name);
      const before = (await cpuTimes(process.pid)).children;
      const seconds = await timed(() => run('ffmpeg', buildFfmpegArgs({ ...common, renditions }), { cwd }));
      bCpu.push((await cpuTimes(process.pid)).children - before);
      return seconds;
    };
    const c =
      process.env.BENCH_SKIP_C === '1'
        ? NaN
        : await timed(async () => {
            const d = await outDir('c');
            // The thumbnails branch once, with the first rendition, as (b) has it once.
            for (const [i, r] of renditions.entries())
              await run(
                'ffmpeg',
                buildFfmpegArgs({ ...common, renditions: [r], thumbnails: i === 0 ? thumbnails : undefined }),
                { cwd: d },
              );
          });
    const bs = [await bare('b0')];
    const svc = await startService(path.join(work, 'service'));
    service = svc;
    const bodyFor = async (input: string) => ({
      input: { url: input },
      storage: {
        type: 's3',
        endpoint: s3.endpoint,
        bucket: await s3.createBucket(),
        credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: s3.credentials.secretAccessKey },
      },
      outputs: { hls: { path: 'hls' }, mp4: { path: 'mp4' } },
    });
    // A service that has run a task before, as one in production has: the first task of a
    // fresh process also pays for V8 compiling its code paths (about a CPU-second on the
    // compiler threads here, taken from ffmpeg), which is start-up, not the pipeline.
    await transcodeThroughApi(svc, await bodyFor(web.url('/warm.mp4')));
    // (a) and (b) alternate, each (a) set against the (b) runs on either side of it: on a
    // shared machine whose speed drifts by 10% from minute to minute, one (a) against one (b)
    // measures the drift as much as the pipeline.
    const as: Array<{ seconds: number; cpu: string; cpuSeconds: number; phases: string; objects: number }> = [];
    for (let i = 0; i < ROUNDS; i++) {
      const body = await bodyFor(web.url('/in.mp4'));
      const [svc0, bench0, threads0] = [await cpuTimes(svc.pid), await cpuTimes(process.pid), await threadCpu(svc.pid)];
      let task = { id: '', posted: 0 };
      const seconds = await timed(async () => (task = await transcodeThroughApi(svc, body)));
      const [svc1, bench1, threads1] = [await cpuTimes(svc.pid), await cpuTimes(process.pid), await threadCpu(svc.pid)];
      const byThread = [...threads1]
        .map(([name, t]) => `${name} ${(t - (threads0.get(name) ?? 0)).toFixed(2)}`)
        .join(', ');
      const cpu = `ffmpeg ${(svc1.children - svc0.children).toFixed(1)} s, service (Node) ${(svc1.self - svc0.self).toFixed(1)} s (${byThread}), bench side (input server, s3rver, following) ${(bench1.self - bench0.self).toFixed(1)} s`;
      as.push({
        seconds,
        cpu,
        cpuSeconds: svc1.children - svc0.children + (svc1.self - svc0.self),
        phases: phases(svc.logLines, task),
        objects: (await s3.keys(body.storage.bucket)).length,
      });
      bs.push(await bare(`b${i + 1}`));
    }
    const serviceRss = await svc.peakRssMb();
    const ratios = as.map((a, i) => a.seconds / (((bs[i] ?? NaN) + (bs[i + 1] ?? NaN)) / 2));
    const b = bs.reduce((x, y) => x + y, 0) / bs.length;
    const cpuRatios = as.map((a, i) => a.cpuSeconds / (((bCpu[i] ?? NaN) + (bCpu[i + 1] ?? NaN)) / 2));
    console.log(
      `clip: ${info.video.width}x${info.video.height}, ${info.duration.toFixed(1)} s; ladder: ${renditions.map((r) => `${r.name} ${r.width}x${r.height}`).join(', ')}; outputs HLS + MP4; preset ${config.x264Preset}; ${os.cpus().length} CPUs; ${ROUNDS} rounds of (a) between runs of (b), after one warm-up task`,
    );
    as.forEach((a, i) => {
      console.log(
        `(a${i + 1}) whole task through the API (POST to completed; download, probe, encode, upload): ${a.seconds.toFixed(2)} s  [${a.objects} objects in the bucket]  a/b = ${ratios[i]?.toFixed(3)} against b${i} and b${i + 1}`,
      );
      console.log(`    ${a.phases}`);
      console.log(`    CPU: ${a.cpu}`);
    });
    console.log(
      `    service peak RSS ${serviceRss.toFixed(0)} MB; CPU of bare ffmpeg: ${bCpu.map((x, i) => `b${i} ${x.toFixed(1)}`).join(', ')} s`,
    );
    console.log(
      `(b) bare ffmpeg, one decode, all renditions:     ${b.toFixed(2)} s  [${bs.map((x, i) => `b${i} ${x.toFixed(2)}`).join(', ')}]`,
    );
    console.log(`(c) one ffmpeg per rendition:                   ${c.toFixed(2)} s`);
    console.log(
      `a/b = ${median(ratios).toFixed(3)} (median of ${ratios.map((r) => r.toFixed(3)).join(', ')}; target <= 1.10)   c/b = ${(c / b).toFixed(3)}`,
    );
    console.log(
      `CPU a/b = ${median(cpuRatios).toFixed(3)} (median of ${cpuRatios.map((r) => r.toFixed(3)).join(', ')}): (a)'s ffmpeg + service CPU against (b)'s ffmpeg CPU, the bench side left out`,
    );
  } finally {
    await service?.stop();
    await Promise.all([s3.close(), web.close()]);
    await rm(work, { recursive: true, force: true });
  }
}

async function av1Bench(): Promise<void> {
  const { makeClip, probe, requireVideo, planLadder } = await parentOnly();
  const { segmentTiming, videoCodecArgs } = await import('../src/transcode/encoders.ts');
  const seconds = Number(process.env.BENCH_AV1_SECONDS ?? 20);
  const rounds = Number(process.env.BENCH_AV1_ROUNDS ?? 2);
  const clip = await makeClip({ width: 1280, height: 720, seconds, audio: false });
  const work = await mkdtemp(path.join(os.tmpdir(), 'mp-bench-av1-'));
  try {
    const info = requireVideo(await probe(clip, { ffprobePath: 'ffprobe', signal: new AbortController().signal }));
    const profiles = [{ name: '720p0', width: 1280, height: 720, bitrate: 2_000_000, encoder: 'AV1' as const }];
    const [r] = planLadder(info, { profiles, maxFps: config.maxOutputFps });
    if (!r) throw new Error('no AV1 rendition planned');
    const segmentSecs = config.defaultSegmentSecs;
    const encoder = videoCodecArgs(r, {
      preset: config.x264Preset,
      frames: segmentTiming(segmentSecs, r).frames,
      hdrSource: false,
    });
    const bare = (i: number) =>
      timed(() =>
        run('ffmpeg', [
          '-hide_banner',
          '-nostdin',
          '-y',
          '-v',
          'error',
          '-i',
          clip,
          ...encoder,
          path.join(work, `s${i}.mp4`),
        ]),
      );
    const pipeline = (i: number) =>
      timed(() =>
        pipelineRun(clip, path.join(work, `p${i}`), {
          outputs: { fmp4: { path: '/fmp4' }, mp4: { path: '/mp4' } },
          profiles,
          segmentSecs,
        }),
      );
    const ss = [await bare(0)];
    const ps: number[] = [];
    for (let i = 1; i <= rounds; i++) {
      ps.push(await pipeline(i));
      ss.push(await bare(i));
    }
    const ratios = ps.map((p, i) => p / (((ss[i] ?? NaN) + (ss[i + 1] ?? NaN)) / 2));
    const rtf = (xs: number[]) =>
      `${(median(xs) / info.duration).toFixed(2)} (${xs.map((x) => x.toFixed(2)).join(', ')} s)`;
    console.log(
      `AV1: ${r.width}x${r.height} at ${(r.fps.num / r.fps.den).toFixed(2)} fps, ${info.duration.toFixed(1)} s, ${r.bitrate} b/s; ${encoder.join(' ')} (x264 preset ${config.x264Preset}); ${os.cpus().length} CPUs`,
    );
    console.log(`(p) pipeline, fMP4 + MP4, real-time factor (encode s / media s): ${rtf(ps)}`);
    console.log(`(s) bare ffmpeg, same libsvtav1 arguments, one MP4, real-time factor: ${rtf(ss)}`);
    console.log(`p/s = ${median(ratios).toFixed(3)} (median of ${ratios.map((x) => x.toFixed(3)).join(', ')})`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** One job through runPipeline from a local file into a local store under `dir`. */
async function pipelineRun(
  clip: string,
  dir: string,
  job: Pick<PipelineJob, 'outputs' | 'profiles' | 'segmentSecs' | 'thumbnails'>,
): Promise<void> {
  const { runPipeline } = await parentOnly();
  const { FileInput, LocalDirStore } = await import('../src/storage/index.ts');
  await mkdir(dir, { recursive: true });
  try {
    await runPipeline(config, {
      source: new FileInput(clip),
      store: new LocalDirStore(path.join(dir, 'out')),
      scratchDir: dir,
      signal: new AbortController().signal,
      progress: () => undefined,
      ...job,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The default ladder with the thumbnails branch against without it, alternating. */
async function thumbnailsBench(): Promise<void> {
  const { makeClip } = await parentOnly();
  const seconds = Number(process.env.BENCH_THUMBS_SECONDS ?? 20);
  const rounds = Number(process.env.BENCH_THUMBS_ROUNDS ?? 3);
  const clip = await makeClip({ width: 1920, height: 1080, seconds });
  const work = await mkdtemp(path.join(os.tmpdir(), 'mp-bench-thumbs-'));
  const outputs = { hls: { path: '/hls' }, mp4: { path: '/mp4' } };
  // Wall time, and the CPU seconds of the run's children (ffmpeg, ffprobe): on a shared host
  // the second is the steadier measure of what the branch costs.
  const once = async (name: string, thumbnails: boolean): Promise<{ wall: number; cpu: number }> => {
    const before = (await cpuTimes(process.pid)).children;
    const wall = await timed(() => pipelineRun(clip, path.join(work, name), { outputs, thumbnails }));
    return { wall, cpu: (await cpuTimes(process.pid)).children - before };
  };
  try {
    const ws = [await once('w0', false)];
    const ts: { wall: number; cpu: number }[] = [];
    for (let i = 1; i <= rounds; i++) {
      ts.push(await once(`t${i}`, true));
      ws.push(await once(`w${i}`, false));
    }
    const ratio = (k: 'wall' | 'cpu') => ts.map((t, i) => t[k] / (((ws[i]?.[k] ?? NaN) + (ws[i + 1]?.[k] ?? NaN)) / 2));
    const list = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(', ');
    console.log(
      `thumbnails: 1920x1080 ${seconds} s clip, default ladder, HLS + MP4, preset ${config.x264Preset}; ${os.cpus().length} CPUs`,
    );
    for (const k of ['wall', 'cpu'] as const) {
      const r = ratio(k);
      console.log(
        `${k === 'wall' ? 'wall s' : 'ffmpeg CPU s'}: without ${list(ws.map((w) => w[k]))}; with ${list(ts.map((t) => t[k]))}; with/without = ${median(r).toFixed(3)} (median of ${list(r)}; target <= 1.05)`,
      );
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** CPU seconds of a process (`self`) and of its waited-for children (`children`), from /proc. */
async function cpuTimes(pid: number): Promise<{ self: number; children: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at field 3; utime is 14.
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  const tick = 100;
  return { self: ((f[11] ?? 0) + (f[12] ?? 0)) / tick, children: ((f[13] ?? 0) + (f[14] ?? 0)) / tick };
}

/** CPU seconds of a process's threads by thread name (V8Worker: the garbage collector and compiler helpers). */
async function threadCpu(pid: number): Promise<Map<string, number>> {
  const byName = new Map<string, number>();
  for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [])) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const f = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    byName.set(name, (byName.get(name) ?? 0) + ((f[11] ?? 0) + (f[12] ?? 0)) / 100);
  }
  return byName;
}

/** Seconds from the POST to each step the worker logs for one task: where the time of (a) went. */
function phases(lines: string[], task: { id: string; posted: number }): string {
  const { posted } = task;
  const steps = ['task started', 'input fetched', 'ladder planned', 'encoded', 'task completed'];
  const at = new Map<string, number>();
  for (const line of lines) {
    try {
      const { msg, time, taskId } = JSON.parse(line) as { msg?: string; time?: string | number; taskId?: string };
      if (taskId === task.id && msg && time !== undefined && steps.includes(msg) && !at.has(msg))
        at.set(msg, new Date(time).getTime());
    } catch {}
  }
  return (
    steps.map((s) => `${s} +${(((at.get(s) ?? NaN) - posted) / 1000).toFixed(2)} s`).join(', ') +
    ' (from the service log)'
  );
}

const BIN = fileURLToPath(new URL('../bin/mediaplane.js', import.meta.url));

interface Service {
  pid: number;
  url: string;
  key: string;
  /** The service's log lines (pino JSON) so far, for where the time of (a) went. */
  logLines: string[];
  /** The service process's high-water RSS (VmHWM), read from /proc while it runs. */
  peakRssMb(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * `mediaplane start` in a child process, as an operator runs it: the bench's own work
 * (the input server, s3rver, polling) does not share the service's event loop.
 */
async function startService(dataDir: string): Promise<Service> {
  const env = {
    ...process.env,
    MEDIAPLANE_DATA_DIR: dataDir,
    MEDIAPLANE_PORT: String(await freePort()),
    MEDIAPLANE_HOST: '127.0.0.1',
    MEDIAPLANE_ALLOW_PRIVATE_URLS: 'true',
    MEDIAPLANE_X264_PRESET: config.x264Preset,
    MEDIAPLANE_LOG_LEVEL: 'info',
    // (b) is the fixed ladder's command: (a) encodes the same (issue #31's per-title analysis
    // and its capped-CRF rates are measured by bench/per-title.ts).
    MEDIAPLANE_PER_TITLE: process.env.BENCH_PER_TITLE === '1' ? 'true' : 'false',
    // e.g. --cpu-prof --cpu-prof-dir=/tmp/prof: where the service's own CPU goes during (a).
    ...(process.env.BENCH_SERVICE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVICE_NODE_OPTIONS } : {}),
  };
  // Keys work with or without a running server; made first, the service starts with it.
  const key = (await run(process.execPath, [BIN, 'keys', 'create', '--owner', 'bench'], { env })).stdout.trim();
  const child = spawn(process.execPath, [BIN, 'start'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const keep = (b: Buffer): void => {
    tail = (tail + b.toString()).slice(-4000);
  };
  const logLines: string[] = [];
  let partial = '';
  child.stdout?.on('data', (b: Buffer) => {
    keep(b);
    const lines = (partial + b.toString()).split('\n');
    partial = lines.pop() ?? '';
    logLines.push(...lines.filter((l) => l.includes('"taskId"')));
  });
  child.stderr?.on('data', keep);
  const url = `http://127.0.0.1:${env.MEDIAPLANE_PORT}`;
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`mediaplane start exited with ${child.exitCode}: ${tail}`);
    const ok = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`mediaplane start did not answer: ${tail}`);
    await sleep(100);
  }
  return {
    pid: child.pid ?? 0,
    url,
    key,
    logLines,
    async peakRssMb() {
      const status = await readFile(`/proc/${child.pid}/status`, 'utf8').catch(() => '');
      return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
    },
    stop: () => stopChild(child, exited),
  };
}

async function stopChild(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(t);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * POST /api/transcode, then follow the task to its end; answers the task's id and the POST's
 * time. It follows GET /api/task/{id}/events (SSE: the service pushes each change, and the end
 * arrives the moment it happens) unless BENCH_POLL_MS asks for polling GET /api/task/{id}.
 * Polling every 100 ms, as this bench did before issue #30, cost the service about 4-6 ms of
 * CPU per request on the embedded database (the key check, the task's read, the pieces view's
 * read, two log lines): a second or more of the service's CPU per task, taken from ffmpeg on
 * two cores, and counted against the pipeline. A client that polls pays that cost itself.
 */
async function transcodeThroughApi(service: Service, body: unknown): Promise<{ id: string; posted: number }> {
  const headers = { authorization: `Bearer ${service.key}`, 'content-type': 'application/json' };
  const posted = Date.now();
  const res = await fetch(`${service.url}/api/transcode`, { method: 'POST', headers, body: JSON.stringify(body) });
  const task = (await res.json()) as { id?: string; errors?: string[] };
  if (!res.ok || !task.id) throw new Error(`POST /api/transcode answered ${res.status}: ${JSON.stringify(task)}`);
  const ended = (json: unknown): boolean => {
    const got = json as { status: { phase: string; errorMessage?: string } };
    if (got.status.phase === 'failed' || got.status.phase === 'cancelled')
      throw new Error(`the task ${got.status.phase}: ${got.status.errorMessage ?? ''}`);
    return got.status.phase === 'completed';
  };
  if (POLL_MS > 0) {
    for (;;) {
      await sleep(POLL_MS);
      if (ended(await (await fetch(`${service.url}/api/task/${task.id}`, { headers })).json()))
        return { id: task.id, posted };
    }
  }
  const events = await fetch(`${service.url}/api/task/${task.id}/events`, { headers });
  if (!events.ok || !events.body) throw new Error(`GET /api/task/{id}/events answered ${events.status}`);
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of events.body) {
    buffered += decoder.decode(chunk, { stream: true });
    const frames = buffered.split('\n\n');
    buffered = frames.pop() ?? '';
    for (const frame of frames) {
      const data = frame
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n');
      if (!data || !/^event: task$/m.test(frame)) continue;
      if (ended(JSON.parse(data))) {
        await events.body.cancel().catch(() => undefined);
        return { id: task.id, posted };
      }
    }
  }
  throw new Error(`the event stream of task ${task.id} ended before the task did`);
}

/** Streams `bytes` of zeros without holding them: the download side's source. */
async function startZeroServer(bytes: number): Promise<{ url: string; close(): Promise<void> }> {
  const chunk = Buffer.alloc(1 << 20);
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-length': bytes, 'content-type': 'video/mp4' });
    let left = bytes;
    Readable.from(
      (function* () {
        while (left > 0) {
          const n = Math.min(left, chunk.length);
          left -= n;
          yield n === chunk.length ? chunk : chunk.subarray(0, n);
        }
      })(),
    ).pipe(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/big.mp4`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Child mode: one transfer, then print this process's peak RSS in MB. */
async function child(mode: string, arg: string): Promise<void> {
  const signal = new AbortController().signal;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-bench-rss-'));
  try {
    if (mode === 'download') {
      const input = new HttpInput(new URL(arg), {
        limits: { maxBytes: config.inputMaxBytes, timeoutMs: 3600_000, idleTimeoutMs: 60_000 },
        maxRedirects: 5,
        allowPrivate: true,
      });
      await input.fetch({ dest: path.join(dir, 'input'), signal });
    } else {
      const { endpoint, bucket, accessKeyId, secretAccessKey } = JSON.parse(arg) as Record<string, string>;
      const file = path.join(dir, 'big.mp4');
      await writeFile(file, '');
      await truncate(file, GB * 1024 ** 3); // sparse: reads as zeros, costs no disk
      const store = new S3ObjectStore(
        {
          endpoint: endpoint ?? '',
          bucket: bucket ?? '',
          credentials: { accessKeyId: accessKeyId ?? '', secretAccessKey: secretAccessKey ?? '' },
        },
        { maxAttempts: 3, partSizeBytes: config.uploadPartSizeBytes, allowPrivate: true },
      );
      await store.put('big.mp4', { file }, { contentType: 'video/mp4', signal });
      await store.close();
    }
    console.log(JSON.stringify({ peakRssMb: process.resourceUsage().maxRSS / 1024 }));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function inChild(mode: string, arg: string): Promise<{ seconds: number; peakRssMb: number }> {
  const t = performance.now();
  const { stdout } = await run(process.execPath, [fileURLToPath(import.meta.url), '--child', mode, arg], {
    maxBuffer: 1 << 20,
  });
  const seconds = (performance.now() - t) / 1000;
  return { seconds, ...(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as { peakRssMb: number }) };
}

async function rssBench(): Promise<void> {
  const bytes = GB * 1024 ** 3;
  const zeros = await startZeroServer(bytes);
  try {
    const d = await inChild('download', zeros.url);
    console.log(
      `download ${GB} GB over HTTP to disk: ${d.seconds.toFixed(1)} s, worker peak RSS ${d.peakRssMb.toFixed(0)} MB (target < 250)`,
    );
  } finally {
    await zeros.close();
  }
  const s3 = await (await parentOnly()).startS3();
  try {
    const bucket = await s3.createBucket();
    const u = await inChild('upload', JSON.stringify({ endpoint: s3.endpoint, bucket, ...s3.credentials }));
    const head = await s3.head(bucket, 'big.mp4');
    console.log(
      `upload ${GB} GB to S3 (multipart, ${config.uploadPartSizeBytes >> 20} MiB parts): ${u.seconds.toFixed(1)} s, worker peak RSS ${u.peakRssMb.toFixed(0)} MB (target < 250); object size ${head.size}`,
    );
  } finally {
    await s3.close();
  }
}

if (process.argv[2] === '--child') {
  await child(process.argv[3] ?? '', process.argv[4] ?? '');
} else {
  if (process.env.BENCH_SKIP_LADDER !== '1') await ladderBench();
  if (process.env.BENCH_SKIP_AV1 !== '1') await av1Bench();
  if (process.env.BENCH_SKIP_THUMBS !== '1') await thumbnailsBench();
  if (process.env.BENCH_SKIP_RSS !== '1') await rssBench();
}
