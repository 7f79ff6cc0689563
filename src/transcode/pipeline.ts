import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import { CancelledError, InternalError, UnsupportedMediaError, type MediaplaneError } from '../lib/errors.ts';
import type { InputSource, ObjectStore } from '../storage/index.ts';
import { buildFfmpegArgs, layout, type OutputKinds } from './command.ts';
import { checkDecodes, detail, measureDuration } from './decode-check.ts';
import { planLadder, type Rendition } from './ladder.ts';
import type { OutputFolders, ProfileSpec, RenditionOutput, TranscodeFileOutput } from './types.ts';
import { finalPlaylist, masterPlaylist, parseMediaPlaylist, type Variant } from './playlist.ts';
import { probe, value, type ProbeResult } from './probe.ts';
import { ProgressParser, throttledProgress } from './progress.ts';
import { runProcess } from './run.ts';
import { CodecsProbes } from './codecs.ts';
import { SegmentWatcher, storageKey, UploadQueue } from './uploads.ts';
import { StreamedMp4 } from './streamed-mp4.ts';
import { signMp4, type C2paSigner } from './c2pa.ts';

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
  /** Issue 5 hook: sign every MP4 with C2PA before it is uploaded (`params.c2pa`). */
  c2pa?: { signer: C2paSigner; inputTitle?: string } | undefined;
}

// Progress shares: the download (when its size is known), the encode, the final uploads.
const DOWNLOAD_SHARE = 0.1;
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
  const info = await probeAndCheck(settings, input.path, tools);
  const duration = info.duration > 0 ? info.duration : await measureDuration(input.path, tools);
  const renditions = planLadder(info, { profiles: job.profiles, maxFps: settings.maxOutputFps });
  job.log?.info(
    { duration, renditions: renditions.map((r) => `${r.name} ${r.width}x${r.height} ${r.bitrate}`) },
    'ladder planned',
  );

  const outDir = path.join(job.scratchDir, 'out');
  const kinds: OutputKinds = { hls: !!job.outputs.hls, mp4: !!job.outputs.mp4, fmp4: !!job.outputs.fmp4 };
  await makeDirs(outDir, renditions, kinds);
  const codecs = new CodecsProbes({ ffprobePath: settings.ffprobePath, signal });
  const encode = {
    outDir,
    kinds,
    renditions,
    info,
    duration,
    input: input.path,
    codecs,
    mp4Streams: streamedMp4s(job, { outDir, renditions, queue, signal }),
  };
  await encodeAndUpload(settings, job, encode, {
    queue,
    signal,
    onFraction: (f) => report(DOWNLOAD_SHARE + (ENCODE_END - DOWNLOAD_SHARE) * f),
  });
  const output = await finish(job, encode, queue);
  const { baseUrl } = await job.store.close(job.signal);
  report(1);
  return { ...(baseUrl ? { baseUrl } : {}), ...output, input_video: { duration, size: input.size } };
}

/**
 * ffprobe and the decode check side by side (two short processes, ~0.1 s each, that would
 * otherwise run one after the other before the encode). The probe's verdict comes first: a
 * file that is not a video at all says so, not merely that it does not decode.
 */
