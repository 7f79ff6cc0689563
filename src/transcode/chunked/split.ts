import { rm } from 'node:fs/promises';
import path from 'node:path';
import {
  openRangeReader,
  startRangeProxy,
  type FetchedInput,
  type InputSource,
  type RangeProxy,
} from '../../storage/index.ts';
import type { JobContext, PieceSpec, SPLIT } from '../../tasks/index.ts';
import { planLadder } from '../ladder.ts';
import { perTitleLadder, runPipeline, type PipelineJob } from '../pipeline.ts';
import { hasVideo, probe, type MediaInfo } from '../probe.ts';
import { throttledProgress } from '../progress.ts';
import type { Rendition } from '../renditions.ts';
import type { TranscodeFileOutput, TranscodeJob } from '../types.ts';
import { pieceSpecs, planChunks, splittable, type ChunkPlan } from './plan.ts';
import { piecesPrefix, type ChunkedDeps, type PieceJob, type SourceRef } from './types.ts';

// Issue #30: the split step, the parent's own run of `transcode-file`. The input is probed
// through the range proxy (a few ranges, not the whole file) while the ordinary download
// runs beside it: a short input goes on with that download to the single run and pays for
// no extra round trip; a long one stops it, plans the ladder (and #31's per-title choice,
// once for the whole video) and splits the task into pieces (plan.ts).

/** The download started before the verdict, handed to the single run as its input. */
interface Prefetch {
  source: InputSource;
  result: Promise<FetchedInput>;
}

function prefetch(source: InputSource, o: { dest: string; signal: AbortSignal }): Prefetch {
  let listener: ((n: number, total: number | undefined) => void) | undefined;
  const result = source.fetch({ ...o, onBytes: (n, total) => listener?.(n, total) });
  result.catch(() => undefined);
  return {
    result,
    source: {
      description: source.description,
      fetch: (opts) => {
        listener = opts.onBytes;
        return result;
      },
    },
  };
}

/** A long input as the split step found it. */
interface Found {
  media: MediaInfo;
  planned: Rendition[];
  plan: ChunkPlan;
  size: number;
  /** Ranges of the source itself, or else the downloaded file. */
  proxy?: RangeProxy;
  local?: string;
}

/**
 * A `transcode-file` job: split into pieces when its input is long and chunking applies
 * (a worker that can split, the built-in store for the pieces, outputs that land where
 * their keys say: not a content-addressed store), else the single run.
 */
export async function transcodeOrSplit(
  deps: ChunkedDeps,
  o: { params: TranscodeJob; ctx: JobContext; job: PipelineJob; canSplit: boolean },
): Promise<TranscodeFileOutput | typeof SPLIT> {
  const { params, ctx, job } = o;
  const split = o.canSplit ? ctx.split : undefined;
  const storeKind = params.storage?.type ?? 'builtin';
  if (!split || !deps.builtinStore || deps.config.chunkThresholdSecs <= 0 || !['builtin', 's3'].includes(storeKind))
    return runPipeline(deps.config, job);
  const stop = new AbortController();
  const dest = path.join(ctx.scratchDir, 'input');
  const download = prefetch(job.source, { dest, signal: AbortSignal.any([ctx.signal, stop.signal]) });
  let found: Found | undefined;
  try {
    found = await look(deps, { params, job, download });
    if (!found) return await runPipeline(deps.config, { ...job, source: download.source });
    if (found.proxy) {
      // Ranged: the pieces read the source itself; the download stops here.
      stop.abort();
      await download.result.catch(() => undefined);
      await rm(dest, { force: true });
    }
    return await splitInto(deps, { params, ctx, job, found, split });
  } finally {
    stop.abort();
    await found?.proxy?.close();
  }
}

