// Per-title ladders (issue #31), not part of `npm test`:  node bench/per-title.ts
//
// For each title (generated content of four kinds, test/helpers/content.ts, and the shared
// samples that are long enough to judge), in the same run:
//   (f) the fixed ladder: runPipeline with the per-title choice off (each rung at its planned
//       bitrate, ABR under the VBV cap, as before issue #31)
//   (p) the auto ladder: runPipeline with it on (analysis, then capped CRF per rung)
//   (a) the analysis alone (chooseLadder on the same input and planned rungs), for its CPU
// then for every rung of both: the video bytes in its MP4 (audio left out: it is the same
// 128 kb/s in both) and VMAF against the source (../shared/vmaf/vmaf.sh: the rung scaled to
// the source's size, Netflix's v0.6.1 model).
//
// Targets (issue #31): total bytes of the auto ladders >= 20% below the fixed ones' across the
// set; mean VMAF within 1 point of the fixed ladder's; no title more than 2 points worse; the
// analysis' CPU <= 15% of the encode's. A rung the auto ladder drops is scored by the rung a
// player would take in its place: the highest auto rung whose bitrate is within the fixed
// rung's, else the lowest.
//
// `node bench/per-title.ts --from A.json B.json` prints the tables and totals of earlier runs'
// BENCH_JSON files together (written after each title, so a stopped run keeps what it did).
// Options: BENCH_SECONDS (generated content's length and the samples' cut, default 8),
// BENCH_SIZE (generated content, default 1280x720), BENCH_TITLES (comma-separated names or
// name prefixes: slide,talking-head,high-motion,animation,13_,14_ ...; default all),
// BENCH_SKIP_VMAF=1 (bytes and CPU only), BENCH_VMAF_SECONDS (VMAF over the first N seconds
// only, to halve the meter's time on a busy host), BENCH_JSON=FILE (every figure as JSON),
// BENCH_CPU_SECONDS / BENCH_CPU_KIND (the CPU leg: the analysis' share on a longer generated
// video, default 60 s of talking-head; 0 leaves it out).
// VMAF is the slow part (about 4 frames/s at 720p on 2 cores): the default set takes 30-50 min.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadConfig } from '../src/config/index.ts';
import { FileInput, LocalDirStore } from '../src/storage/index.ts';
import { measureDuration } from '../src/transcode/decode-check.ts';
import {
  planLadder,
  probe,
  type ProbeResult,
  type RenditionOutput,
  requireVideo,
  runPipeline,
  type TranscodeFileOutput,
} from '../src/transcode/index.ts';
import { CONTENT_KINDS, type ContentKind, makeContent } from '../test/helpers/content.ts';
import { sample } from '../test/helpers/media.ts';
import { cpuTimes } from './child.ts';
import { type LadderResult, printSummary, printTitle, type RungResult, type TitleResult } from './per-title-report.ts';

const run = promisify(execFile);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const [GEN_W = 1280, GEN_H = 720] = (process.env.BENCH_SIZE ?? '1280x720').split('x').map(Number);
const ONLY = process.env.BENCH_TITLES?.split(',').filter(Boolean);
const SKIP_VMAF = process.env.BENCH_SKIP_VMAF === '1';
/** VMAF over the first seconds only (vmaf.sh's third argument); default the whole title. */
const VMAF_SECONDS = process.env.BENCH_VMAF_SECONDS;
const VMAF = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../shared/vmaf/vmaf.sh');
const config = loadConfig({ env: {}, overrides: { allowPrivateUrls: true } });

// The samples a ladder can be judged on: every shared one with video of 1 s or more that is
// not rotated (vmaf.sh scales to the coded size while the decoder turns the picture, and the
// meter's ffmpeg 4.1 fails on sample 05's 180-degree turn), not HDR (the rungs are tone-mapped
// SDR: VMAF against HLG says nothing) and not broken.
const SAMPLES = [
  '13_butterfly_camera_h264_aac_720p30_7s.mp4',
  '14_big_buck_bunny_vp8_vorbis_720p24_30s.webm',
  '16_big_buck_bunny_h264_aac51_720p25_5s.mp4',
  '07_chrome_screen_recording_h264_annexb_vfr_no_audio.mkv',
  '10_roadtrip_vp9_profile2_10bit_no_audio.webm',
  '08_bear_vp9_odd_resolution_161x121_no_audio.webm',
];

interface Title {
  name: string;
  file: string;
}

/** CPU seconds of this process's waited-for children (the encodes). */
const childCpu = async (): Promise<number> => (await cpuTimes(process.pid)).children;

