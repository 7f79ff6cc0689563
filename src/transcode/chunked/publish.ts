import path from 'node:path';
import type { ObjectStore } from '../../storage/index.ts';
import type { JobContext, PieceState } from '../../tasks/index.ts';
import { chunkedOutputs } from '../outputs/index.ts';
import { pieceQueue } from './encode.ts';
import { stitchRunOf } from './stitch-media.ts';
import type { ChunkedDeps, PieceJob, PieceManifest } from './types.ts';

// The pieces' manifests as the stitch and the early outputs read them, and the early outputs:
// once the first audio pieces and the first chunks are in, the formats that can (the HLS trees' EVENT
// playlists) publish what players may start on long before the last chunk ends.

/** A sibling's output as a manifest, when it is one. */
export function manifestOf(state: Pick<PieceState, 'output' | 'phase'>): PieceManifest | undefined {
  const m = state.output;
  if (state.phase !== 'completed' || !m || (m.kind !== 'audio' && m.kind !== 'chunk')) return undefined;
  if (typeof m.index !== 'number' || typeof m.formats !== 'object' || m.formats === null) return undefined;
  // Written by this module's pieces (pieces.ts): the checks above tell it from any other output.
  return { kind: m.kind, index: m.index, formats: m.formats as PieceManifest['formats'] };
}

/** The audio pieces and the chunks done in a row from the first, with `own` (not yet completed) counted in. */
export function donePrefix(
  states: readonly PieceState[],
  own: PieceManifest,
): { audio: PieceManifest[]; chunks: PieceManifest[] } {
  const done = [own, ...states.map(manifestOf).filter((m): m is PieceManifest => m !== undefined)];
  return { audio: inARow(done, 'audio'), chunks: inARow(done, 'chunk') };
}

/** The pieces of one kind done in a row from index 0. */
function inARow(done: readonly PieceManifest[], kind: PieceManifest['kind']): PieceManifest[] {
  const byIndex = new Map(done.filter((m) => m.kind === kind).map((m) => [m.index, m]));
  const out: PieceManifest[] = [];
  for (let i = 0; byIndex.has(i); i++) out.push(byIndex.get(i) as PieceManifest);
  return out;
}

/**
 * Early outputs: once this piece's files are up, the chunks and the audio pieces done in a row
 * from the first are published by each format that can (the HLS trees: EVENT playlists with a
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
    const lengthens = own.index < (own.kind === 'audio' ? audio.length : chunks.length);
    if (!lengthens || chunks.length === 0 || (job.media.audioTracks.length > 0 && audio.length === 0)) return;
    const queue = pieceQueue(deps, o.store, ctx.signal);
    const localRoot = path.join(ctx.scratchDir, 'early');
    const runOf = stitchRunOf({ deps, signal: ctx.signal, job, queue, localRoot, audio, chunks, signs: false });
    for (const f of formats) await f.chunked.early?.(runOf(f));
    await queue.drain();
    ctx.log.info({ chunks: chunks.length, audioPieces: audio.length }, 'early playlists published');
    // Every rendition and the audio are in the playlists now: the parent task (and its asset) plays.
    await ctx.playable?.();
  } catch (err) {
    ctx.log.warn({ err }, 'early playlists not published');
  }
}
