import path from 'node:path';
import { InternalError, ValidationError } from '../../lib/errors.ts';
import type { JobContext } from '../../tasks/index.ts';
import { openDestination } from '../destination.ts';
import { finishJob } from '../finish.ts';
import { chunkedOutputs } from '../outputs/index.ts';
import type { TranscodeFileOutput } from '../types.ts';
import { pieceQueue } from './encode.ts';
import { manifestOf } from './publish.ts';
import { stitchRunOf } from './stitch-media.ts';
import { piecesPrefix, type ChunkedDeps, type PieceManifest, type StitchJob } from './types.ts';

/** The manifests of every audio piece and every chunk, in order; the queue runs the stitch only once all are done. */
async function manifests(
  ctx: JobContext,
  job: StitchJob,
): Promise<{ audio: PieceManifest[]; chunks: PieceManifest[] }> {
  if (!ctx.siblings) throw new InternalError('chunked: the stitch ran without its sibling pieces');
  const done = (await ctx.siblings()).map(manifestOf).filter((m): m is PieceManifest => m !== undefined);
  const all = (kind: PieceManifest['kind'], count: number, name: string): PieceManifest[] => {
    const found = done.filter((m) => m.kind === kind).sort((a, b) => a.index - b.index);
    if (found.length !== count || found.some((c, i) => c.index !== i))
      throw new InternalError(`chunked: the stitch found ${found.length} of ${count} ${name} done`);
    return found;
  };
  const audio = all('audio', job.media.audioTracks.length > 0 ? job.audioPieces : 0, 'audio pieces');
  return { audio, chunks: all('chunk', job.chunks, 'chunks') };
}

/**
 * The `transcode-stitch` piece: from the pieces' manifests, without encoding the video again,
 * the outputs a single run writes, in its layout: each output format of the job, in the
 * registry's order, makes its files over the whole from its shares of the pieces (the HLS
 * trees' final playlists and masters, the DASH manifest, the MP4s, the storyboard and
 * poster) and gives its result under its key. Its output becomes the parent task's. The
 * pieces' files in the built-in store go at the end.
 */
export async function runStitch(deps: ChunkedDeps, job: StitchJob, ctx: JobContext): Promise<Record<string, unknown>> {
  const parentId = ctx.parentId;
  if (!parentId) throw new InternalError('chunked: a piece ran without its parent task');
  if (!deps.builtinStore) throw new ValidationError('storage: this server has no built-in store for the pieces');
  const { audio, chunks } = await manifests(ctx, job);
  const store = openDestination(deps, job, parentId);
  const queue = pieceQueue(deps, store, ctx.signal);
  const localRoot = path.join(ctx.scratchDir, 'stitch');
  const runOf = stitchRunOf({ deps, signal: ctx.signal, job, queue, localRoot, audio, chunks, signs: true });
  ctx.progress(0);
  const formats = chunkedOutputs(job.outputs);
  const out: Record<string, unknown> = {};
  for (const [i, f] of formats.entries()) {
    const result = await f.chunked.stitch(runOf(f));
    if (result !== undefined) out[f.key] = result;
    ctx.progress((0.9 * (i + 1)) / formats.length);
  }
  await queue.drain();
  const { baseUrl, files } = await store.close(ctx.signal);
  const output: TranscodeFileOutput = {
    ...(baseUrl ? { baseUrl } : {}),
    ...out,
    input_video: { duration: job.duration, size: job.inputSize },
    ...(files ? { files } : {}),
    pieces: { chunks: job.chunks, chunkSecs: job.chunkSecs, audio: audio.length > 0, audioPieces: audio.length },
  };
  // The job's finish step (an asset's), once, as the single run's would run it (job.ts).
  const finished = await finishJob(deps.finishSteps, job.finish, { output, signal: ctx.signal });
  await deps.builtinStore.removePrefix(piecesPrefix(parentId));
  ctx.progress(1);
  return finished;
}
