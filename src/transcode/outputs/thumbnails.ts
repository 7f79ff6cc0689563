import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InternalError } from '../../lib/errors.ts';
import type { MediaInfo } from '../probe.ts';
import {
  planStoryboard,
  POSTER_FILE,
  sheetFileName,
  STORYBOARD_VTT,
  storyboardVtt,
  thumbnailBranches,
  type StoryboardPlan,
} from '../storyboard.ts';
import { storageKey, type UploadQueue } from '../uploads.ts';
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
};

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
 * the poster, under `<prefix>/thumbnails/`. Also the chunked stitch's (issue #30), from `local`.
 */
export async function publishThumbnails(
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
