import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import { CancelledError, InternalError, UnsupportedMediaError, type MediaplaneError } from '../lib/errors.ts';
import type { InputSource, ObjectStore } from '../storage/index.ts';
import { settledAll } from '../lib/settled.ts';
import { buildFfmpegArgs } from './command.ts';
import { checkDecodes, detail, measureDuration } from './decode-check.ts';
import { planLadder } from './ladder.ts';
import {
  formatsWritten,
  kindsOf,
  openOutputs,
  planThumbnails,
  treeFolder,
  type CommandPlan,
  type OpenOutput,
  type OutputFolders,
  type OutputRun,
  type OutputsByKind,
} from './outputs/index.ts';
import { type ProfileSpec, type Rendition, rateText } from './renditions.ts';
import { chooseLadder } from './per-title/index.ts';
import type { TranscodeFileOutput } from './types.ts';
import { hasVideo, probe, type MediaInfo } from './probe.ts';
import { ProgressParser, throttledProgress } from './progress.ts';
import { runProcess } from './run.ts';
import { CodecsProbes } from './codecs.ts';
import { SegmentWatcher, UploadQueue } from './uploads.ts';
import type { C2paSigner } from './c2pa.ts';

export type PipelineSettings = Pick<
  Config,
  | 'ffmpegPath'
  | 'ffprobePath'
  | 'x264Preset'
  | 'ffmpegThreads'
  | 'transcodeTimeoutMs'
  | 'defaultSegmentSecs'
  | 'maxOutputFps'
  | 'uploadConcurrency'
  | 'perTitle'
>;

export interface PipelineJob {
  source: InputSource;
  store: ObjectStore;
  outputs: OutputFolders;
  profiles?: readonly ProfileSpec[] | undefined;
  segmentSecs?: number | undefined;
  scratchDir: string;
  signal: AbortSignal;
  progress(fraction: number): void;
  log?: Logger | undefined;
  /** The storyboard and poster beside the HLS (or fMP4) output; on unless false (the bench compares). */
  thumbnails?: boolean | undefined;
  /** Issue #31: the per-title ladder on or off for this job; absent: the `perTitle` setting. */
  perTitle?: boolean | undefined;
  /** Issue 5 hook: sign every MP4 with C2PA before it is uploaded (`params.c2pa`). */
  c2pa?: { signer: C2paSigner; inputTitle?: string } | undefined;
  /** The input's probe when the job entry made it (job.ts): not probed again; `checked`: it passed the decode check too. */
  probed?: { media: MediaInfo; checked: boolean } | undefined;
}

// Progress shares: the download (when its size is known), the per-title analysis, the
// encode, the final uploads.
export const DOWNLOAD_SHARE = 0.1;
const ANALYSIS_END = 0.15;
const ENCODE_END = 0.95;

/**
 * The whole job: check storage, fetch, probe, plan, one ffmpeg run with segments uploaded
 * as they are written, then playlists, MP4s and the master playlist. Shared by the task
 * handler and `mediaplane transcode`.
 */
export async function runPipeline(settings: PipelineSettings, job: PipelineJob): Promise<TranscodeFileOutput> {
  // Stopped when an upload fails (no point encoding for a bucket that refuses us) and when
  // the job fails: uploads still in flight must not outlive it or read a removed scratch dir.
  const stop = new AbortController();
  const signal = AbortSignal.any([job.signal, stop.signal]);
  const queue = new UploadQueue({
    store: job.store,
    signal,
    concurrency: settings.uploadConcurrency,
    onError: (e) => stop.abort(e),
  });
  try {
    return await transcode(settings, job, queue, signal);
  } catch (err) {
    stop.abort(err);
    await queue.drain().catch(() => undefined);
    await queue.abandon();
    await job.store.discard().catch((e: unknown) => job.log?.warn({ err: e }, 'could not free the output store'));
    throw err;
  }
}

