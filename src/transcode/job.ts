import { rm } from 'node:fs/promises';
import path from 'node:path';
import { ValidationError } from '../lib/errors.ts';
import type { FetchedInput, InputSource, InputSpec } from '../storage/index.ts';
import type { JobContext, PieceSpec, SPLIT } from '../tasks/index.ts';
import { copiedSourceKey, lookByRanges, planSplit, splitInto, type RangedLook } from './chunked/split.ts';
import { piecesPrefix, type ChunkedDeps, type PieceJob } from './chunked/types.ts';
import { openDestination, type OutputPlace } from './destination.ts';
import { finishJob, type JobFinish } from './finish.ts';
import type { OutputFolders } from './outputs/index.ts';
import { DOWNLOAD_SHARE, probeInput, runPipeline, type PipelineJob } from './pipeline.ts';
import type { MediaInfo } from './probe.ts';
import { signingProblem } from './profile-rules.ts';
import { throttledProgress } from './progress.ts';
import type { ProfileSpec } from './renditions.ts';

// The one job entry: every video, whatever brought it (a `transcode-file` task, an asset's
// `upload` or `clip`), runs here: its input read and probed once, its ladder planned once,
// split into pieces when it is long (chunked/), else one run (pipeline.ts), its outputs
// written to their place (destination.ts), then its finish step (finish.ts) once, by the
// single run or by the stitch. A new way in (a live recording) says its input, its place
// and its finish step; it does not add a road.

/** The job's input. */
export interface JobInput {
  /** Reads the whole input into the scratch folder. */
  source: InputSource;
  /** The input as a request named it (a transcode's): when long and it answers ranges, the pieces read it by ranges. */
  ranged?: InputSpec | undefined;
  /** The input is in the built-in store at this key already (a direct upload): pieces read it there. */
  storedAt?: string | undefined;
}

/** The input once read whole and probed (the only probe of the job). */
export interface ReadInput {
  path: string;
  size: number;
  media: MediaInfo;
}

/** A finish step as a job entry's caller gives it. */
export interface FinishSpec {
  /** The step's kind among the worker's finish steps (ChunkedDeps.finishSteps). */
  kind: string;
  /**
   * Sees the whole input once read and probed; gives the step's params and, with `keep`,
   * where the input is kept in the built-in store (moved there after the single run, or
   * before a split, so that the pieces read it there).
   */
  prepare(
    input: ReadInput,
    signal: AbortSignal,
  ): Promise<{ params: Record<string, unknown>; keep?: { key: string; contentType: string } | undefined }>;
}

export interface JobSpec {
  input: JobInput;
  place: OutputPlace;
  outputs: OutputFolders;
  profiles?: readonly ProfileSpec[] | undefined;
  segmentSecs?: number | undefined;
  /** Issue #31: the per-title ladder on or off; absent: the `perTitle` setting. */
  perTitle?: boolean | undefined;
  /** Sign every MP4 with C2PA. */
  c2pa?: boolean | undefined;
  finish?: FinishSpec | undefined;
}

/**
 * Why a job that asks for C2PA cannot be signed here (the one check, made by the API before
 * a task is queued and by the job entry before any byte is read): no signer, or none of its
 * outputs is a format that signs. `unsigned` words the second for a caller whose request
 * does not name outputs (an asset's staticMp4).
 */
export function c2paProblems(o: {
  c2pa: boolean | undefined;
  signing: boolean;
  outputs: Readonly<Partial<Record<string, unknown>>>;
  unsigned?: string;
}): string[] {
  if (!o.c2pa) return [];
  const problems: string[] = [];
  if (!o.signing) problems.push('c2pa: C2PA signing is not configured on this server');
  const unsigned = signingProblem(o.outputs);
  if (unsigned) problems.push(`c2pa: ${o.unsigned ?? unsigned}`);
  return problems;
}

