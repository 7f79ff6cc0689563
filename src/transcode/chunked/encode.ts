import { mkdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { InternalError, isMediaplaneError, UpstreamUnavailableError } from '../../lib/errors.ts';
import type { ObjectStore } from '../../storage/index.ts';
import type { JobContext } from '../../tasks/index.ts';
import { CodecsProbes } from '../codecs.ts';
import { buildFfmpegArgs } from '../command.ts';
import { detail } from '../decode-check.ts';
import { readInitSegment, readMediaSegment } from '../mp4-boxes.ts';
import { formatsWritten, type CommandPlan } from '../outputs/index.ts';
import { parseMediaPlaylist } from '../playlist.ts';
import { ProgressParser, throttledProgress } from '../progress.ts';
import { runProcess } from '../run.ts';
import { storageKey, UploadQueue } from '../uploads.ts';
import { placeFragments } from './fmp4-patch.ts';
import { openPieceSource } from './source.ts';
import type { ChunkedDeps, MediaPart, PieceJob, SegmentEntry } from './types.ts';

// Issue #30: what the audio piece and the chunks share: one ffmpeg run over the ranged
// input (command.ts, the single run's command with the piece's plan), then each media
// playlist's segments read back, placed (fMP4), measured and uploaded to their final keys.

/** The HLS trees a piece writes, by `outputs` key. */
export const TREE_KEYS = ['hls', 'fmp4'] as const;

/** Runs the piece's ffmpeg into `<scratch>/out`; the encode is `share` of the piece's progress. */
export async function encodePiece(
  deps: ChunkedDeps,
  o: { ctx: JobContext; job: PieceJob; plan: Omit<CommandPlan, 'input'>; seconds: number; share: number },
): Promise<string> {
  const { ctx } = o;
  const outDir = path.join(ctx.scratchDir, 'out');
  const proxy = await openPieceSource(deps, o.job, ctx.signal);
  try {
    const plan: CommandPlan = { ...o.plan, input: proxy.url };
    for (const d of new Set(formatsWritten(plan).flatMap((f) => f.dirs(plan))))
      await mkdir(path.join(outDir, d), { recursive: true });
    const report = throttledProgress(ctx.progress, 1000);
    const parser = new ProgressParser((s) => o.seconds > 0 && report(o.share * Math.min(1, s / o.seconds)));
    const res = await runProcess(deps.config.ffmpegPath, buildFfmpegArgs(plan), {
      signal: ctx.signal,
      cwd: outDir,
      timeoutMs: deps.config.transcodeTimeoutMs,
      onStdout: (c) => parser.push(c),
    });
    if (res.code !== 0) {
      // The source failed under ffmpeg: that is the reason, and worth another try unless it says otherwise.
      const e = proxy.error;
      if (e)
        throw isMediaplaneError(e)
          ? e
          : new UpstreamUnavailableError(`reading the input failed: ${String(e)}`, { cause: e });
      throw new InternalError(`encoding a piece failed${detail(res.stderrTail)}`);
    }
    return outDir;
  } finally {
    await proxy.close();
  }
}

/** How a piece's fMP4 segments are placed in the whole (chunks; the audio piece starts the whole). */
export interface Placement {
  startSecs: number;
}

/**
 * One media playlist of a piece: its segments measured (and, for fMP4, placed and timed for
 * DASH), queued for upload under `keyDir`; with `first`, its init segment and CODECS too.
 * A playlist ffmpeg did not write (a last chunk with no frames left) has no segments.
 */
export async function collectPart(
  o: {
    localDir: string;
    keyDir: string;
    rel: string;
    queue: UploadQueue;
    first: boolean;
    /** Video: its CODECS are probed (audio is always AAC_CODECS). */
    video: boolean;
    codecs: CodecsProbes;
  },
  place: Placement | undefined,
): Promise<MediaPart> {
  const text = await readFile(path.join(o.localDir, 'index.m3u8'), 'utf8').catch(() => undefined);
  if (text === undefined) return { rel: o.rel, segments: [] };
  const playlist = parseMediaPlaylist(text);
  const segments: SegmentEntry[] = [];
  const timed = playlist.map ? await fragmentTiming(o.localDir, playlist.map, playlist.segments, place) : undefined;
  for (const s of playlist.segments) {
    const file = path.join(o.localDir, s.uri);
    segments.push({ uri: s.uri, duration: s.duration, bytes: (await stat(file)).size });
    o.queue.add(`${o.keyDir}/${s.uri}`, file);
  }
  const part: MediaPart = { rel: o.rel, segments, ...(timed ?? {}) };
  if (playlist.map) part.map = playlist.map;
  if (o.first && playlist.map) o.queue.add(`${o.keyDir}/${playlist.map}`, path.join(o.localDir, playlist.map));
  const sample = playlist.map ?? playlist.segments[0]?.uri;
  if (o.first && o.video && sample) part.codecs = await o.codecs.of(o.localDir, path.join(o.localDir, sample));
  return part;
}

/** fMP4 segments placed where the chunk starts, then each one's span for the DASH timeline. */
async function fragmentTiming(
  dir: string,
  map: string,
  segments: readonly { uri: string }[],
  place: Placement | undefined,
): Promise<{ spans: [number, number][]; timescale: number }> {
  const init = await readInitSegment(path.join(dir, map));
  const track = init.tracks[0];
  if (!track) throw new InternalError(`chunked: ${dir}/${map} has no track`);
  const spans: [number, number][] = [];
  for (const s of segments) {
    const file = path.join(dir, s.uri);
    if (place) {
      const number = Number.parseInt(s.uri, 10);
      await placeFragments(file, { ticks: Math.round(place.startSecs * track.timescale), sequence: number + 1 });
    }
    const timing = (await readMediaSegment(file, init)).find((t) => t.trackId === track.trackId);
    if (!timing) throw new InternalError(`chunked: ${file} has no samples of track ${track.trackId}`);
    spans.push([timing.earliestPresentationTime - track.editShift, timing.duration]);
  }
  return { spans, timescale: track.timescale };
}

/** Every tree's parts of a piece, uploaded to the job's outputs; `rels` are its playlists in a tree. */
export async function collectTrees(
  deps: ChunkedDeps,
  o: {
    job: PieceJob;
    outDir: string;
    rels: readonly string[];
    queue: UploadQueue;
    first: boolean;
    signal: AbortSignal;
  },
  place: Placement | undefined,
): Promise<Record<string, MediaPart[]>> {
  const codecs = new CodecsProbes({ ffprobePath: deps.config.ffprobePath, signal: o.signal });
  const trees: Record<string, MediaPart[]> = {};
  for (const key of TREE_KEYS) {
    const folder = o.job.outputs[key];
    if (!folder) continue;
    trees[key] = await Promise.all(
      o.rels.map((rel) =>
        collectPart(
          {
            localDir: path.join(o.outDir, key, rel),
            keyDir: storageKey(folder.path, rel),
            rel,
            queue: o.queue,
            first: o.first,
            // Chunks are placed in the whole and carry video; the audio piece is neither.
            video: place !== undefined,
            codecs,
          },
          place,
        ),
      ),
    );
  }
  return trees;
}

/**
 * Runs `fn` with the job's output store, closed after (its client freed) or discarded when
 * `fn` fails. Pieces write keys where they say (s3, the built-in store): nothing to publish.
 */
export async function withStore<T>(store: ObjectStore, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
  try {
    const result = await fn();
    await store.close(signal);
    return result;
  } catch (err) {
    await store.discard().catch(() => undefined);
    throw err;
  }
}

/** An upload queue to the job's output store; `drain()` throws its first failure. */
export function pieceQueue(deps: ChunkedDeps, store: ObjectStore, signal: AbortSignal): UploadQueue {
  return new UploadQueue({ store, signal, concurrency: deps.config.uploadConcurrency, onError: () => undefined });
}
