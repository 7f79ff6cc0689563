// bench/transcode.ts's ladder leg: (a) the whole task through a `mediaplane start` service's
// API, (b) the bare ffmpeg command line the pipeline runs for the same ladder, (c) one ffmpeg
// per rendition; (c) first, then b0 a1 b1 a2 b2 ..., each (a) against the (b) runs on either
// side of it. In steps: the bare commands, the rounds through the API, the printout.
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestS3 } from '../test/helpers/s3.ts';
import { median } from './stats.ts';
import { cpuTimes } from './child.ts';
import { config, parentOnly, run, timed } from './transcode-measure.ts';
import { phases, type Service, startService, transcodeThroughApi } from './transcode-service.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/** One run of (a): its wall time, where its CPU went, and what it left in the bucket. */
interface ApiRun {
  seconds: number;
  cpu: string;
  cpuSeconds: number;
  phases: string;
  objects: number;
}

type BareLadder = Awaited<ReturnType<typeof bareLadder>>;

export async function ladderBench(): Promise<void> {
  const { makeClip, startS3, startHttp, serveFile } = await parentOnly();
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
    const ladder = await bareLadder(clip, work);
    const c = process.env.BENCH_SKIP_C === '1' ? NaN : await timed(ladder.perRendition);
    const bs = [await ladder.bare('b0')];
    const svc = await startService(path.join(work, 'service'));
    service = svc;
    // A service that has run a task before, as one in production has: the first task of a
    // fresh process also pays for V8 compiling its code paths (about a CPU-second on the
    // compiler threads here, taken from ffmpeg), which is start-up, not the pipeline.
    await transcodeThroughApi(svc, await bodyFor(s3, web.url('/warm.mp4')));
    const as = await apiRounds({ svc, s3, input: web.url('/in.mp4'), ladder, bs });
    const serviceRss = await svc.peakRssMb();
    printLadder({ ladder, as, bs, c, serviceRss });
  } finally {
    await service?.stop();
    await Promise.all([s3.close(), web.close()]);
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * The ladder the pipeline plans for `clip` and the bare commands for it, writing under `work`:
 * `bare` runs (b) (all renditions from one decode) and adds its CPU seconds to `bCpu`,
 * `perRendition` runs (c).
 */
async function bareLadder(clip: string, work: string) {
  const { probe, requireVideo, planLadder, buildFfmpegArgs, planThumbnails } = await parentOnly();
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
  const perRendition = async (): Promise<void> => {
    const d = await outDir('c');
    // The thumbnails branch once, with the first rendition, as (b) has it once.
    for (const [i, r] of renditions.entries())
      await run(
        'ffmpeg',
        buildFfmpegArgs({ ...common, renditions: [r], thumbnails: i === 0 ? thumbnails : undefined }),
        { cwd: d },
      );
  };
  return { info, renditions, bCpu, bare, perRendition };
}

/** The body of (a)'s POST: HLS + MP4 of `input` into a new bucket. */
async function bodyFor(s3: TestS3, input: string) {
  return {
    input: { url: input },
    storage: {
      type: 's3',
      endpoint: s3.endpoint,
      bucket: await s3.createBucket(),
      credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: s3.credentials.secretAccessKey },
    },
    outputs: { hls: { path: 'hls' }, mp4: { path: 'mp4' } },
  };
}

/**
 * ROUNDS runs of (a), each followed by a run of (b) added to `bs`: on a shared machine whose
 * speed drifts by 10% from minute to minute, one (a) against one (b) measures the drift as
 * much as the pipeline.
 */
async function apiRounds(o: {
  svc: Service;
  s3: TestS3;
  input: string;
  ladder: BareLadder;
  bs: number[];
}): Promise<ApiRun[]> {
  const { svc, s3, bs } = o;
  const as: ApiRun[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const body = await bodyFor(s3, o.input);
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
    bs.push(await o.ladder.bare(`b${i + 1}`));
  }
  return as;
}

/** The leg's figures: each (a) against its neighbours, (b), (c), and the ratios. */
function printLadder(o: { ladder: BareLadder; as: ApiRun[]; bs: number[]; c: number; serviceRss: number }): void {
  const { as, bs, c, serviceRss } = o;
  const { info, renditions, bCpu } = o.ladder;
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
