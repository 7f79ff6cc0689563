import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { InternalError } from '../../lib/errors.ts';
import type { MediaInfo } from '../probe.ts';
import {
  partMakes,
  planStoryboard,
  POSTER_FILE,
  sheetFileName,
  sheetsFromTilesArgs,
  STORYBOARD_VTT,
  type StoryboardPart,
  storyboardPart,
  storyboardPartBranches,
  storyboardVtt,
  thumbnailBranches,
  type StoryboardPlan,
  TILES_FILE,
  tileBytes,
} from '../storyboard.ts';
import { storageKey, type UploadQueue } from '../uploads.ts';
import { chunkedBehaviour, type ChunkedJob, type ChunkWindow, type StitchRun } from './chunked-format.ts';
import type { OutputFormat } from './format.ts';

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
 * A chunk of a split run writes its part (the tiles whose cues start in it, the poster if
 * it holds its time) from its own decode; the stitch assembles the sheets from the tiles.
 */
export const thumbnails: OutputFormat<'thumbnails', ThumbnailsOutput, false> = {
  key: 'thumbnails',
  label: 'thumbnails',
  requested: false,
  reservedNames: [DIR],
  writes: (plan) =>
    plan.thumbnails !== undefined && (plan.chunk === undefined || partMakes(chunkPart(plan.thumbnails, plan.chunk))),
  dirs: () => [DIR],
  branch: (plan, inputLabel) => {
    const board = plan.thumbnails;
    if (!board) return { filters: [], outputArgs: [] };
    if (!plan.chunk) return thumbnailBranches(board, { inputLabel, dir: DIR });
    const part = chunkPart(board, plan.chunk);
    return storyboardPartBranches(board, part, { inputLabel, dir: DIR, offsetSecs: plan.chunk.seekSecs });
  },
  open: (run, prefix) => ({
    publish: () => {
      const plan = run.plan.thumbnails;
      if (!plan) throw new InternalError('thumbnails opened without a storyboard plan');
      return publishThumbnails(run.queue, { local: path.join(run.outDir, DIR), plan, prefix });
    },
  }),
  chunked: chunkedBehaviour<ThumbnailsShare, ThumbnailsOutput>({
    collect: async (piece) => {
      const plan = wholePlan(piece.job);
      const window = piece.chunk?.window;
      if (!plan || !window) return undefined;
      const part = chunkPart(plan, window);
      const tiles = { first: part.firstTile, count: part.tiles };
      return {
        ...(part.tiles > 0
          ? { tiles: { ...tiles, key: piece.keep(`${DIR}/${TILES_FILE}`, 'application/octet-stream') } }
          : {}),
        ...(part.poster ? { poster: piece.keep(`${DIR}/${POSTER_FILE}`, 'image/jpeg') } : {}),
      };
    },
    stitch: stitchThumbnails,
  }),
};

/** What a chunk keeps for the storyboard: its raw tiles (where they go in the whole), and the poster if it holds its time. */
interface ThumbnailsShare {
  tiles?: { first: number; count: number; key: string };
  poster?: string;
}

function wholePlan(job: ChunkedJob): StoryboardPlan | undefined {
  return planThumbnails({ underTree: true, media: job.media, duration: job.duration, enabled: true });
}

/** A chunk's part of the storyboard: what falls in [start, start + keep) of the whole. */
function chunkPart(plan: StoryboardPlan, w: ChunkWindow): StoryboardPart {
  return storyboardPart(plan, {
    startSecs: w.startSecs,
    ...(w.keepSecs === undefined ? {} : { endSecs: w.startSecs + w.keepSecs }),
  });
}

/**
 * The storyboard and poster of a chunked run: the sheets encoded from the chunks' tiles (a
 * few small pictures, whatever the film's length: the video is not decoded again), and the
 * poster of the chunk that holds its time.
 */
async function stitchThumbnails(run: StitchRun<ThumbnailsShare>): Promise<ThumbnailsOutput | undefined> {
  const plan = wholePlan(run.job);
  if (!plan) return undefined;
  const local = path.join(run.localDir, DIR);
  await mkdir(local, { recursive: true });
  const tiles = await joinTiles(run, plan);
  await run.ffmpeg(sheetsFromTilesArgs(plan, { tiles, dir: DIR }), {
    cwd: run.localDir,
    failure: 'the storyboard could not be assembled',
  });
  const poster = run.chunks.find((c) => c?.poster)?.poster;
  if (!poster) throw new InternalError('chunked: no chunk kept the poster');
  // A kept file may be fetched where it lies (the built-in store on this disk): copied into place.
  await copyFile(await run.fetchKept(poster, path.join(run.localDir, POSTER_FILE)), path.join(local, POSTER_FILE));
  return publishThumbnails(run.queue, { local, plan, prefix: run.prefix });
}

/** The chunks' tiles, in order, as one raw file of exactly the plan's tiles: its path. */
async function joinTiles(run: StitchRun<ThumbnailsShare>, plan: StoryboardPlan): Promise<string> {
  const parts = run.chunks.flatMap((c) => (c?.tiles ? [c.tiles] : []));
  let next = 0;
  for (const p of parts) {
    if (p.first !== next) throw new InternalError(`chunked: the storyboard's tile ${next} is missing`);
    next += p.count;
  }
  if (next !== plan.count) throw new InternalError(`chunked: the chunks made ${next} of ${plan.count} tiles`);
  const joined = path.join(run.localDir, TILES_FILE);
  for (const [i, p] of parts.entries()) {
    const file = await run.fetchKept(p.key, path.join(run.localDir, `tiles-${i}.yuv`));
    await pipeline(createReadStream(file), createWriteStream(joined, { flags: i === 0 ? 'w' : 'a' }));
  }
  const { size } = await stat(joined);
  if (size !== plan.count * tileBytes(plan))
    throw new InternalError(`chunked: the storyboard's tiles hold ${size} bytes, not ${plan.count} tiles`);
  return joined;
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
