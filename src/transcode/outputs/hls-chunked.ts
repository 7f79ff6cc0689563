import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { InternalError } from '../../lib/errors.ts';
import { AAC_CODECS, segmentPeakBound, segmentTiming } from '../encoders.ts';
import { readInitSegment, readMediaSegment } from '../mp4-boxes.ts';
import { parseMediaPlaylist } from '../playlist.ts';
import type { HlsOutput } from '../renditions.ts';
import { storageKey, type UploadQueue } from '../uploads.ts';
import type { CodecsProbes } from '../codecs.ts';
import { AAC_FRAME_SAMPLES, AUDIO_RATE, type ChunkedJob, type PieceRun, type StitchRun } from './chunked-format.ts';
import { placeFragments } from './fmp4-patch.ts';
import {
  publishMaster,
  publishMediaPlaylist,
  treeLayout,
  type HlsTree,
  type ListedSegment,
  type Published,
} from './hls-publish.ts';

// An HLS tree in a chunked run (outputs/hls-tree.ts): each piece uploads its segments to
// their final keys under their final numbers (the chunk's fMP4 fragments placed in the whole:
// fmp4-patch.ts) and keeps what its media playlists list; the stitch (VOD) and the early
// outputs (EVENT, the chunks done in a row from the first) write the playlists and the master
// with the single run's writers (hls-publish.ts).

/** One media playlist's share of a piece: a rendition (`360p0`) or an audio track (`audio/0`). */
export interface MediaPart {
  rel: string;
  segments: ListedSegment[];
  /** The init segment of an fMP4 playlist. */
  map?: string;
  /** RFC 6381, from the piece that uploaded the first segments. */
  codecs?: string;
  /** fMP4: each segment's [earliest presentation time, duration] in `timescale` ticks (DASH). */
  spans?: [number, number][];
  timescale?: number;
}

/** A tree's share of a piece: the parts of its media playlists. */
export type TreeShare = MediaPart[];

/** One tree as published from the pieces: its output and its entries (DASH is written from them). */
export interface PublishedTree {
  output: HlsOutput;
  tree: HlsTree;
  video: Published[];
  audio: Published[];
}

/** How a piece's fMP4 segments are placed in the whole (chunks and audio pieces; the first audio piece starts it). */
interface Placement {
  startSecs: number;
  /** The whole's edit list shift, in track ticks, where the piece's own init segment has none (a later audio piece's). */
  editShift?: number;
}

/** Where a piece's fragments go: a chunk at its start; a later audio piece at its first packet's decode time. */
function placementOf(piece: PieceRun): Placement | undefined {
  if (piece.chunk) return { startSecs: piece.chunk.window.startSecs };
  const w = piece.audio?.window;
  if (!w || w.startSample === 0) return undefined;
  // Its packets follow the first piece's, whose priming packet the whole's edit list skips.
  return { startSecs: (w.startSample + AAC_FRAME_SAMPLES) / AUDIO_RATE, editShift: AAC_FRAME_SAMPLES };
}

/**
 * The tree's media playlists of a piece (`dir` in its output folder): a chunk's renditions,
 * the audio piece's tracks. Their segments go up to their final keys.
 */
export async function collectTree(piece: PieceRun, dir: string): Promise<TreeShare> {
  const { job, chunk } = piece;
  const rels = chunk
    ? job.renditions.map((r) => r.name)
    : job.media.audioTracks.map((a) => treeLayout.audioDir(a.index));
  const place = placementOf(piece);
  const parts = await Promise.all(
    rels.map((rel) =>
      collectPart(
        {
          localDir: path.join(piece.outDir, dir, rel),
          keyDir: storageKey(piece.prefix, rel),
          rel,
          queue: piece.queue,
          first: ((chunk ?? piece.audio)?.index ?? 0) === 0,
          // Chunks carry video (their CODECS probed); audio pieces do not.
          video: chunk !== undefined,
          codecs: piece.codecs,
        },
        place,
      ),
    ),
  );
  if (chunk)
    checkSegments(
      job,
      chunk,
      parts.map((p) => ({ ...p, rel: `${dir}/${p.rel}` })),
    );
  return parts;
}

