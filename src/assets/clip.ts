import path from 'node:path';
import { Type } from '@sinclair/typebox';
import { InputUnreadableError, ValidationError } from '../lib/errors.ts';
import { FileInput } from '../storage/index.ts';
import { checkedHandler, type JobContext, type JobHandler, type SPLIT, TASK_TYPES } from '../tasks/index.ts';
import { forwardOnly, probe, progressWithin } from '../transcode/index.ts';
import { cutClip } from './clip-cut.ts';
import { assetSourceKey } from './keys.ts';
import { type AssetProcessingDeps, makeAsset } from './process.ts';
import { ProcessingSpec, processingSpecOf } from './processing.ts';
import type { AssetOutput } from './types.ts';

/** The task type that cuts a range of an asset into a new asset (spec/API.md section C, issue #28). */
export const CLIP_TASK_TYPE = TASK_TYPES.clip;

const PlaybackId = Type.String({ pattern: '^[a-z0-9]{16}$' });

// What a stored `clip` task's params must be (issue #26): the new asset (assetId, playbackId,
// added by AssetStore.create), the asset it is cut from with its source's store key, the range
// in milliseconds from the source's start, and the processing the new asset inherits.
const StoredClipJob = Type.Object({
  assetId: Type.String(),
  playbackId: PlaybackId,
  source: Type.Object({ assetId: Type.String(), playbackId: PlaybackId, key: Type.String() }),
  startTime: Type.Number({ minimum: 0 }),
  endTime: Type.Number({ minimum: 0 }),
  sessionId: Type.Optional(Type.String()),
  ...ProcessingSpec.properties,
});

export type ClipHandlerDeps = AssetProcessingDeps;

/** The part of the progress the fetch of the source and the cut take (the new asset's ladder the rest). */
const CUT_SHARE = 0.3;

/**
 * The `clip` job: the source asset's file (read, never written), the range cut from it
 * frame-accurately (clip-cut.ts: a smart cut for H.264, the range encoded whole otherwise),
 * then that clip made into the new asset as an upload is (process.ts: the job entry every
 * video takes), stored as its source.
 * Everything it writes is under the new asset's prefix: a retry starts over safely.
 */
export function createClipHandler(d: ClipHandlerDeps): JobHandler<unknown, AssetOutput>;
/** With `split` (the worker's, main.ts): a long clip is split into pieces, as a transcode's input is. */
export function createClipHandler(
  d: ClipHandlerDeps,
  o: { split: true },
): JobHandler<unknown, AssetOutput | typeof SPLIT>;
export function createClipHandler(
  d: ClipHandlerDeps,
  o?: { split: true },
): JobHandler<unknown, AssetOutput | typeof SPLIT> {
  return checkedHandler(StoredClipJob, async (p, ctx) => {
    const key = assetSourceKey(p.source.playbackId);
    if (p.source.key !== key) throw new ValidationError(`source.key: a clip reads its source asset's file (${key})`);
    if (p.endTime <= p.startTime) throw new ValidationError('endTime: must be greater than startTime');
    const spec = processingSpecOf(p);
    // Never backwards: a smart cut that fails its checks starts the cut over.
    const progress = forwardOnly(ctx.progress);
    const input = await readSource(d, key, { ...ctx, progress });
    const media = await probe(input, { ffprobePath: d.config.ffprobePath, signal: ctx.signal });
    const output = path.join(ctx.scratchDir, 'clip.mp4');
    const cut = await cutClip(d.config, {
      input,
      media,
      range: { start: p.startTime / 1000, end: p.endTime / 1000 },
      output,
      scratchDir: ctx.scratchDir,
      signal: ctx.signal,
      progress: (f) => progress(CUT_SHARE * (0.2 + 0.8 * f)),
      log: ctx.log,
    });
    ctx.log.info({ asset: p.assetId, from: p.source.assetId, ...cut }, 'clip cut');
    // The clip is the new asset's source: made into it as an upload is, and kept at its key.
    return makeAsset(d, {
      assetId: p.assetId,
      playbackId: p.playbackId,
      source: new FileInput(output),
      keepSource: true,
      spec,
      ctx: { ...ctx, progress: progressWithin(progress, CUT_SHARE, 1) },
      canSplit: o?.split === true,
    });
  });
}

/**
 * The source asset's file as a local path (a folder store's own file, or a download from a
 * bucket). Gone (the asset was deleted while the clip waited): a failure that names it, with
 * no path of the server in it.
 */
async function readSource(d: ClipHandlerDeps, key: string, ctx: JobContext): Promise<string> {
  if (!(await d.store.stat(key)))
    throw new InputUnreadableError('the asset to clip has no file any more (it was deleted)');
  const got = await d.store.input(key).fetch({
    dest: path.join(ctx.scratchDir, 'source'),
    signal: ctx.signal,
    onBytes: (n, total) => total && ctx.progress((CUT_SHARE * 0.2 * n) / total),
  });
  return got.path;
}
