import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InternalError } from '../../lib/errors.ts';
import type { BuiltinStore } from '../../storage/builtin/index.ts';
import { createInputSource } from '../../storage/index.ts';
import type { JobContext } from '../../tasks/index.ts';
import { signMp4 } from '../c2pa.ts';
import { buildTimeline, dashManifest, type SegmentTimeline } from '../dash.ts';
import { detail } from '../decode-check.ts';
import { trackLabels } from '../encoders.ts';
import { inputArgs } from '../media-input.ts';
import { dashInput } from '../outputs/fmp4.ts';
import type { Mp4Output } from '../outputs/index.ts';
import { publishThumbnails, THUMBNAILS_DIR, type ThumbnailsOutput } from '../outputs/thumbnails.ts';
import { planThumbnails } from '../outputs/thumbnails.ts';
import { renditionOutput } from '../renditions.ts';
import { FFMPEG_QUIET, runProcess } from '../run.ts';
import { POSTER_FILE, thumbnailBranches } from '../storyboard.ts';
import { usePoster } from './poster.ts';
import { storageKey, type UploadQueue } from '../uploads.ts';
import type { PublishedTree } from './publish.ts';
import { partOf } from './publish.ts';
import type { ChunkedDeps, MediaPart, PieceManifest, StitchJob } from './types.ts';

// Issue #30: what the stitch makes from the pieces without encoding video again: the DASH
// manifest (timelines from the chunks' fMP4 spans), one faststart MP4 per rendition (the
// chunks' parts and the audio joined by ffmpeg's concat demuxer, `-c copy`, then signed),
// and the storyboard and poster over the whole duration (from the lowest rendition's parts).

export interface StitchInput {
  deps: ChunkedDeps;
  ctx: JobContext;
  job: StitchJob;
  store: BuiltinStore;
  queue: UploadQueue;
  localRoot: string;
  audio: PieceManifest | undefined;
  chunks: readonly PieceManifest[];
}

function timeline(parts: readonly MediaPart[]): SegmentTimeline {
  const timescale = parts[0]?.timescale;
  if (!timescale) throw new InternalError('chunked: an fMP4 part without its timescale');
  const spans = parts.flatMap((p) => (p.spans ?? []).map(([start, duration]) => ({ start, duration })));
  return buildTimeline(spans, timescale);
}

/** The fMP4 tree's MPD over the same segments as its HLS master. */
export async function stitchDash(s: StitchInput, published: PublishedTree): Promise<string> {
  const { job, audio, chunks } = s;
  const input = dashInput({
    renditions: job.renditions,
    media: { audioTracks: job.media.audioTracks, subtitles: [] },
    video: published.video,
    audio: published.audio,
    timelines: {
      video: job.renditions.map((r) => timeline(chunks.map((c) => partOf(c, 'fmp4', r.name)))),
      audio: published.audio.map((a) => timeline([partOf(audio, 'fmp4', a.rel)])),
    },
  });
  const file = path.join(s.localRoot, 'fmp4', 'index.mpd');
  await writeFile(file, dashManifest(input));
  const key = storageKey(published.tree.prefix, 'index.mpd');
  s.queue.add(key, file);
  await s.queue.drain();
  return `/${key}`;
}

/** The built-in store's pieces as local files (the folder store's own, or downloads), in a concat list. */
async function concatList(s: StitchInput, keys: readonly string[], name: string): Promise<string> {
  const dir = path.join(s.localRoot, 'parts');
  await mkdir(dir, { recursive: true });
  const files: string[] = [];
  for (const [i, key] of keys.entries()) {
    const got = await s.store.input(key).fetch({ dest: path.join(dir, `${name}-${i}`), signal: s.ctx.signal });
    files.push(got.path);
  }
  const list = path.join(dir, `${name}.txt`);
  // The concat demuxer's quoting: a quote closes, so it is written as '\''.
  await writeFile(list, files.map((f) => `file '${f.replace(/'/g, "'\\''")}'\n`).join(''));
  return list;
}

async function ffmpeg(s: StitchInput, args: string[], cwd: string): Promise<void> {
  const { config } = s.deps;
  const res = await runProcess(config.ffmpegPath, [...FFMPEG_QUIET, ...args], {
    signal: s.ctx.signal,
    cwd,
    timeoutMs: config.transcodeTimeoutMs,
  });
  if (res.code !== 0) throw new InternalError(`stitching failed${detail(res.stderrTail)}`);
}