async function transcode(
  settings: PipelineSettings,
  job: PipelineJob,
  queue: UploadQueue,
  signal: AbortSignal,
): Promise<TranscodeFileOutput> {
  const report = throttledProgress(job.progress, 500);
  report(0);
  await job.store.check(job.signal);
  const input = await job.source.fetch({
    dest: path.join(job.scratchDir, 'input'),
    signal: job.signal,
    onBytes: (n, total) => total && report((DOWNLOAD_SHARE * n) / total),
  });
  job.log?.info({ input: job.source.description, size: input.size }, 'input fetched');
  const tools = { ffmpegPath: settings.ffmpegPath, signal: job.signal };
  const media = await probeInput(settings, input.path, { ...tools, probed: job.probed });
  const duration =
    media.duration > 0 ? media.duration : await measureDuration(input.path, { ...tools, video: hasVideo(media) });
  const planned = hasVideo(media)
    ? planLadder(media, { profiles: job.profiles, maxFps: settings.maxOutputFps, outputs: job.outputs })
    : [];
  const renditions = await perTitleLadder(settings, job, { input: input.path, media, duration, planned, report });
  job.log?.info(
    {
      duration,
      renditions: renditions.map((r) => `${r.name} ${r.width}x${r.height} ${rateText(r)}`),
      audioTracks: media.audioTracks.length,
      subtitles: media.subtitles.length,
    },
    'ladder planned',
  );
  const run = outputRun(settings, job, { input: input.path, media, duration, renditions, queue, signal });
  const outputs = openOutputs(run, job.outputs);
  await makeDirs(run);
  await encodeAndUpload(settings, job, run, {
    outputs,
    onFraction: (f) => report(ANALYSIS_END + (ENCODE_END - ANALYSIS_END) * f),
  });
  const output = await publishAll(outputs);
  // Issue 5: a store that gives each file its own address (dweb: CID and gateway URL) says so.
  const { baseUrl, files } = await job.store.close(job.signal);
  report(1);
  return {
    ...(baseUrl ? { baseUrl } : {}),
    ...output,
    input_video: { duration, size: input.size },
    ...(files ? { files } : {}),
  };
}

/** Issue #31: the planned rungs with the per-title choice, when it is on for this job (a split job's chunks choose their own: chunked/chunk-ladder.ts). */
export async function perTitleLadder(
  settings: PipelineSettings,
  job: PipelineJob,
  o: { input: string; media: MediaInfo; duration: number; planned: Rendition[]; report: (f: number) => void },
): Promise<Rendition[]> {
  if (!(job.perTitle ?? settings.perTitle) || o.planned.length === 0) return o.planned;
  return chooseLadder({
    input: o.input,
    media: o.media,
    duration: o.duration,
    renditions: o.planned,
    ffmpegPath: settings.ffmpegPath,
    preset: settings.x264Preset,
    segmentSecs: job.segmentSecs ?? settings.defaultSegmentSecs,
    signal: job.signal,
    progress: (f) => o.report(DOWNLOAD_SHARE + (ANALYSIS_END - DOWNLOAD_SHARE) * f),
    log: job.log,
  });
}

/** The job once its ladder is planned: the command's plan and what every output format's part sees. */
function outputRun(
  settings: PipelineSettings,
  job: PipelineJob,
  o: Pick<OutputRun, 'media' | 'duration' | 'renditions' | 'queue' | 'signal'> & { input: string },
): OutputRun {
  const plan: CommandPlan = {
    input: o.input,
    probe: o.media,
    renditions: o.renditions,
    kinds: kindsOf(job.outputs),
    segmentSecs: job.segmentSecs ?? settings.defaultSegmentSecs,
    preset: settings.x264Preset,
    threads: settings.ffmpegThreads,
    thumbnails: planThumbnails({
      underTree: treeFolder(job.outputs) !== undefined,
      media: o.media,
      duration: o.duration,
      enabled: job.thumbnails !== false,
    }),
  };
  return {
    outDir: path.join(job.scratchDir, 'out'),
    renditions: o.renditions,
    media: o.media,
    duration: o.duration,
    codecs: new CodecsProbes({ ffprobePath: settings.ffprobePath, signal: o.signal }),
    plan,
    queue: o.queue,
    store: job.store,
    signal: o.signal,
    jobSignal: job.signal,
    log: job.log,
    c2pa: job.c2pa,
  };
}

/** The input's probe, checked to decode: made here, or the job entry's (checked here when it was not). */
export async function probeInput(
  settings: Pick<PipelineSettings, 'ffprobePath'>,
  file: string,
  tools: { ffmpegPath: string; signal: AbortSignal; probed?: PipelineJob['probed'] },
): Promise<MediaInfo> {
  const { probed, ...rest } = tools;
  if (!probed) return probeAndCheck(settings, file, rest);
  if (!probed.checked) await checkDecodes(file, { ...rest, video: hasVideo(probed.media) });
  return probed.media;
}

