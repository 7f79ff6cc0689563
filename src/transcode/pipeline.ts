import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import { CancelledError, InternalError, UnsupportedMediaError, type MediaplaneError } from '../lib/errors.ts';
import type { InputSource, ObjectStore } from '../storage/index.ts';
import { settledAll } from '../lib/settled.ts';
import { audioLayout, buildFfmpegArgs, layout, type OutputKinds } from './command.ts';
import { planStoryboard, type StoryboardPlan } from './storyboard.ts';
import { checkDecodes, detail, measureDuration } from './decode-check.ts';
import { planLadder, type Rendition } from './ladder.ts';
import type { AudioOutput, OutputFolders, ProfileSpec, RenditionOutput, TranscodeFileOutput } from './types.ts';
import { withTimestampMap } from './playlist.ts';
import { hasVideo, probe, type MediaInfo } from './probe.ts';
import { AUDIO_BITRATE } from './command.ts';
import {
  publishDash,
  publishHls,
  publishThumbnails,
  renditionOutput,
  type EncodedMedia,
  type HlsTree,
} from './publish.ts';
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
  /** The storyboard and poster beside the HLS (or fMP4) output; on unless false (the bench compares). */
  thumbnails?: boolean | undefined;
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
  const media = await probeAndCheck(settings, input.path, tools);
  const duration =
    media.duration > 0 ? media.duration : await measureDuration(input.path, { ...tools, video: hasVideo(media) });
  const renditions = hasVideo(media)
    ? planLadder(media, { profiles: job.profiles, maxFps: settings.maxOutputFps, tsSegments: !!job.outputs.hls })
    : [];
  job.log?.info(
    {
      duration,
      renditions: renditions.map((r) => `${r.name} ${r.width}x${r.height} ${r.bitrate}`),
      audioTracks: media.audioTracks.length,
      subtitles: media.subtitles.length,
    },
    'ladder planned',
  );

  const outDir = path.join(job.scratchDir, 'out');
  const kinds: OutputKinds = { hls: !!job.outputs.hls, mp4: !!job.outputs.mp4, fmp4: !!job.outputs.fmp4 };
  const encode: Encode = {
    outDir,
    kinds,
    renditions,
    media,
    duration,
    input: input.path,
    codecs: new CodecsProbes({ ffprobePath: settings.ffprobePath, signal }),
    mp4Streams: streamedMp4s(job, { outDir, renditions, queue, signal }),
    thumbnails: thumbnailsPlan(job, media, duration),
  };
  await makeDirs(encode);
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

interface Encode extends EncodedMedia {
  kinds: OutputKinds;
  renditions: Rendition[];
  input: string;
  /** MP4s that go up while ffmpeg writes them, by rendition name (S3 outputs, no C2PA). */
  mp4Streams: Map<string, StreamedMp4>;
  /** The storyboard and the poster, made by one more branch of the split. */
  thumbnails: StoryboardPlan | undefined;
}

/** Thumbnails go under the HLS output, or the fMP4 one; MP4-only jobs and audio have none. */
function thumbnailsPlan(job: PipelineJob, media: MediaInfo, duration: number): StoryboardPlan | undefined {
  const under = job.outputs.hls ?? job.outputs.fmp4;
  if (!under || !media.video || job.thumbnails === false) return undefined;
  return planStoryboard(duration, media.video.width, media.video.height);
}

