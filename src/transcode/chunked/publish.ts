import path from 'node:path';
import type { ObjectStore } from '../../storage/index.ts';
import type { JobContext, PieceState } from '../../tasks/index.ts';
import { chunkedOutputs } from '../outputs/index.ts';
import { pieceQueue } from './encode.ts';
import { stitchRunOf } from './stitch-media.ts';
import type { ChunkedDeps, PieceJob, PieceManifest } from './types.ts';

// The pieces' manifests as the stitch and the early outputs read them, and the early outputs:
// once the audio and the first chunks are in, the formats that can (the HLS trees' EVENT
// playlists) publish what players may start on long before the last chunk ends.

/** A sibling's output as a manifest, when it is one. */
export function manifestOf(state: Pick<PieceState, 'output' | 'phase'>): PieceManifest | undefined {
  const m = state.output;
  if (state.phase !== 'completed' || !m || (m.kind !== 'audio' && m.kind !== 'chunk')) return undefined;
  if (typeof m.index !== 'number' || typeof m.formats !== 'object' || m.formats === null) return undefined;
  // Written by this module's pieces (pieces.ts): the checks above tell it from any other output.
  return { kind: m.kind, index: m.index, formats: m.formats as PieceManifest['formats'] };
}

/** The audio and the chunks done in a row from the first, with `own` (not yet completed) counted in. */
export function donePrefix(
  states: readonly PieceState[],
  own: PieceManifest,
): { audio: PieceManifest | undefined; chunks: PieceManifest[] } {
  const done = [own, ...states.map(manifestOf).filter((m): m is PieceManifest => m !== undefined)];
  const audio = done.find((m) => m.kind === 'audio');
  const byIndex = new Map(done.filter((m) => m.kind === 'chunk').map((m) => [m.index, m]));
  const chunks: PieceManifest[] = [];
  for (let i = 0; byIndex.has(i); i++) chunks.push(byIndex.get(i) as PieceManifest);
  return { audio, chunks };
}

/**
 * Early outputs: once this piece's files are up, the chunks done in a row from the first (and
 * the audio) are published by each format that can (the HLS trees: EVENT playlists with a
 * master), so the first segments play before the last chunk ends. Only a piece that lengthens
 * that run writes them. A failure here costs the early start alone: it is logged, not thrown.
 */
export async function publishEarly(
  deps: ChunkedDeps,
  o: { ctx: JobContext; job: PieceJob; own: PieceManifest; store: ObjectStore },
): Promise<void> {
  const { ctx, job, own } = o;
  const formats = chunkedOutputs(job.outputs).filter((f) => f.chunked.early);
  if (!ctx.siblings || formats.length === 0) return;
  try {
    const { audio, chunks } = donePrefix(await ctx.siblings(), own);
    const lengthens = own.kind === 'audio' || own.index < chunks.length;
    if (!lengthens || chunks.length === 0 || (job.media.audioTracks.length > 0 && !audio)) return;
    const queue = pieceQueue(deps, o.store, ctx.signal);
    const localRoot = path.join(ctx.scratchDir, 'early');
    const runOf = stitchRunOf({ deps, signal: ctx.signal, job, queue, localRoot, audio, chunks, signs: false });
    for (const f of formats) await f.chunked.early?.(runOf(f));
    await queue.drain();
    ctx.log.info({ chunks: chunks.length }, 'early playlists published');
  } catch (err) {
    ctx.log.warn({ err }, 'early playlists not published');
  }
}
