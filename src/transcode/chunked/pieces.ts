import path from 'node:path';
import { InternalError, ValidationError } from '../../lib/errors.ts';
import type { BuiltinStore } from '../../storage/builtin/index.ts';
import type { JobContext } from '../../tasks/index.ts';
import { CodecsProbes } from '../codecs.ts';
import { openDestination } from '../destination.ts';
import {
  chunkedOutputs,
  kindsOf,
  planThumbnails,
  treeFolder,
  type CommandPlan,
  type PieceRun,
} from '../outputs/index.ts';
import { chunkLadder } from './chunk-ladder.ts';
import { encodeAudioPiece } from './audio-piece.ts';
import { encodePiece, pieceQueue, runOwnFfmpeg, withStore } from './encode.ts';
import { publishEarly } from './publish.ts';
import {
  piecesPrefix,
  type AudioJob,
  type ChunkedDeps,
  type ChunkJob,
  type PieceJob,
  type PieceManifest,
} from './types.ts';

// The `transcode-audio` and `transcode-chunk` pieces. Each encodes its part with the single
// run's command (command.ts) on a plan of its own; then every output format of the job says
// what it uploads to its final keys and what it keeps in the built-in store for the stitch
// (outputs/chunked-format.ts), and the piece returns its manifest.

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

/**
 * Every audio track of the input's window, sample-exact (audio-piece.ts), into the single run's
 * audio targets: each format keeps what it lists of it (the HLS trees' audio renditions, the
 * MP4s' `.m4a`).
 */
export async function runAudioPiece(deps: ChunkedDeps, job: AudioJob, ctx: JobContext): Promise<PieceManifest> {
  const kinds = kindsOf(job.outputs);
  const plan = { ...basePlan(deps, job), probe: { ...job.media, subtitles: [] }, renditions: [], kinds };
  const encode = (): Promise<string> => encodeAudioPiece(deps, { ctx, job, plan, share: ENCODE_SHARE });
  return runPiece(deps, { job, ctx, encode, audio: job.audio });
}

/**
 * One chunk of the video: every rendition of [start, start + L), numbered and timed as the
 * single run's (command.ts chunkInput/chunkFrames, hls-tree.ts chunkOptions); each format
 * uploads or keeps its part of it (outputs/chunked-format.ts).
 */
export async function runChunkPiece(deps: ChunkedDeps, job: ChunkJob, ctx: JobContext): Promise<PieceManifest> {
  const { index, window } = job.chunk;
  const probe = { ...job.media, audio: undefined, audioTracks: [], subtitles: [] };
  const kinds = kindsOf(job.outputs);
  // With the per-title ladder on, the rungs' rates are this chunk's own choice (chunk-ladder.ts).
  const renditions = await chunkLadder(deps, job, ctx);
  // The storyboard over the whole, as the single run plans it: the chunk makes its part (outputs/thumbnails.ts).
  const storyboard = { underTree: treeFolder(job.outputs) !== undefined, media: job.media, duration: job.duration };
  const thumbnails = planThumbnails({ ...storyboard, enabled: true });
  const plan = { ...basePlan(deps, job), probe, renditions, kinds, chunk: window, thumbnails };
  const seconds = window.keepSecs ?? Math.max(0, job.duration - window.startSecs);
  const encode = (): Promise<string> => encodePiece(deps, { ctx, job, plan, seconds, share: ENCODE_SHARE });
  return runPiece(deps, { job, ctx, encode, chunk: { index, window } });
}

/**
 * A piece: its encode, then each format's part of it in the registry's order (their uploads
 * drained), then the files they keep for the stitch moved into the built-in store, and the
 * early outputs. Its manifest holds each format's share under the format's key.
 */
async function runPiece(
  deps: ChunkedDeps,
  o: {
    job: PieceJob;
    ctx: JobContext;
    /** The piece's encode: its output folder, with the single run's layout. */
    encode: () => Promise<string>;
    chunk?: PieceRun['chunk'];
    audio?: PieceRun['audio'];
  },
): Promise<PieceManifest> {
  const { job, ctx, chunk, audio } = o;
  const parentId = parentOf(ctx);
  const store = openDestination(deps, job, parentId);
  return withStore(store, ctx.signal, async () => {
    const outDir = await o.encode();
    const queue = pieceQueue(deps, store, ctx.signal);
    const keptUnder = `${piecesPrefix(parentId)}${chunk ? `chunk-${chunk.index}` : `audio-${audio?.index ?? 0}`}/`;
    const kept = new Map<string, { key: string; contentType: string }>();
    const piece: Omit<PieceRun, 'prefix'> = {
      job,
      chunk,
      audio,
      outDir,
      queue,
      signal: ctx.signal,
      codecs: new CodecsProbes({ ffprobePath: deps.config.ffprobePath, signal: ctx.signal }),
      ffmpeg: (args, f) => runOwnFfmpeg(deps, ctx.signal, { args, ...f }),
      keep: (rel, contentType) => {
        const k = kept.get(rel) ?? { key: `${keptUnder}${rel}`, contentType };
        kept.set(rel, k);
        return k.key;
      },
    };
    const formats: Record<string, unknown> = {};
    for (const f of chunkedOutputs(job.outputs)) {
      const share = await f.chunked.collect({ ...piece, prefix: f.prefix });
      if (share !== undefined) formats[f.key] = share;
    }
    await queue.drain();
    for (const [rel, k] of kept)
      await builtin(deps).putFile(k.key, path.join(outDir, rel), {
        contentType: k.contentType,
        signal: ctx.signal,
        move: true,
      });
    const own: PieceManifest = { kind: chunk ? 'chunk' : 'audio', index: chunk?.index ?? audio?.index ?? 0, formats };
    await publishEarly(deps, { ctx, job, own, store });
    ctx.progress(1);
    return own;
  });
}