async function makeDirs(enc: Encode): Promise<void> {
  const { kinds } = enc;
  const groups = audioLayout({ probe: enc.media, renditions: enc.renditions, kinds });
  const audioDirs = (tree: string) => enc.media.audioTracks.map((a) => `${tree}/${layout.audioDir(a.index)}`);
  const dirs = [
    ...enc.renditions.flatMap((r) => [
      kinds.hls ? layout.hlsDir(r.name) : '',
      kinds.fmp4 ? layout.fmp4Dir(r.name) : '',
    ]),
    kinds.mp4 ? 'mp4' : '',
    ...(groups.tsGroup ? audioDirs('hls') : []),
    ...(groups.fmp4Group ? audioDirs('fmp4') : []),
    enc.media.subtitles.length > 0 ? 'subtitles' : '',
    enc.thumbnails ? layout.thumbnailsDir : '',
  ];
  for (const d of new Set(dirs.filter(Boolean))) await mkdir(path.join(enc.outDir, d), { recursive: true });
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
    probe: enc.media,
    renditions: enc.renditions,
    kinds: enc.kinds,
    segmentSecs: job.segmentSecs ?? settings.defaultSegmentSecs,
    preset: settings.x264Preset,
    threads: settings.ffmpegThreads,
    thumbnails: enc.thumbnails,
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

/** Every media playlist ffmpeg writes (video renditions, audio group tracks) and where its segments go. */
function watchedPlaylists(job: PipelineJob, enc: Encode): { local: string; keyDir: string }[] {
  const groups = audioLayout({ probe: enc.media, renditions: enc.renditions, kinds: enc.kinds });
  const tree = (dir: 'hls' | 'fmp4', prefix: string, audioGroup: boolean) =>
    [
      ...enc.renditions.map((r) => r.name),
      ...(audioGroup ? enc.media.audioTracks.map((a) => layout.audioDir(a.index)) : []),
    ].map((rel) => ({ local: path.join(enc.outDir, dir, rel, 'index.m3u8'), keyDir: storageKey(prefix, rel) }));
  return [
    ...(job.outputs.hls ? tree('hls', job.outputs.hls.path, groups.tsGroup) : []),
    ...(job.outputs.fmp4 ? tree('fmp4', job.outputs.fmp4.path, groups.fmp4Group) : []),
  ];
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
  const groups = audioLayout({ probe: enc.media, renditions: enc.renditions, kinds: enc.kinds });
  await prepareSubtitles(enc);
  const thumbsUnder = (hls ?? fmp4)?.path;
  const [thumbnails, mp4Out, hlsOut, fmp4Out] = await settledAll([
    enc.thumbnails && thumbsUnder ? publishThumbnails(enc, queue, enc.thumbnails, thumbsUnder) : undefined,
    mp4 ? uploadMp4s(job, enc, queue, mp4.path) : undefined,
    hls ? publishHls(enc, queue, { prefix: hls.path, dir: 'hls', audioGroup: groups.tsGroup }) : undefined,
    fmp4 ? publishCmaf(enc, queue, { prefix: fmp4.path, dir: 'fmp4', audioGroup: groups.fmp4Group }) : undefined,
  ] as const);
  return {
    ...(mp4Out ? { mp4: mp4Out } : {}),
    ...(hlsOut ? { hls: hlsOut.output } : {}),
    ...(fmp4Out ? { fmp4: fmp4Out } : {}),
    ...(thumbnails ? { thumbnails } : {}),
  };
}

/** The fMP4 tree: its HLS master, then DASH over the same segments. */
async function publishCmaf(
  enc: Encode,
  queue: UploadQueue,
  tree: HlsTree,
): Promise<NonNullable<TranscodeFileOutput['fmp4']>> {
  const hls = await publishHls(enc, queue, tree);
  const dash = await publishDash(enc, queue, tree, hls);
  return { ...hls.output, dash };
}

/** The WebVTT files ffmpeg converted, readied for HLS players (both trees share them). */
async function prepareSubtitles(enc: Encode): Promise<void> {
  for (const s of enc.media.subtitles) {
    const file = path.join(enc.outDir, layout.subtitleFile(s.index));
    await writeFile(file, withTimestampMap(await readFile(file, 'utf8')));
  }
}

/** The MP4 outputs: one per rendition, or an audio-only input's `audio.m4a`. */
async function uploadMp4s(
  job: PipelineJob,
  enc: Encode,
  queue: UploadQueue,
  prefix: string,
): Promise<(RenditionOutput | AudioOutput)[]> {
  const files = enc.renditions.length > 0 ? enc.renditions.map((r) => layout.mp4File(r.name)) : [layout.audioMp4];
  // Issue 5 hook: C2PA-sign each MP4 in place before upload; a signing failure fails the task.
  if (job.c2pa) {
    for (const [i, rel] of files.entries()) {
      const file = path.join(enc.outDir, rel);
      const parent = { path: enc.input, ...(job.c2pa.inputTitle ? { title: job.c2pa.inputTitle } : {}) };
      const title = enc.renditions[i]?.name ?? 'audio';
      await signMp4({ input: file, output: file, title, parent, signer: job.c2pa.signer, signal: job.signal });
    }
  }
  const key = (rel: string): string => storageKey(prefix, path.basename(rel));
  const streamed = new Map<string, number>();
  await settledAll(
    files.map(async (rel, i) => {
      const stream = enc.mp4Streams.get(enc.renditions[i]?.name ?? '');
      const size = await stream?.finish();
      if (size === undefined) return queue.add(key(rel), path.join(enc.outDir, rel));
      streamed.set(key(rel), size);
      job.log?.debug(
        { rendition: enc.renditions[i]?.name, size, partsDuringEncode: stream?.earlyParts },
        'mp4 uploaded while encoding',
      );
    }),
  );
  await queue.drain();
  const size = (rel: string): number => streamed.get(key(rel)) ?? queue.sizes.get(key(rel)) ?? 0;
  const signed = job.c2pa ? { signed: true } : {};
  if (enc.renditions.length === 0)
    return [
      {
        name: 'audio',
        path: `/${key(layout.audioMp4)}`,
        bitrate: AUDIO_BITRATE,
        size: size(layout.audioMp4),
        ...signed,
      },
    ];
  return enc.renditions.map((r) => ({
    ...renditionOutput(r, `/${key(layout.mp4File(r.name))}`, size(layout.mp4File(r.name))),
    ...signed,
  }));
}