/** A progress report that never goes back (a step that starts over at 0 shows nothing until it passes). */
export function forwardOnly(report: (f: number) => void): (f: number) => void {
  let shown = Number.NEGATIVE_INFINITY;
  return (f) => {
    if (f <= shown) return;
    shown = f;
    report(f);
  };
}

/** `report` over [from, to]: a step that comes after others (a clip's cut) keeps their share. */
export function progressWithin(report: (f: number) => void, from: number, to: number): (f: number) => void {
  const forward = forwardOnly(report);
  return (f) => forward(from + (to - from) * Math.min(1, Math.max(0, f)));
}

/**
 * Runs a job: its task's output (the outputs, or what the finish step makes of them), or
 * SPLIT when it was split into pieces (only with `canSplit`: the worker's handlers).
 */
export async function runJob(
  deps: ChunkedDeps,
  spec: JobSpec,
  ctx: JobContext,
  o: { canSplit: boolean },
): Promise<Record<string, unknown> | typeof SPLIT> {
  const problems = c2paProblems({ c2pa: spec.c2pa, signing: deps.c2paSigner !== undefined, outputs: spec.outputs });
  if (problems.length > 0) throw new ValidationError(problems);
  const job = pipelineJob(deps, spec, ctx);
  const split = splitterOf(deps, spec, ctx, o.canSplit);
  // Nothing to learn of the input before the run: the pipeline reads and probes it.
  if (!split && !spec.finish) return runPipeline(deps.config, job);
  const stop = new AbortController();
  const download = prefetch(job, AbortSignal.any([ctx.signal, stop.signal]));
  let ranged: RangedLook | undefined;
  try {
    // A transcode's source that answers ranges is probed by them while the download runs beside.
    if (split && spec.input.ranged && !spec.finish) ranged = await lookByRanges(deps, spec.input.ranged, ctx.signal);
    if (ranged && split && spec.input.ranged) {
      const found = planSplit(deps, job, ranged.media);
      const probed = { media: ranged.media, checked: false };
      if (!found) {
        // The single run reads the download; the ranges are done with.
        await ranged.proxy.close();
        ranged = undefined;
        return await runPipeline(deps.config, { ...job, source: download.source, probed });
      }
      // Ranged: the pieces read the source itself; the download stops here.
      stop.abort();
      await download.result.catch(() => undefined);
      await rm(download.dest, { force: true });
      await clearPieces(deps, ctx);
      const source = { ranged: spec.input.ranged };
      const base = pieceBase(spec, undefined);
      return await splitInto(deps, { ctx, job, base, source, media: ranged.media, found, size: ranged.size, split });
    }
    return await runWhole(deps, { spec, ctx, job, download, split });
  } finally {
    stop.abort();
    await ranged?.proxy.close();
  }
}

/** The job read whole and probed once: split when long, else the single run; then its finish step. */
async function runWhole(
  deps: ChunkedDeps,
  o: {
    spec: JobSpec;
    ctx: JobContext;
    job: PipelineJob;
    download: Prefetch;
    split: ((pieces: readonly PieceSpec[]) => Promise<typeof SPLIT>) | undefined;
  },
): Promise<Record<string, unknown> | typeof SPLIT> {
  const { spec, ctx, job } = o;
  const input = await o.download.result;
  const media = await probeInput(deps.config, input.path, { ffmpegPath: deps.config.ffmpegPath, signal: ctx.signal });
  const prepared = await spec.finish?.prepare({ path: input.path, size: input.size, media }, ctx.signal);
  const finish = spec.finish && prepared ? { kind: spec.finish.kind, params: prepared.params } : undefined;
  const keep = prepared?.keep;
  const found = o.split ? planSplit(deps, job, media) : undefined;
  if (o.split && found) {
    await clearPieces(deps, ctx);
    // A source that answers no ranges is kept once in the built-in store; every piece reads its range there.
    const stored = spec.input.storedAt ?? keep?.key ?? copiedSourceKey(ctx.taskId);
    const contentType = keep?.contentType ?? 'application/octet-stream';
    const storeSource = async () => {
      if (stored !== spec.input.storedAt) await moveInto(deps, { key: stored, file: input, contentType, ctx });
    };
    const source = { stored };
    const base = pieceBase(spec, finish);
    return splitInto(deps, { ctx, job, base, source, media, found, size: input.size, split: o.split, storeSource });
  }
  const output = await runPipeline(deps.config, {
    ...job,
    source: o.download.source,
    probed: { media, checked: true },
  });
  if (keep) await moveInto(deps, { key: keep.key, file: input, contentType: keep.contentType, ctx });
  return finishJob(deps.finishSteps, finish, { output, signal: ctx.signal });
}