async function probeAndCheck(
  settings: PipelineSettings,
  file: string,
  tools: { ffmpegPath: string; signal: AbortSignal },
): Promise<ProbeResult> {
  const checked = checkDecodes(file, tools).then(
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
  if (failed) throw failed;
  return info;
}

interface Encode {
  outDir: string;
  kinds: OutputKinds;
  renditions: Rendition[];
  info: ProbeResult;
  duration: number;
  input: string;
  codecs: CodecsProbes;
  /** MP4s that go up while ffmpeg writes them, by rendition name (S3 outputs, no C2PA). */
  mp4Streams: Map<string, StreamedMp4>;
}

async function makeDirs(outDir: string, renditions: Rendition[], kinds: OutputKinds): Promise<void> {
  const dirs = renditions.flatMap((r) => [
    kinds.hls ? layout.hlsDir(r.name) : '',
    kinds.fmp4 ? layout.fmp4Dir(r.name) : '',
    kinds.mp4 ? 'mp4' : '',
  ]);
  for (const d of new Set(dirs.filter(Boolean))) await mkdir(path.join(outDir, d), { recursive: true });
}

/** Runs ffmpeg while a watcher uploads finished segments; a failed upload stops ffmpeg. */
async function encodeAndUpload(
  settings: PipelineSettings,
  job: PipelineJob,
  enc: Encode,
  { queue, signal, onFraction }: { queue: UploadQueue; signal: AbortSignal; onFraction: (f: number) => void },
): Promise<void> {
  const watcher = new SegmentWatcher(
    queue,
    watchedPlaylists(job, enc),
    (dir, sample) => void enc.codecs.of(dir, sample),
  );
  const timer = setInterval(() => {
    void watcher.scan();
    for (const s of enc.mp4Streams.values()) s.poll((err) => queue.fail(err));
  }, 1000);
  const parser = new ProgressParser((s) => enc.duration > 0 && onFraction(Math.min(1, s / enc.duration)));
  const args = buildFfmpegArgs({
    input: enc.input,
    probe: enc.info,
    renditions: enc.renditions,
    kinds: enc.kinds,
    segmentSecs: job.segmentSecs ?? settings.defaultSegmentSecs,
    preset: settings.x264Preset,
    threads: settings.ffmpegThreads,
  });
  job.log?.debug({ args }, 'ffmpeg');
  try {
    const res = await runProcess(settings.ffmpegPath, args, {
      signal,
      cwd: enc.outDir,
      timeoutMs: settings.transcodeTimeoutMs,
      onStdout: (c) => parser.push(c),
    });
    if (res.code !== 0) throw ffmpegFailure(res.stderrTail);
    job.log?.info('encoded');
    // The last segments join the queue; finish() adds the MP4s and playlists beside them
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

/** An MP4 per rendition that can go up during the encode: S3-like stores, and no C2PA (it signs the finished file). */
function streamedMp4s(
  job: PipelineJob,
  o: { outDir: string; renditions: Rendition[]; queue: UploadQueue; signal: AbortSignal },
): Map<string, StreamedMp4> {
  const parts = job.store.parts;
  const mp4 = job.outputs.mp4;
  const out = new Map<string, StreamedMp4>();
  if (!parts || !mp4 || job.c2pa) return out;
  for (const r of o.renditions) {
    const s = new StreamedMp4({
      parts,
      key: storageKey(mp4.path, `${r.name}.mp4`),
      file: path.join(o.outDir, layout.mp4File(r.name)),
      put: { contentType: 'video/mp4', signal: o.signal },
    });
    o.queue.whenAbandoned(() => s.abandon());
    out.set(r.name, s);
  }
  return out;
}

function watchedPlaylists(job: PipelineJob, enc: Encode): { local: string; keyDir: string }[] {
  return enc.renditions.flatMap((r) => [
    ...(job.outputs.hls
      ? [{ local: path.join(enc.outDir, layout.hlsPlaylist(r.name)), keyDir: storageKey(job.outputs.hls.path, r.name) }]
      : []),
    ...(job.outputs.fmp4
      ? [
          {
            local: path.join(enc.outDir, layout.fmp4Playlist(r.name)),
            keyDir: storageKey(job.outputs.fmp4.path, r.name),
          },
        ]
      : []),
  ]);
}

/**
 * After the encode: the MP4s and each HLS tree's media playlists go up side by side (the
 * queue bounds how many at once), then each master playlist last, once everything it names
 * is in the bucket.
 */
async function finish(
  job: PipelineJob,
  enc: Encode,
  queue: UploadQueue,
): Promise<Omit<TranscodeFileOutput, 'input_video'>> {
  const { mp4, hls, fmp4 } = job.outputs;
  const [mp4Out, hlsOut, fmp4Out] = await settledAll([
    mp4 ? uploadMp4s(job, enc, queue, mp4.path) : undefined,
    hls ? publishHls(enc, queue, { prefix: hls.path, dir: 'hls' }) : undefined,
    fmp4 ? publishHls(enc, queue, { prefix: fmp4.path, dir: 'fmp4' }) : undefined,
  ] as const);
  return {
    ...(mp4Out ? { mp4: mp4Out } : {}),
    ...(hlsOut ? { hls: hlsOut } : {}),
    ...(fmp4Out ? { fmp4: fmp4Out } : {}),
  };
}

/**
 * Promise.all that waits for every branch before it throws the first failure: a branch
 * still running must not touch the scratch directory after the job has cleaned it up.
 */
async function settledAll<T extends readonly unknown[]>(
  items: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.allSettled(items);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}

async function uploadMp4s(
  job: PipelineJob,
  enc: Encode,
  queue: UploadQueue,
  prefix: string,
): Promise<RenditionOutput[]> {
  // Issue 5 hook: C2PA-sign each MP4 in place before upload; a signing failure fails the task.
  if (job.c2pa) {
    for (const r of enc.renditions) {
      const file = path.join(enc.outDir, layout.mp4File(r.name));
      const parent = { path: enc.input, ...(job.c2pa.inputTitle ? { title: job.c2pa.inputTitle } : {}) };
      await signMp4({ input: file, output: file, title: r.name, parent, signer: job.c2pa.signer, signal: job.signal });
    }
  }
  const key = (r: Rendition): string => storageKey(prefix, `${r.name}.mp4`);
  const streamed = new Map<string, number>();
  await settledAll(
    enc.renditions.map(async (r) => {
      const stream = enc.mp4Streams.get(r.name);
      const size = await stream?.finish();
      if (size === undefined) return queue.add(key(r), path.join(enc.outDir, layout.mp4File(r.name)));
      streamed.set(key(r), size);
      job.log?.debug({ rendition: r.name, size, partsDuringEncode: stream?.earlyParts }, 'mp4 uploaded while encoding');
    }),
  );
  await queue.drain();
  return enc.renditions.map((r) => ({
    ...rendition(r, `/${key(r)}`, streamed.get(key(r)) ?? queue.sizes.get(key(r)) ?? 0),
    ...(job.c2pa ? { signed: true } : {}),
  }));
}

function rendition(r: Rendition, key: string, size: number): RenditionOutput {
  return { name: r.name, path: key, width: r.width, height: r.height, bitrate: r.bitrate, size };
}

/** Uploads one HLS tree's playlists (with an honest target duration) and its master. */
async function publishHls(
  enc: Encode,
  queue: UploadQueue,
  where: { prefix: string; dir: 'hls' | 'fmp4' },
): Promise<{ path: string; renditions: RenditionOutput[] }> {
  const done = await settledAll(
    enc.renditions.map((r) =>
      publishRendition(enc.codecs, queue, r, { ...where, localDir: path.join(enc.outDir, where.dir, r.name) }),
    ),
  );
  await queue.drain();
  const master = path.join(enc.outDir, where.dir, 'index.m3u8');
  await writeFile(
    master,
    masterPlaylist(
      done.map((d) => d.variant),
      true,
    ),
  );
  queue.add(storageKey(where.prefix, 'index.m3u8'), master);
  await queue.drain();
  return { path: `/${storageKey(where.prefix, 'index.m3u8')}`, renditions: done.map((d) => d.output) };
}

/** One rendition's media playlist (and fMP4 init segment) queued; its variant line for the master. */
async function publishRendition(
  codecs: CodecsProbes,
  queue: UploadQueue,
  r: Rendition,
  where: { prefix: string; localDir: string },
): Promise<{ variant: Variant; output: RenditionOutput }> {
  const { localDir, prefix } = where;
  const playlistFile = path.join(localDir, 'index.m3u8');
  const text = await readFile(playlistFile, 'utf8');
  const playlist = parseMediaPlaylist(text);
  if (playlist.segments.length === 0)
    throw new UnsupportedMediaError('the video could not be decoded: no frames came out of it');
  await writeFile(
    playlistFile,
    finalPlaylist(
      text,
      playlist.segments.map((s) => s.duration),
    ),
  );
  if (playlist.map) queue.add(storageKey(prefix, `${r.name}/${playlist.map}`), path.join(localDir, playlist.map));
  queue.add(storageKey(prefix, `${r.name}/index.m3u8`), playlistFile);
  const stats = await segmentStats(localDir, playlist.segments);
  const sample = path.join(localDir, playlist.map ?? playlist.segments[0]?.uri ?? '');
  const variant: Variant = {
    uri: `${r.name}/index.m3u8`,
    bandwidth: stats.peak,
    averageBandwidth: stats.average,
    width: r.width,
    height: r.height,
    codecs: await codecs.of(localDir, sample),
    frameRate: value(r.fps),
  };
  return { variant, output: rendition(r, `/${storageKey(prefix, `${r.name}/index.m3u8`)}`, stats.bytes) };
}

async function segmentStats(
  dir: string,
  segments: { uri: string; duration: number }[],
): Promise<{ peak: number; average: number; bytes: number }> {
  let bytes = 0;
  let seconds = 0;
  let peak = 0;
  for (const s of segments) {
    const { size } = await stat(path.join(dir, s.uri));
    bytes += size;
    seconds += s.duration;
    // A last segment of a few frames says little about the peak; it still counts in the average.
    if (s.duration >= 0.5 || segments.length === 1) peak = Math.max(peak, (size * 8) / Math.max(s.duration, 0.001));
  }
  return { peak: Math.round(peak), average: Math.round((bytes * 8) / Math.max(seconds, 0.001)), bytes };
}