/**
 * A chunk before the last holds exactly its whole segments: one more or fewer would shift
 * every later segment's number, so it fails here rather than publish a broken seam.
 */
function checkSegments(job: ChunkedJob, chunk: NonNullable<PieceRun['chunk']>, parts: readonly MediaPart[]): void {
  const { keepSecs } = chunk.window;
  const first = job.renditions[0];
  if (keepSecs === undefined || !first) return;
  const expected = Math.round(keepSecs / segmentTiming(job.segmentSecs, first).segment);
  for (const p of parts)
    if (p.segments.length !== expected)
      throw new InternalError(`chunk ${chunk.index + 1}: ${p.rel} has ${p.segments.length} segments, not ${expected}`);
}

/**
 * One media playlist of a piece: its segments measured (and, for fMP4, placed and timed for
 * DASH), queued for upload under `keyDir`; with `first`, its init segment and CODECS too.
 * A playlist ffmpeg did not write (a last chunk with no frames left) has no segments.
 */
async function collectPart(
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
  const segments: ListedSegment[] = [];
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
    spans.push([timing.earliestPresentationTime - (place?.editShift ?? track.editShift), timing.duration]);
  }
  return { spans, timescale: track.timescale };
}

/** The part of a piece's share for playlist `rel`. */
export function partOf(share: TreeShare | undefined, rel: string): MediaPart {
  const part = share?.find((p) => p.rel === rel);
  if (!part) throw new InternalError(`chunked: a piece has no playlist ${rel}`);
  return part;
}

/**
 * The tree's media playlists and master from the shares of the audio pieces and of the chunks
 * (each in order): VOD once every piece is done (`ended`), else EVENT. Chunked, audio is its own
 * rendition group even with one track: chunks carry no audio.
 */
export async function publishTree(
  run: StitchRun<TreeShare>,
  o: { dir: string; ended: boolean },
): Promise<PublishedTree> {
  const { job, queue } = run;
  const tracks = job.media.audioTracks;
  const tree: HlsTree = { prefix: run.prefix, dir: o.dir, audioGroup: tracks.length > 0 };
  const media = (rel: string, parts: MediaPart[], codecs: string | undefined): Promise<Published> =>
    publishMediaPlaylist(queue, {
      rel,
      keyDir: storageKey(run.prefix, rel),
      localDir: path.join(run.localDir, rel),
      segments: parts.flatMap((p) => p.segments),
      map: parts[0]?.map,
      codecs: codecs ?? '',
      ended: o.ended,
    });
  const video = await Promise.all(
    job.renditions.map(async (r) => {
      const parts = run.chunks.map((c) => partOf(c, r.name));
      const published = await media(r.name, parts, parts[0]?.codecs);
      if (o.ended) return published;
      // Chunks still to come may cost far more than the first (an easy opening, grain later,
      // each chunk's rate its own): until then the master says the most a segment can reach.
      const bound = segmentPeakBound(r, segmentTiming(job.segmentSecs, r).segment);
      return { ...published, peak: Math.max(published.peak, bound) };
    }),
  );
  const audio = await Promise.all(
    tracks.map((a) =>
      media(
        treeLayout.audioDir(a.index),
        run.audio.map((p) => partOf(p, treeLayout.audioDir(a.index))),
        AAC_CODECS,
      ),
    ),
  );
  await queue.drain();
  const output = await publishMaster({
    renditions: job.renditions,
    media: { audioTracks: tracks, subtitles: [] },
    queue,
    tree,
    localTree: run.localDir,
    video,
    audio,
    subtitles: [],
  });
  return { output, tree, video, audio };
}