/** The probe and the ladder of a long input, or undefined when the single run takes it. */
async function look(
  deps: ChunkedDeps,
  o: { params: TranscodeJob; job: PipelineJob; download: Prefetch },
): Promise<Found | undefined> {
  const { config } = deps;
  const tools = { ffprobePath: config.ffprobePath, signal: o.job.signal, timeoutMs: 60_000 };
  const reader = await openRangeReader(o.params.input, config, o.job.signal);
  let found: Omit<Found, 'planned' | 'plan'> | undefined;
  if (reader && reader.size <= config.inputMaxBytes) {
    const proxy = await startRangeProxy(reader);
    const media = await probe(proxy.url, tools).catch(() => undefined);
    found = media ? { media, size: reader.size, proxy } : undefined;
    if (!found) await proxy.close();
  } else {
    reader?.close();
    const local = await o.download.result;
    const media = await probe(local.path, tools).catch(() => undefined);
    found = media ? { media, size: local.size, local: local.path } : undefined;
  }
  const media = found?.media;
  if (!found || !media || !splittable(media) || !hasVideo(media)) return found?.proxy ? close(found.proxy) : undefined;
  try {
    const planned = planLadder(media, {
      profiles: o.job.profiles,
      maxFps: config.maxOutputFps,
      outputs: o.job.outputs,
    });
    const plan = planChunks({
      duration: media.duration,
      renditions: planned,
      segmentSecs: o.job.segmentSecs ?? config.defaultSegmentSecs,
      chunkSecs: config.chunkSecs,
      thresholdSecs: config.chunkThresholdSecs,
    });
    if (!plan) return found.proxy ? close(found.proxy) : undefined;
    return { ...found, planned, plan };
  } catch (err) {
    await found.proxy?.close();
    throw err;
  }
}

async function close(proxy: RangeProxy): Promise<undefined> {
  await proxy.close();
  return undefined;
}

/** Plans the pieces of a long input and hands them to the queue; the parent's slot goes back. */
async function splitInto(
  deps: ChunkedDeps,
  o: {
    params: TranscodeJob;
    ctx: JobContext;
    job: PipelineJob;
    found: Found;
    split: (pieces: readonly PieceSpec[]) => Promise<typeof SPLIT>;
  },
): Promise<typeof SPLIT> {
  const { params, ctx, job, found } = o;
  const store = deps.builtinStore;
  if (!store) throw new Error('unreachable: checked by transcodeOrSplit');
  const report = throttledProgress(ctx.progress, 500);
  // The outputs' store is checked before any piece is queued, then freed: each piece opens its own.
  await job.store.check(ctx.signal);
  await job.store.discard();
  // A retried parent's earlier pieces left their files here.
  await store.removePrefix(piecesPrefix(ctx.taskId));
  const input = found.proxy?.url ?? found.local ?? '';
  const { media } = found;
  const renditions = await perTitleLadder(deps.config, job, {
    input,
    media,
    duration: media.duration,
    planned: found.planned,
    report,
  });
  let source: SourceRef = { input: params.input };
  if (!found.proxy && found.local) {
    // A source that answers no ranges is copied once; every piece reads its range from here.
    source = { stored: `${piecesPrefix(ctx.taskId)}source` };
    await store.putFile(source.stored, found.local, {
      contentType: 'application/octet-stream',
      signal: ctx.signal,
      move: true,
    });
  }
  const pieceJob: PieceJob = {
    ...source,
    ...(params.storage ? { storage: params.storage } : {}),
    outputs: params.outputs,
    media,
    renditions,
    segmentSecs: job.segmentSecs ?? deps.config.defaultSegmentSecs,
    duration: media.duration,
    ...(params.c2pa ? { c2pa: true } : {}),
  };
  const pieces = pieceSpecs(pieceJob, found.plan, { inputSize: found.size });
  ctx.log.info(
    {
      duration: media.duration,
      chunks: found.plan.windows.length,
      chunkSecs: found.plan.chunkSecs,
      ranged: !!found.proxy,
    },
    'split into pieces',
  );
  return o.split(pieces);
}
