import path from 'node:path';
import { InternalError, ValidationError } from '../../lib/errors.ts';
import type { BuiltinStore } from '../../storage/builtin/index.ts';
import type { JobContext } from '../../tasks/index.ts';
import { openDestination } from '../destination.ts';
import { segmentTiming } from '../encoders.ts';
import { treeLayout } from '../outputs/hls-publish.ts';
import { layout as mp4Layout } from '../outputs/mp4.ts';
import { kindsOf, treeFolder, type CommandPlan } from '../outputs/index.ts';
import type { Rendition } from '../renditions.ts';
import { collectTrees, encodePiece, pieceQueue, withStore } from './encode.ts';
import { chunkPoster } from './poster.ts';
import { publishEarly } from './publish.ts';
import { piecesPrefix, type ChunkedDeps, type ChunkJob, type PieceJob, type PieceManifest } from './types.ts';

// Issue #30: the `transcode-audio` and `transcode-chunk` pieces. Each encodes its part with
// the single run's command (command.ts) on a plan of its own, uploads its HLS segments to
// their final keys under their final names, keeps its MP4 part in the built-in store for the
// stitch, and returns its manifest.

/** The encode's share of a piece's progress; uploads take the rest. */
const ENCODE_SHARE = 0.9;

function parentOf(ctx: JobContext): string {
  if (!ctx.parentId) throw new InternalError('chunked: a piece ran without its parent task');
  return ctx.parentId;
}

function builtin(deps: ChunkedDeps): BuiltinStore {
  if (!deps.builtinStore) throw new ValidationError('storage: this server has no built-in store for the pieces');
  return deps.builtinStore;
}

/** What every piece's command shares with the single run's. */
function basePlan(deps: ChunkedDeps, job: PieceJob): Pick<CommandPlan, 'segmentSecs' | 'preset' | 'threads'> {
  return { segmentSecs: job.segmentSecs, preset: deps.config.x264Preset, threads: deps.config.ffmpegThreads };
}

/** The rendition whose pieces make the storyboard: the smallest picture. */
export function lowestRendition(renditions: readonly Rendition[]): Rendition | undefined {
  return [...renditions].sort((a, b) => a.width * a.height - b.width * b.height)[0];
}

/**
 * Every audio track of the whole input, encoded once: each HLS tree's audio renditions (the
 * single run's audio-group targets: outputs/hls-tree.ts) and, for the MP4s, one `.m4a`.
 */
export async function runAudioPiece(deps: ChunkedDeps, job: PieceJob, ctx: JobContext): Promise<PieceManifest> {
  const parentId = parentOf(ctx);
  const store = openDestination(deps, job, parentId);
  const kinds = kindsOf(job.outputs);
  const plan = { ...basePlan(deps, job), probe: { ...job.media, subtitles: [] }, renditions: [], kinds };
  return withStore(store, ctx.signal, async () => {
    const outDir = await encodePiece(deps, { ctx, job, plan, seconds: job.duration, share: ENCODE_SHARE });
    const queue = pieceQueue(deps, store, ctx.signal);
    const rels = job.media.audioTracks.map((a) => treeLayout.audioDir(a.index));
    const trees = await collectTrees(deps, { job, outDir, rels, queue, first: true, signal: ctx.signal }, undefined);
    await queue.drain();
    const mp4: Record<string, string> = {};
    if (job.outputs.mp4) {
      mp4.audio = `${piecesPrefix(parentId)}audio.m4a`;
      const file = path.join(outDir, mp4Layout.audioMp4);
      await builtin(deps).putFile(mp4.audio, file, { contentType: 'audio/mp4', signal: ctx.signal, move: true });
    }
    const own: PieceManifest = { kind: 'audio', index: -1, trees, mp4 };
    await publishEarly(deps, { ctx, job, own, store });
    ctx.progress(1);
    return own;
  });
}

/** Whether the stitch makes a storyboard: it goes beside the renditions of an HLS tree. */
function wantsStoryboard(job: PieceJob): boolean {
  return treeFolder(job.outputs) !== undefined && job.media.video !== undefined;
}

/**
 * One chunk of the video: every rendition of [start, start + L), its segments numbered and
 * timed as the single run's (command.ts chunkInput/chunkFrames, hls-tree.ts chunkOptions,
 * fmp4-patch.ts), its MP4 parts (every rendition's for the MP4 output, the lowest one's for
 * the storyboard) kept in the built-in store.
 */
export async function runChunkPiece(deps: ChunkedDeps, job: ChunkJob, ctx: JobContext): Promise<PieceManifest> {
  const parentId = parentOf(ctx);
  const { index, window } = job.chunk;
  const store = openDestination(deps, job, parentId);
  const storyboard = wantsStoryboard(job);
  const kinds = { ...kindsOf(job.outputs), mp4: job.outputs.mp4 !== undefined || storyboard };
  const probe = { ...job.media, audio: undefined, audioTracks: [], subtitles: [] };
  const plan = { ...basePlan(deps, job), probe, renditions: job.renditions, kinds, chunk: window };
  const seconds = window.keepSecs ?? Math.max(0, job.duration - window.startSecs);
  return withStore(store, ctx.signal, async () => {
    const outDir = await encodePiece(deps, { ctx, job, plan, seconds, share: ENCODE_SHARE });
    const queue = pieceQueue(deps, store, ctx.signal);
    const rels = job.renditions.map((r) => r.name);
    const place = { startSecs: window.startSecs };
    const first = index === 0;
    const trees = await collectTrees(deps, { job, outDir, rels, queue, first, signal: ctx.signal }, place);
    checkSegments(job, trees);
    await queue.drain();
    const poster = storyboard
      ? await chunkPoster(deps, { job, ctx, outDir, parentId, store: builtin(deps) })
      : undefined;
    const keep = job.outputs.mp4 ? job.renditions : storyboard ? [lowestRendition(job.renditions)] : [];
    const mp4: Record<string, string> = {};
    for (const r of keep) {
      if (!r) continue;
      const key = `${piecesPrefix(parentId)}chunk-${index}/${r.name}.mp4`;
      const file = path.join(outDir, mp4Layout.mp4File(r.name));
      await builtin(deps).putFile(key, file, { contentType: 'video/mp4', signal: ctx.signal, move: true });
      mp4[r.name] = key;
    }
    const own: PieceManifest = { kind: 'chunk', index, trees, mp4, ...(poster ? { poster } : {}) };
    await publishEarly(deps, { ctx, job, own, store });
    ctx.progress(1);
    return own;
  });
}

/**
 * A chunk before the last holds exactly its whole segments: one more or fewer would shift
 * every later segment's number, so it fails here rather than publish a broken seam.
 */
function checkSegments(job: ChunkJob, trees: Record<string, { rel: string; segments: unknown[] }[]>): void {
  const { keepSecs } = job.chunk.window;
  const first = job.renditions[0];
  if (keepSecs === undefined || !first) return;
  const expected = Math.round(keepSecs / segmentTiming(job.segmentSecs, first).segment);
  for (const [key, parts] of Object.entries(trees))
    for (const p of parts)
      if (p.segments.length !== expected)
        throw new InternalError(
          `chunk ${job.chunk.index + 1}: ${key}/${p.rel} has ${p.segments.length} segments, not ${expected}`,
        );
}