async function measured<T>(fn: () => Promise<T>): Promise<{ value: T; cpu: number; wall: number }> {
  const [cpu0, t0] = [await childCpu(), performance.now()];
  const value = await fn();
  return { value, cpu: (await childCpu()) - cpu0, wall: (performance.now() - t0) / 1000 };
}

const wanted = (name: string): boolean => !ONLY || ONLY.some((o) => name.startsWith(o));

/** The generated kinds and the samples, each cut to BENCH_SECONDS (stream copy) when longer. */
async function titles(work: string): Promise<Title[]> {
  const out: Title[] = [];
  for (const kind of CONTENT_KINDS) {
    if (!wanted(kind)) continue;
    out.push({ name: kind, file: await makeContent({ kind, width: GEN_W, height: GEN_H, seconds: SECONDS }) });
  }
  for (const s of SAMPLES) {
    if (!wanted(s) || !existsSync(sample(s))) continue;
    const cut = path.join(work, `cut-${s}`);
    await run('ffmpeg', ['-v', 'error', '-y', '-i', sample(s), '-t', String(SECONDS), '-map', '0', '-c', 'copy', cut]);
    out.push({ name: s.replace(/\.[a-z0-9]+$/, ''), file: cut });
  }
  return out;
}

/** One run of the pipeline on `file` into `dir`, the per-title choice on or off. */
async function encode(file: string, dir: string, auto: boolean): Promise<TranscodeFileOutput> {
  await mkdir(dir, { recursive: true });
  return runPipeline(config, {
    source: new FileInput(file),
    store: new LocalDirStore(path.join(dir, 'out')),
    outputs: { hls: { path: '/hls' }, mp4: { path: '/mp4' } },
    scratchDir: path.join(dir, 'scratch'),
    signal: new AbortController().signal,
    progress: () => undefined,
    thumbnails: false,
    // Issue #31's switch for one job (MEDIAPLANE_PER_TITLE is the service-wide one).
    perTitle: auto,
  });
}

/** The sum of the video packets' sizes in a file. */
async function videoBytes(file: string): Promise<number> {
  const { stdout } = await run(
    'ffprobe',
    ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'packet=size', '-of', 'csv=p=0', file],
    { maxBuffer: 64 << 20 },
  );
  return stdout
    .split('\n')
    .filter(Boolean)
    .reduce((n, l) => n + Number.parseInt(l, 10), 0);
}

async function vmaf(distorted: string, reference: string): Promise<number> {
  if (SKIP_VMAF) return NaN;
  const args = ['-n', '10', VMAF, distorted, reference, ...(VMAF_SECONDS ? [VMAF_SECONDS] : [])];
  try {
    const { stdout } = await run('nice', args, { maxBuffer: 16 << 20 });
    return Number(stdout.trim());
  } catch (err) {
    // One title the meter cannot read must not lose the run's other figures.
    console.warn(`VMAF of ${distorted} failed: ${String(err).split('\n').slice(0, 3).join(' ')}`);
    return NaN;
  }
}

/** Each MP4 rendition's bytes and VMAF; the rendition's extra output fields as `chosen`. */
async function rungs(output: TranscodeFileOutput, dir: string, t: Title, duration: number): Promise<RungResult[]> {
  const out: RungResult[] = [];
  for (const r of output.mp4 ?? []) {
    if (!('width' in r)) continue; // an audio-only entry
    const file = path.join(dir, 'out', r.path);
    const bytes = await videoBytes(file);
    out.push({
      name: r.name,
      width: r.width,
      height: r.height,
      bytes,
      kbps: (bytes * 8) / duration / 1000,
      vmaf: await vmaf(file, t.file),
      chosen: chosen(r),
    });
  }
  return out;
}

/** What the task output says of a rung's rate (issue #31: `perTitle`, else ABR at `bitrate`). */
function chosen(r: RenditionOutput): string {
  const kbps = (b: number) => `${Math.round(b / 1000)}`;
  const p = r.perTitle;
  if (!p) return `ABR ${kbps(r.bitrate)}`;
  const how = p.crf !== undefined ? `crf ${p.crf}` : 'ABR at the cap';
  const ssim = p.predictedSsim !== undefined ? `, SSIM ${p.predictedSsim.toFixed(3)}` : '';
  return `${how}, ~${kbps(p.predictedBitrate)} of ${kbps(p.cap)}${p.hitsCap ? ' (hits cap)' : ''}${ssim}`;
}

async function ladder(t: Title, dir: string, auto: boolean, duration: number): Promise<LadderResult> {
  const m = await measured(() => encode(t.file, dir, auto));
  return { rungs: await rungs(m.value, dir, t, duration), cpu: m.cpu, wall: m.wall };
}