/**
 * ffprobe and the decode check side by side (two short processes, ~0.1 s each, that would
 * otherwise run one after the other before the encode). The probe's verdict comes first: a
 * file that is not a video at all says so, not merely that it does not decode.
 */
async function probeAndCheck(
  settings: Pick<PipelineSettings, 'ffprobePath'>,
  file: string,
  tools: { ffmpegPath: string; signal: AbortSignal },
): Promise<MediaInfo> {
  // Which stream the decode check reads is not known before the probe: it tries the video,
  // and an input without one is checked again on its audio.
  const checked = checkDecodes(file, { ...tools, video: true }).then(
    () => undefined,
    (err: unknown) => err,
  );
  const info = await probe(file, { ffprobePath: settings.ffprobePath, signal: tools.signal }).catch(
    async (err: unknown) => {
      await checked;
      throw err;
    },
  );
  const failed = await checked;
  if (failed && hasVideo(info)) throw failed;
  if (!hasVideo(info)) await checkDecodes(file, { ...tools, video: false });
  return info;
}

/** The folders ffmpeg writes into, for every format the job writes. */
async function makeDirs(run: OutputRun): Promise<void> {
  const dirs = formatsWritten(run.plan).flatMap((f) => f.dirs(run.plan));
  for (const d of new Set(dirs)) await mkdir(path.join(run.outDir, d), { recursive: true });
}

/** Runs ffmpeg while a watcher uploads finished segments; a failed upload stops ffmpeg. */
async function encodeAndUpload(
  settings: PipelineSettings,
  job: PipelineJob,
  run: OutputRun,
  { outputs, onFraction }: { outputs: readonly OpenOutput[]; onFraction: (f: number) => void },
): Promise<void> {
  const { queue } = run;
  const watcher = new SegmentWatcher(
    queue,
    outputs.flatMap((o) => o.part.watched ?? []),
    (dir, sample) => void run.codecs.of(dir, sample),
  );
  const encoded = (s: number) => run.duration > 0 && onFraction(Math.min(1, s / run.duration));
  const timer = setInterval(() => {
    void watcher.scan().then(() => encoded(watcher.encodedSecs));
    for (const o of outputs) o.part.poll?.((err) => queue.fail(err));
  }, 1000);
  const parser = new ProgressParser(encoded);
  const args = buildFfmpegArgs(run.plan);
  job.log?.debug({ args }, 'ffmpeg');
  try {
    const res = await runProcess(settings.ffmpegPath, args, {
      signal: run.signal,
      cwd: run.outDir,
      timeoutMs: settings.transcodeTimeoutMs,
      onStdout: (c) => parser.push(c),
    });
    if (res.code !== 0) throw ffmpegFailure(res.stderrTail);
    job.log?.info('encoded');
    // The last segments join the queue; publishAll() adds the MP4s and playlists beside them
    // rather than behind them, and drains before each master playlist.
    await watcher.scan();
  } catch (err) {
    throw whyStopped(err, job.signal, queue);
  } finally {
    clearInterval(timer);
  }
}

/** The real reason when ffmpeg was killed: the job's cancel, or the upload that failed. */
function whyStopped(err: unknown, jobSignal: AbortSignal, queue: UploadQueue): unknown {
  if (jobSignal.aborted)
    return err instanceof CancelledError ? err : new CancelledError('cancelled', { cause: jobSignal.reason });
  return queue.error ?? err;
}

function ffmpegFailure(stderr: string): MediaplaneError {
  if (/Invalid data found|Error while decoding|Decoder .* not found|could not find codec|unsupported/i.test(stderr)) {
    return new UnsupportedMediaError(`the video could not be decoded${detail(stderr)}`);
  }
  return new InternalError(`transcoding failed${detail(stderr)}`);
}

/**
 * After the encode: every format publishes side by side (the queue bounds how many uploads
 * at once): the MP4s, and each HLS tree's media playlists, then its master playlist last,
 * once everything it names is in the bucket.
 */
async function publishAll(outputs: readonly OpenOutput[]): Promise<OutputsByKind> {
  const results = await settledAll(outputs.map((o) => o.part.publish()));
  // Each result under its format's key: what OutputsByKind says of the list, entry by entry.
  return Object.fromEntries(outputs.map((o, i) => [o.key, results[i]])) as OutputsByKind;
}
