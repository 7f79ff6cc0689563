// The legs of bench/transcode.ts that run runPipeline in this process, a local file into a
// local store: the AV1 rendition against bare ffmpeg, and the thumbnails branch against none.
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { PipelineJob } from '../src/transcode/index.ts';
import { median } from './stats.ts';
import { cpuTimes } from './child.ts';
import { config, parentOnly, run, timed } from './transcode-measure.ts';

export async function av1Bench(): Promise<void> {
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
export async function thumbnailsBench(): Promise<void> {
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
