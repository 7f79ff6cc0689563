import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InternalError } from '../../lib/errors.ts';
import { inputArgs } from '../media-input.ts';
import type { MediaInfo } from '../probe.ts';
import type { Rendition } from '../renditions.ts';
import {
  planStoryboard,
  POSTER_FILE,
  posterFilter,
  sheetFileName,
  STORYBOARD_VTT,
  storyboardVtt,
  thumbnailBranches,
  type StoryboardPlan,
} from '../storyboard.ts';
import { storageKey, type UploadQueue } from '../uploads.ts';
import { chunkedBehaviour, type ChunkedJob, type PieceRun, type StitchRun } from './chunked-format.ts';
import type { OutputFormat } from './format.ts';
import { layout as mp4Layout } from './mp4.ts';

/** The storyboard's WebVTT file and the poster image. */
export interface ThumbnailsOutput {
  path: string;
  poster: string;
}

export const THUMBNAILS_DIR = 'thumbnails';
const DIR = THUMBNAILS_DIR;

/**
 * The storyboard (JPEG sprite sheets and a WebVTT file of `#xywh=` cues) and the poster: one
 * more branch of the split, under the first HLS tree of the job. Not asked for on its own.
 */
export const thumbnails: OutputFormat<'thumbnails', ThumbnailsOutput, false> = {
  key: 'thumbnails',
  label: 'thumbnails',
  requested: false,
  reservedNames: [DIR],
  writes: (plan) => plan.thumbnails !== undefined,
  dirs: () => [DIR],
  branch: (plan, inputLabel) =>
    plan.thumbnails ? thumbnailBranches(plan.thumbnails, { inputLabel, dir: DIR }) : { filters: [], outputArgs: [] },
  open: (run, prefix) => ({
    publish: () => {
      const plan = run.plan.thumbnails;
      if (!plan) throw new InternalError('thumbnails opened without a storyboard plan');
      return publishThumbnails(run.queue, { local: path.join(run.outDir, DIR), plan, prefix });
    },
  }),
  // Chunked: the storyboard is made over the whole by the stitch from the lowest rendition's
  // MP4 parts (so the chunks write MP4s), the poster by the chunk that holds its time.
  chunked: chunkedBehaviour<ThumbnailsShare, ThumbnailsOutput>({
    chunksNeed: ['mp4'],
    collect: async (piece) => {
      const plan = wholePlan(piece.job);
      const lowest = lowestRendition(piece.job.renditions);
      if (!piece.chunk || !plan || !lowest) return undefined;
      const poster = await chunkPoster(piece, plan);
      return { lowest: piece.keep(mp4Layout.mp4File(lowest.name), 'video/mp4'), ...(poster ? { poster } : {}) };
    },
    stitch: stitchThumbnails,
  }),
};

/** What a chunk keeps for the storyboard: its part of the lowest rendition, and the poster if it holds its time. */
interface ThumbnailsShare {
  lowest: string;
  poster?: string;
}

function wholePlan(job: ChunkedJob): StoryboardPlan | undefined {
  return planThumbnails({ underTree: true, media: job.media, duration: job.duration, enabled: true });
}

/** The rendition whose parts make the storyboard: the smallest picture. */
function lowestRendition(renditions: readonly Rendition[]): Rendition | undefined {
  return [...renditions].sort((a, b) => a.width * a.height - b.width * b.height)[0];
}

/**
 * The poster of a chunked run, when this chunk holds its time: from its largest rendition's
 * part (one from the lowest would be upscaled), with the single run's poster chain.
 */
async function chunkPoster(piece: PieceRun, plan: StoryboardPlan): Promise<string | undefined> {
  const w = piece.chunk?.window;
  const top = [...piece.job.renditions].sort((a, b) => b.width * b.height - a.width * a.height)[0];
  const at = plan.poster.atSecs;
  if (!w || !top || at < w.startSecs || (w.keepSecs !== undefined && at >= w.startSecs + w.keepSecs)) return undefined;
  const filter = posterFilter({ ...plan, poster: { ...plan.poster, atSecs: at - w.startSecs } });
  const args = [...inputArgs(mp4Layout.mp4File(top.name), 'ours'), '-vf', filter];
  args.push('-fps_mode', 'passthrough', '-c:v', 'mjpeg', '-q:v', '3', '-frames:v', '1', '-update', '1', POSTER_FILE);
  await piece.ffmpeg(args, { cwd: piece.outDir, failure: 'the poster could not be taken' });
  return piece.keep(POSTER_FILE, 'image/jpeg');
}

/** The storyboard and poster of a chunked run over the whole duration. */
async function stitchThumbnails(run: StitchRun<ThumbnailsShare>): Promise<ThumbnailsOutput | undefined> {
  const plan = wholePlan(run.job);
  if (!plan) return undefined;
  const list = await run.concatList(
    run.chunks.map((c) => c.lowest),
    'thumbnails',
  );
  const local = path.join(run.localDir, DIR);
  await mkdir(local, { recursive: true });
  const branches = thumbnailBranches(plan, { inputLabel: '0:v:0', dir: DIR });
  await run.ffmpeg(
    [...inputArgs(list, 'our-concat'), '-filter_complex', branches.filters.join(';'), ...branches.outputArgs],
    {
      cwd: run.localDir,
      failure: 'stitching failed',
    },
  );
  // The storyboard's poster is from the lowest rendition; the chunk's is the single run's size.
  const poster = run.chunks.find((c) => c.poster)?.poster;
  if (poster)
    await copyFile(
      await run.fetchKept(poster, path.join(run.localDir, 'chunk-poster.jpg')),
      path.join(local, POSTER_FILE),
    );
  return publishThumbnails(run.queue, { local, plan, prefix: run.prefix });
}

/** Thumbnails go beside the renditions of an HLS tree; MP4-only jobs and audio have none. */
export function planThumbnails(o: {
  underTree: boolean;
  media: MediaInfo;
  duration: number;
  enabled: boolean;
}): StoryboardPlan | undefined {
  if (!o.underTree || !o.media.video || !o.enabled) return undefined;
  return planStoryboard(o.duration, o.media.video.width, o.media.video.height);
}

/**
 * The storyboard's sprite sheets, its WebVTT file (cues name the sheets relative to it) and
 * the poster, under `<prefix>/thumbnails/`: the single run's, and the chunked stitch's.
 */
async function publishThumbnails(
  queue: UploadQueue,
  { local, plan, prefix }: { local: string; plan: StoryboardPlan; prefix: string },
): Promise<ThumbnailsOutput> {
  const keyDir = storageKey(prefix, DIR);
  await writeFile(path.join(local, STORYBOARD_VTT), storyboardVtt(plan));
  for (let i = 0; i < plan.sheets; i++) queue.add(`${keyDir}/${sheetFileName(i)}`, path.join(local, sheetFileName(i)));
  queue.add(`${keyDir}/${POSTER_FILE}`, path.join(local, POSTER_FILE));
  queue.add(`${keyDir}/${STORYBOARD_VTT}`, path.join(local, STORYBOARD_VTT));
  await queue.drain();
  return { path: `/${keyDir}/${STORYBOARD_VTT}`, poster: `/${keyDir}/${POSTER_FILE}` };
}