/** What the pipeline is told of the job. */
function pipelineJob(deps: ChunkedDeps, spec: JobSpec, ctx: JobContext): PipelineJob {
  return {
    source: spec.input.source,
    store: openDestination(deps, spec.place, ctx.taskId),
    outputs: spec.outputs,
    profiles: spec.profiles,
    segmentSecs: spec.segmentSecs,
    perTitle: spec.perTitle,
    scratchDir: ctx.scratchDir,
    signal: ctx.signal,
    progress: forwardOnly(ctx.progress),
    log: ctx.log ?? deps.log,
    ...(spec.c2pa && deps.c2paSigner ? { c2pa: { signer: deps.c2paSigner } } : {}),
  };
}

/**
 * The task's split, when chunking applies: a worker that can split, the built-in store for
 * the pieces, outputs that land where their keys say (not a content-addressed store).
 */
function splitterOf(
  deps: ChunkedDeps,
  spec: JobSpec,
  ctx: JobContext,
  canSplit: boolean,
): ((pieces: readonly PieceSpec[]) => Promise<typeof SPLIT>) | undefined {
  const storeKind = spec.place.storage?.type ?? 'builtin';
  if (!canSplit || !deps.builtinStore || deps.config.chunkThresholdSecs <= 0) return undefined;
  return ['builtin', 's3'].includes(storeKind) ? ctx.split : undefined;
}

/** What every piece is told of the job besides the split's findings. */
function pieceBase(
  spec: JobSpec,
  finish: JobFinish | undefined,
): Pick<PieceJob, 'storage' | 'builtinPrefix' | 'outputs' | 'c2pa' | 'finish'> {
  return {
    ...(spec.place.storage ? { storage: spec.place.storage } : {}),
    ...(spec.place.builtinPrefix ? { builtinPrefix: spec.place.builtinPrefix } : {}),
    outputs: spec.outputs,
    ...(spec.c2pa ? { c2pa: true } : {}),
    ...(finish ? { finish } : {}),
  };
}

/** A retried parent's earlier pieces left their files here. */
async function clearPieces(deps: ChunkedDeps, ctx: JobContext): Promise<void> {
  await deps.builtinStore?.removePrefix(piecesPrefix(ctx.taskId));
}

async function moveInto(
  deps: ChunkedDeps,
  o: { key: string; file: FetchedInput; contentType: string; ctx: JobContext },
): Promise<void> {
  if (!deps.builtinStore) throw new ValidationError('storage: this server has no built-in store to keep the input in');
  await deps.builtinStore.putFile(o.key, o.file.path, { contentType: o.contentType, signal: o.ctx.signal, move: true });
}

/** The download, started before the job knows how it runs; the single run takes it as its input. */
interface Prefetch {
  dest: string;
  source: InputSource;
  result: Promise<FetchedInput>;
}

function prefetch(job: PipelineJob, signal: AbortSignal): Prefetch {
  const dest = path.join(job.scratchDir, 'input');
  const report = throttledProgress(job.progress, 500);
  const result = job.source.fetch({
    dest,
    signal,
    onBytes: (n, total) => total && report((DOWNLOAD_SHARE * n) / total),
  });
  result.catch(() => undefined);
  return { dest, result, source: { description: job.source.description, fetch: () => result } };
}
