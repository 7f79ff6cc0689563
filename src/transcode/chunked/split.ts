import { openRangeReader, startRangeProxy, type InputSpec, type RangeProxy } from '../../storage/index.ts';
import type { JobContext, PieceSpec, SPLIT } from '../../tasks/index.ts';
import { planLadder } from '../ladder.ts';
import { unchunkable } from '../outputs/index.ts';
import type { PipelineJob } from '../pipeline.ts';
import { hasVideo, probe, type MediaInfo } from '../probe.ts';
import type { Rendition } from '../renditions.ts';
import type { AudioWindow } from '../outputs/index.ts';
import { pieceSpecs, planAudio, planChunks, splittable, type ChunkPlan } from './plan.ts';
import { piecesPrefix, type ChunkedDeps, type PieceJob, type SourceRef } from './types.ts';

// Issue #30: the split step, run by the job entry (job.ts) for every kind of job. A source
// that answers ranges is probed through the range proxy (a few ranges, not the whole file);
// a long input gets its ladder planned and is split into pieces (plan.ts), which read the
// source by ranges or from its copy in the built-in store. The split reads no more of the
// input than its probe: a per-title ladder is chosen by each chunk for its own part
// (chunk-ladder.ts).

/** A source probed by ranges: its probe, its size, and the proxy that served it. */
export interface RangedLook {
  media: MediaInfo;
  size: number;
  proxy: RangeProxy;
}

/** The source probed by ranges when it answers them (and is within the size limit); undefined otherwise. */
export async function lookByRanges(
  deps: ChunkedDeps,
  input: InputSpec,
  signal: AbortSignal,
): Promise<RangedLook | undefined> {
  const { config } = deps;
  const reader = await openRangeReader(input, config, signal);
  if (!reader) return undefined;
  if (reader.size > config.inputMaxBytes) {
    reader.close();
    return undefined;
  }
  const proxy = await startRangeProxy(reader);
  const media = await probe(proxy.url, { ffprobePath: config.ffprobePath, signal, timeoutMs: 60_000 }).catch(
    () => undefined,
  );
  if (media) return { media, size: reader.size, proxy };
  await proxy.close();
  return undefined;
}

/** A long input's ladder, chunks and audio pieces: what the split needs. */
export interface SplitPlan {
  planned: Rendition[];
  plan: ChunkPlan;
  audio: AudioWindow[];
}

/** The ladder and chunks of an input, or undefined when the single run takes it (short, not splittable, or a format that cannot be chunked). */
export function planSplit(deps: ChunkedDeps, job: PipelineJob, media: MediaInfo): SplitPlan | undefined {
  const { config } = deps;
  if (!splittable(media) || !hasVideo(media)) return undefined;
  const planned = planLadder(media, { profiles: job.profiles, maxFps: config.maxOutputFps, outputs: job.outputs });
  const plan = planChunks({
    duration: media.duration,
    renditions: planned,
    segmentSecs: job.segmentSecs ?? config.defaultSegmentSecs,
    chunkSecs: config.chunkSecs,
    thresholdSecs: config.chunkThresholdSecs,
  });
  if (!plan) return undefined;
  // A format whose pieces cannot make its part (`chunked: false`): the job is one run, whatever its length.
  const single = unchunkable(job.outputs);
  if (single) {
    job.log?.info({ format: single.key, duration: media.duration }, `not split: ${single.label} cannot be chunked`);
    return undefined;
  }
  const audio = planAudio({
    duration: media.duration,
    segmentSecs: job.segmentSecs ?? config.defaultSegmentSecs,
    pieceSecs: config.audioChunkSecs > 0 ? config.audioChunkSecs : config.chunkSecs,
  });
  return { planned, plan, audio };
}

/** Where the pieces read the input: the source by ranges, or a file in the built-in store. */
export type PieceSource = { ranged: InputSpec } | { stored: string };

/**
 * Plans the pieces of a long input and hands them to the queue; the parent's slot goes back.
 * `base` is what every piece is told besides the split's findings (where the outputs go,
 * which, the finish step).
 */
export async function splitInto(
  deps: ChunkedDeps,
  o: {
    ctx: JobContext;
    job: PipelineJob;
    base: Pick<PieceJob, 'storage' | 'builtinPrefix' | 'outputs' | 'c2pa' | 'finish'>;
    source: PieceSource;
    media: MediaInfo;
    found: SplitPlan;
    size: number;
    split: (pieces: readonly PieceSpec[]) => Promise<typeof SPLIT>;
    /** Puts a stored source where the pieces read it. */
    storeSource?: () => Promise<void>;
  },
): Promise<typeof SPLIT> {
  const { ctx, job, media, found } = o;
  // The outputs' store is checked before any piece is queued, then freed: each piece opens its own.
  await job.store.check(ctx.signal);
  await job.store.discard();
  await o.storeSource?.();
  const source: SourceRef = 'ranged' in o.source ? { input: o.source.ranged } : { stored: o.source.stored };
  const pieceJob: PieceJob = {
    ...source,
    ...withoutUndefined(o.base),
    media,
    renditions: found.planned,
    perTitle: job.perTitle ?? deps.config.perTitle,
    segmentSecs: job.segmentSecs ?? deps.config.defaultSegmentSecs,
    duration: media.duration,
  };
  const pieces = pieceSpecs(pieceJob, found.plan, { inputSize: o.size, audio: found.audio });
  ctx.log.info(
    {
      duration: media.duration,
      chunks: found.plan.windows.length,
      chunkSecs: found.plan.chunkSecs,
      audioPieces: media.audioTracks.length > 0 ? found.audio.length : 0,
      ranged: 'ranged' in o.source,
    },
    'split into pieces',
  );
  return o.split(pieces);
}

/** Where a split task keeps a source that answers no ranges (removed with its pieces). */
export const copiedSourceKey = (taskId: string): string => `${piecesPrefix(taskId)}source`;

/** The params are stored as JSON: an absent field, not an undefined one. */
function withoutUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