/** The whole input on local disk, for the C2PA parent ingredient: read once, only when signing. */
async function sourceFile(s: StitchInput): Promise<string> {
  const source = s.job;
  const from =
    source.stored !== undefined ? s.store.input(source.stored) : createInputSource(source.input, s.deps.config);
  return (await from.fetch({ dest: path.join(s.localRoot, 'input'), signal: s.ctx.signal })).path;
}

/** One faststart MP4 per rendition: its chunk parts and the audio, copied, signed when asked. */
export async function stitchMp4s(s: StitchInput, prefix: string): Promise<Mp4Output> {
  const { job } = s;
  const dir = path.join(s.localRoot, 'mp4');
  await mkdir(dir, { recursive: true });
  const tracks = job.media.audioTracks;
  const audioKey = s.audio?.mp4.audio;
  const out: Mp4Output = [];
  const fetched =
    audioKey && tracks.length > 0
      ? await s.store.input(audioKey).fetch({ dest: path.join(dir, 'audio.m4a'), signal: s.ctx.signal })
      : undefined;
  const audio = fetched?.path;
  const signer = job.c2pa ? s.deps.c2paSigner : undefined;
  if (job.c2pa && !signer) throw new InternalError('c2pa: the signer went away between the split and the stitch');
  // The single run's manifests name the input as their parent, by its hash: so do these.
  const parent = signer ? { path: await sourceFile(s) } : undefined;
  for (const r of job.renditions) {
    const keys = s.chunks.map((c) => c.mp4[r.name] ?? '');
    if (keys.some((k) => k === '')) throw new InternalError(`chunked: a chunk has no MP4 part of ${r.name}`);
    const list = await concatList(s, keys, r.name);
    const file = path.join(dir, `${r.name}.mp4`);
    const args = [...inputArgs(list, 'our-concat'), ...(audio ? inputArgs(audio, 'ours') : [])];
    args.push('-map', '0:v:0', ...(audio ? ['-map', '1:a'] : []), '-c', 'copy', '-map_metadata', '-1');
    args.push(...(audio ? trackLabels(tracks) : []), '-movflags', '+faststart', file);
    await ffmpeg(s, args, dir);
    if (signer)
      await signMp4({
        input: file,
        output: file,
        title: r.name,
        ...(parent ? { parent } : {}),
        signer,
        signal: s.ctx.signal,
      });
    const key = storageKey(prefix, `${r.name}.mp4`);
    s.queue.add(key, file);
    out.push({ ...renditionOutput(r, `/${key}`, 0), ...(signer ? { signed: true } : {}) });
  }
  await s.queue.drain();
  return out.map((o) => ({ ...o, size: s.queue.sizes.get(o.path.slice(1)) ?? 0 }));
}

/** The storyboard and poster over the whole duration, from the lowest rendition's parts. */
export async function stitchThumbnails(
  s: StitchInput,
  o: { prefix: string; lowest: string },
): Promise<ThumbnailsOutput | undefined> {
  const { job } = s;
  const plan = planThumbnails({ underTree: true, media: job.media, duration: job.duration, enabled: true });
  if (!plan) return undefined;
  const keys = s.chunks.map((c) => c.mp4[o.lowest] ?? '');
  if (keys.some((k) => k === '')) throw new InternalError(`chunked: a chunk has no MP4 part of ${o.lowest}`);
  const list = await concatList(s, keys, `thumbs-${o.lowest}`);
  const cwd = path.join(s.localRoot, 'thumbs');
  await mkdir(path.join(cwd, THUMBNAILS_DIR), { recursive: true });
  const branches = thumbnailBranches(plan, { inputLabel: '0:v:0', dir: THUMBNAILS_DIR });
  await ffmpeg(
    s,
    [...inputArgs(list, 'our-concat'), '-filter_complex', branches.filters.join(';'), ...branches.outputArgs],
    cwd,
  );
  await usePoster(
    { chunks: s.chunks, store: s.store, signal: s.ctx.signal },
    path.join(cwd, THUMBNAILS_DIR, POSTER_FILE),
  );
  return publishThumbnails(s.queue, { local: path.join(cwd, THUMBNAILS_DIR), plan, prefix: o.prefix });
}
