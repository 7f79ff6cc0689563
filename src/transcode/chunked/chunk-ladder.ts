import type { JobContext } from '../../tasks/index.ts';
import { chooseLadder, tunableRungs } from '../per-title/index.ts';
import type { Rendition } from '../renditions.ts';
import { openPieceSource } from './source.ts';
import type { ChunkedDeps, ChunkJob } from './types.ts';

// The per-title ladder of a split job, chosen by the chunks: the split step plans the rungs
// and reads no more of the input than its probe; each chunk samples its own part before its
// encode and chooses its rungs' rates from it (per-title/index.ts chooseLadder). No rung is
// dropped, so every chunk writes the same ladder, and each rung keeps its planned bitrate as
// its cap, which bounds its peak in every chunk as in a single run.

/**
 * The chunk's rungs with the rates its own part calls for, when the job has the per-title
 * ladder on; the planned rungs otherwise, or when the analysis fails (logged: the chunk is
 * then encoded as the fixed ladder would be).
 */
export async function chunkLadder(deps: ChunkedDeps, job: ChunkJob, ctx: JobContext): Promise<Rendition[]> {
  // Nothing to choose: no need to open the source.
  if (!job.perTitle || tunableRungs(job.renditions).length === 0) return job.renditions;
  const { window } = job.chunk;
  const length = window.keepSecs ?? Math.max(0, job.duration - window.startSecs);
  const { config } = deps;
  const proxy = await openPieceSource(deps, job, ctx.signal);
  try {
    return await chooseLadder({
      input: proxy.url,
      media: job.media,
      duration: job.duration,
      span: { start: window.startSecs, length },
      keepRungs: true,
      renditions: job.renditions,
      ffmpegPath: config.ffmpegPath,
      preset: config.x264Preset,
      segmentSecs: job.segmentSecs,
      signal: ctx.signal,
      log: ctx.log,
    });
  } finally {
    await proxy.close();
  }
}
