import path from 'node:path';
import { type Static, Type } from '@sinclair/typebox';
import { InputUnreadableError, ValidationError } from '../lib/errors.ts';
import { FileInput } from '../storage/index.ts';
import { checkedHandler, type JobContext, type JobHandler, type SPLIT, TASK_TYPES } from '../tasks/index.ts';
import { forwardOnly, probe, progressWithin } from '../transcode/index.ts';
import { cutClip } from './clip-cut.ts';
import { assetSourceKey } from './keys.ts';
import { LiveClipRange, readLiveRange } from './live-clip.ts';
import { type AssetProcessingDeps, makeAsset } from './process.ts';
import { ProcessingSpec, processingSpecOf } from './processing.ts';
import type { AssetOutput, RecordingArchive } from './types.ts';

/** The task type that cuts a range of an asset into a new asset (spec/API.md section C, issue #28). */
export const CLIP_TASK_TYPE = TASK_TYPES.clip;

const PlaybackId = Type.String({ pattern: '^[a-z0-9]{16}$' });

// What a stored `clip` task's params must be (issue #26): the new asset (assetId, playbackId,
// added by AssetStore.create) and the processing it gets, and what it is cut from: an asset
// (with its source's store key, the range in milliseconds from its start), or a live stream's
// session (`live`: the range in Unix milliseconds, read from the session's archive).
const NewAsset = { assetId: Type.String(), playbackId: PlaybackId, ...ProcessingSpec.properties };
const StoredAssetClip = Type.Object({
  ...NewAsset,
  source: Type.Object({ assetId: Type.String(), playbackId: PlaybackId, key: Type.String() }),
  startTime: Type.Number({ minimum: 0 }),
  endTime: Type.Number({ minimum: 0 }),
  sessionId: Type.Optional(Type.String()),
});
const StoredLiveClip = Type.Object({ ...NewAsset, live: LiveClipRange });
const StoredClipJob = Type.Union([StoredAssetClip, StoredLiveClip]);
type StoredClipJob = Static<typeof StoredClipJob>;

export interface ClipHandlerDeps extends AssetProcessingDeps {
  /** Live sessions' archived source (main.ts passes the live archive): clips of a live stream read it. */
  archive?: RecordingArchive | undefined;
  /** How long a live clip waits for the archive to reach its end (LIVE_CLIP_WAIT_MS when absent). */
  liveClipWaitMs?: number | undefined;
}

/** The part of the progress the fetch of the source and the cut take (the new asset's ladder the rest). */
const CUT_SHARE = 0.3;

/**
 * The `clip` job: the source asset's file (read, never written) or a live session's archive
 * over the range (a clip of a live stream), the range cut from it frame-accurately (clip-cut.ts: a smart cut for H.264, the range encoded whole otherwise),
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
    const spec = processingSpecOf(p);
    // Never backwards: a smart cut that fails its checks starts the cut over.
    const progress = forwardOnly(ctx.progress);
    const { input, range, from } = await clipSource(d, p, { ...ctx, progress });
    const media = await probe(input, { ffprobePath: d.config.ffprobePath, signal: ctx.signal });
    const output = path.join(ctx.scratchDir, 'clip.mp4');
    const cut = await cutClip(d.config, {
      input,
      media,
      range,
      output,
      scratchDir: ctx.scratchDir,
      signal: ctx.signal,
      progress: (f) => progress(CUT_SHARE * (0.2 + 0.8 * f)),
      log: ctx.log,
    });
    ctx.log.info({ asset: p.assetId, ...from, ...cut }, 'clip cut');
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
 * The file the clip is cut from, as a local path, and the range in seconds from its start: the
 * source asset's file, or the live session's archive over the range (live-clip.ts).
 */
async function clipSource(
  d: ClipHandlerDeps,
  p: StoredClipJob,
  ctx: JobContext,
): Promise<{ input: string; range: { start: number; end: number }; from: Record<string, string> }> {
  if ('live' in p) {
    const { live } = p;
    if (live.endTime <= live.startTime) throw new ValidationError('live.endTime: must be greater than startTime');
    const got = await readLiveRange(
      { ffprobePath: d.config.ffprobePath, archive: d.archive, waitMs: d.liveClipWaitMs },
      live,
      ctx,
    );
    ctx.progress(CUT_SHARE * 0.2);
    return { ...got, from: { session: live.sessionId } };
  }
  const key = assetSourceKey(p.source.playbackId);
  if (p.source.key !== key) throw new ValidationError(`source.key: a clip reads its source asset's file (${key})`);
  if (p.endTime <= p.startTime) throw new ValidationError('endTime: must be greater than startTime');
  const input = await readSource(d, key, ctx);
  return { input, range: { start: p.startTime / 1000, end: p.endTime / 1000 }, from: { from: p.source.assetId } };
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