/** The analysis alone, for its CPU: chooseLadder on the planned rungs, as the pipeline calls it. */
async function analysis(t: Title, media: ProbeResult, duration: number): Promise<number> {
  const { chooseLadder } = await import('../src/transcode/per-title/index.ts');
  const renditions = planLadder(media, { maxFps: config.maxOutputFps });
  const m = await measured(() =>
    chooseLadder({
      input: t.file,
      media,
      duration,
      renditions,
      ffmpegPath: config.ffmpegPath,
      signal: new AbortController().signal,
      preset: config.x264Preset,
      segmentSecs: config.defaultSegmentSecs,
    }),
  );
  return m.cpu;
}

async function benchTitle(t: Title, work: string): Promise<TitleResult> {
  const signal = new AbortController().signal;
  const media = requireVideo(await probe(t.file, { ffprobePath: config.ffprobePath, signal }));
  // A file without a stored duration (sample 07): as the pipeline does, decode to find it.
  const duration =
    media.duration > 0
      ? media.duration
      : await measureDuration(t.file, { ffmpegPath: config.ffmpegPath, signal, video: true });
  const fixed = await ladder(t, path.join(work, `${t.name}-fixed`), false, duration);
  const auto = await ladder(t, path.join(work, `${t.name}-auto`), true, duration);
  const analysisCpu = await analysis(t, media, duration);
  await rm(path.join(work, `${t.name}-fixed`), { recursive: true, force: true });
  await rm(path.join(work, `${t.name}-auto`), { recursive: true, force: true });
  const source = `${media.video.width}x${media.video.height} ${duration.toFixed(1)} s, ${Math.round((media.video.bitrate ?? media.bitrate ?? 0) / 1000)} kb/s`;
  return { title: t.name, source, duration, fixed, auto, analysisCpu };
}

/**
 * The analysis' CPU share on a longer video: on the 8 s titles one sampled window and the
 * probes' start-up weigh more than they do on the videos a service mostly sees.
 */
async function cpuLeg(work: string): Promise<void> {
  const seconds = Number(process.env.BENCH_CPU_SECONDS ?? 60);
  const kind = (process.env.BENCH_CPU_KIND ?? 'talking-head') as ContentKind;
  if (!(seconds > 0)) return;
  const file = await makeContent({ kind, width: GEN_W, height: GEN_H, seconds });
  const signal = new AbortController().signal;
  const media = requireVideo(await probe(file, { ffprobePath: config.ffprobePath, signal }));
  const once = async (auto: boolean) => {
    const dir = path.join(work, `cpu-${auto ? 'auto' : 'fixed'}`);
    const m = await measured(() => encode(file, dir, auto));
    await rm(dir, { recursive: true, force: true });
    return m;
  };
  const fixed = await once(false);
  const auto = await once(true);
  const analysisCpu = await analysis({ name: kind, file }, media, media.duration);
  const encodeCpu = auto.cpu - analysisCpu;
  console.log(
    `\nCPU on a ${seconds} s ${kind} (${GEN_W}x${GEN_H}): fixed ladder ${fixed.cpu.toFixed(1)} s (wall ${fixed.wall.toFixed(1)} s), auto ${auto.cpu.toFixed(1)} s (wall ${auto.wall.toFixed(1)} s), analysis alone ${analysisCpu.toFixed(2)} s: ${((100 * analysisCpu) / encodeCpu).toFixed(1)}% of the auto encode (target <= 15%)`,
  );
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'mp-bench-per-title-'));
  const results: TitleResult[] = [];
  try {
    const list = await titles(work);
    console.log(
      `per-title: ${list.length} titles (${list.map((t) => t.name).join(', ')}), ${SECONDS} s each at most; preset ${config.x264Preset}; HLS + MP4; ${os.cpus().length} CPUs${SKIP_VMAF ? '; VMAF skipped' : ''}`,
    );
    for (const t of list) {
      const r = await benchTitle(t, work);
      results.push(r);
      printTitle(r);
      if (process.env.BENCH_JSON) await writeFile(process.env.BENCH_JSON, JSON.stringify(results, null, 2));
    }
    if (results.length > 0) printSummary(results);
    await cpuLeg(work);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * `--from A.json B.json ...`: the tables and the totals again from BENCH_JSON files of earlier
 * runs (each title's two ladders were measured in one run; a slow host may need several runs
 * to cover the set).
 */
async function fromFiles(files: string[]): Promise<void> {
  const results: TitleResult[] = [];
  for (const f of files) results.push(...(JSON.parse(await readFile(f, 'utf8')) as TitleResult[]));
  for (const r of results) printTitle(r);
  printSummary(results);
}

const from = process.argv.indexOf('--from');
await (from > 0 ? fromFiles(process.argv.slice(from + 1)) : main());
