import path from 'node:path';
import { InternalError } from '../../lib/errors.ts';
import type { ObjectStore } from '../../storage/index.ts';
import type { JobContext, PieceState } from '../../tasks/index.ts';
import { AAC_CODECS } from '../encoders.ts';
import {
  publishMaster,
  publishMediaPlaylist,
  treeLayout,
  type HlsTree,
  type Published,
} from '../outputs/hls-publish.ts';
import type { HlsOutput } from '../renditions.ts';
import { storageKey } from '../uploads.ts';
import { pieceQueue, TREE_KEYS } from './encode.ts';
import type { ChunkedDeps, MediaPart, PieceJob, PieceManifest } from './types.ts';

// Issue #30: the HLS playlists of a chunked run, written from the pieces' manifests with the
// single run's writers (outputs/hls-publish.ts): by the stitch when everything is in (VOD),
// and early, for the chunks done so far from the first (EVENT), so players can start long
// before the last chunk ends.

/** One tree as published: its output and its entries (DASH is written from them). */
export interface PublishedTree {
  output: HlsOutput;
  tree: HlsTree;
  video: Published[];
  audio: Published[];
}

/** The part of `piece` for playlist `rel` of tree `key`. */
export function partOf(piece: PieceManifest | undefined, key: string, rel: string): MediaPart {
  const part = piece?.trees[key]?.find((p) => p.rel === rel);
  if (!part) throw new InternalError(`chunked: piece ${piece?.index ?? '(none)'} has no ${key} playlist ${rel}`);
  return part;
}

/** Each requested tree's media playlists and master from the manifests of the audio and of `chunks` (in order). */
export async function publishTrees(
  deps: ChunkedDeps,
  o: {
    job: PieceJob;
    store: ObjectStore;
    signal: AbortSignal;
    localRoot: string;
    audio: PieceManifest | undefined;
    chunks: readonly PieceManifest[];
    ended: boolean;
  },
): Promise<Record<string, PublishedTree>> {
  const { job, chunks, ended } = o;
  const queue = pieceQueue(deps, o.store, o.signal);
  const tracks = job.media.audioTracks;
  const out: Record<string, PublishedTree> = {};
  for (const key of TREE_KEYS) {
    const folder = job.outputs[key];
    if (!folder) continue;
    // Chunked, audio is its own rendition group in both trees: chunks carry no audio.
    const tree: HlsTree = { prefix: folder.path, dir: key, audioGroup: tracks.length > 0 };
    const localTree = path.join(o.localRoot, key);
    const media = (rel: string, parts: MediaPart[], codecs: string | undefined) =>
      publishMediaPlaylist(queue, {
        rel,
        keyDir: storageKey(folder.path, rel),
        localDir: path.join(localTree, rel),
        segments: parts.flatMap((p) => p.segments),
        map: parts[0]?.map,
        codecs: codecs ?? '',
        ended,
      });
    const video = await Promise.all(
      job.renditions.map((r) => {
        const parts = chunks.map((c) => partOf(c, key, r.name));
        return media(r.name, parts, parts[0]?.codecs);
      }),
    );
    const audio = await Promise.all(
      tracks.map((a) =>
        media(treeLayout.audioDir(a.index), [partOf(o.audio, key, treeLayout.audioDir(a.index))], AAC_CODECS),
      ),
    );
    await queue.drain();
    const output = await publishMaster({
      renditions: job.renditions,
      media: { audioTracks: tracks, subtitles: [] },
      queue,
      tree,
      localTree,
      video,
      audio,
      subtitles: [],
    });
    out[key] = { output, tree, video, audio };
  }
  return out;
}

/** A sibling's output as a manifest, when it is one. */
export function manifestOf(state: Pick<PieceState, 'output' | 'phase'>): PieceManifest | undefined {
  const m = state.output;
  if (state.phase !== 'completed' || !m || (m.kind !== 'audio' && m.kind !== 'chunk')) return undefined;
  if (typeof m.index !== 'number' || typeof m.trees !== 'object' || typeof m.mp4 !== 'object') return undefined;
  // Written by this module's pieces (pieces.ts): the checks above tell it from any other output.
  return {
    kind: m.kind,
    index: m.index,
    trees: m.trees as PieceManifest['trees'],
    mp4: m.mp4 as PieceManifest['mp4'],
    ...(typeof m.poster === 'string' ? { poster: m.poster } : {}),
  };
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
 * Early playlists (issue #30, item 5): once this piece's files are up, the chunks done in a
 * row from the first (and the audio) are listed as EVENT playlists with a master, so the
 * first segments play before the last chunk ends. Only a piece that lengthens that run
 * writes them. A failure here costs the early start alone: it is logged, not thrown.
 */
export async function publishEarly(
  deps: ChunkedDeps,
  o: { ctx: JobContext; job: PieceJob; own: PieceManifest; store: ObjectStore },
): Promise<void> {
  const { ctx, job, own } = o;
  if (!ctx.siblings || !TREE_KEYS.some((k) => job.outputs[k])) return;
  try {
    const { audio, chunks } = donePrefix(await ctx.siblings(), own);
    const lengthens = own.kind === 'audio' || own.index < chunks.length;
    if (!lengthens || chunks.length === 0 || (job.media.audioTracks.length > 0 && !audio)) return;
    const localRoot = path.join(ctx.scratchDir, 'early');
    await publishTrees(deps, { job, store: o.store, signal: ctx.signal, localRoot, audio, chunks, ended: false });
    ctx.log.info({ chunks: chunks.length }, 'early playlists published');
  } catch (err) {
    ctx.log.warn({ err }, 'early playlists not published');
  }
}
