// After the encode: each HLS tree's media playlists, its alternate audio and subtitle
// renditions, and its master playlist last, once everything the master names is uploaded.
// Shared by the two HLS trees (outputs/hls.ts, outputs/fmp4.ts).
import { readFile, stat, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { UnsupportedMediaError } from '../../lib/errors.ts';
import { settledAll } from '../../lib/settled.ts';
import { AAC_CODECS, AUDIO_BITRATE } from '../encoders.ts';
import {
  masterPlaylist,
  mediaPlaylist,
  parseMediaPlaylist,
  subtitlePlaylist,
  type MediaRendition,
  type Variant,
} from '../playlist.ts';
import { value, type AudioTrack, type MediaInfo } from '../probe.ts';
import {
  renditionOutput,
  type AudioOutput,
  type HlsOutput,
  type Rendition,
  type SubtitleOutput,
} from '../renditions.ts';
import { storageKey, type UploadQueue } from '../uploads.ts';
import type { EncodedMedia } from './format.ts';

/** Where ffmpeg writes the parts an HLS tree lists beside its renditions, relative to the job's output folder. */
export const treeLayout = {
  /** Audio rendition `i` of an HLS tree, relative to the tree. */
  audioDir: (i: number): string => `audio/${i}`,
  /** Subtitle track `i` as one WebVTT file, shared by every HLS tree that lists it. */
  subtitleFile: (i: number): string => `subtitles/${i}.vtt`,
  /** The folders beside the renditions that hold them. */
  folders: ['audio', 'subtitles'],
} as const;

/** One HLS tree: `hls` (TS segments) or `fmp4`, uploaded under `prefix`. */
export interface HlsTree {
  prefix: string;
  dir: string;
  /** Audio in its own rendition group (else muxed into the video renditions, or none). */
  audioGroup: boolean;
}

/** A published media playlist: what its master entry needs. */
export interface Published {
  /** Relative to the tree, e.g. `360p0` or `audio/0`. */
  rel: string;
  keyDir: string;
  bytes: number;
  peak: number;
  average: number;
  codecs: string;
}

/**
 * Uploads one tree's playlists (with honest target durations), its subtitle renditions and
 * then its master. Returns what the task output lists and what DASH is written from.
 */
export async function publishHls(
  enc: EncodedMedia,
  queue: UploadQueue,
  tree: HlsTree,
): Promise<{ output: HlsOutput; video: Published[]; audio: Published[] }> {
  const localTree = path.join(enc.outDir, tree.dir);
  const [video, audio, subtitles] = await settledAll([
    settledAll(enc.renditions.map((r) => publishMedia(enc, queue, tree, r.name, true))),
    settledAll(
      tree.audioGroup
        ? enc.media.audioTracks.map((a) => publishMedia(enc, queue, tree, treeLayout.audioDir(a.index), false))
        : [],
    ),
    publishSubtitles(enc, queue, tree),
  ] as const);
  await queue.drain();
  const output = await publishMaster({ ...enc, queue, tree, localTree, video, audio, subtitles });
  return { output, video, audio };
}

/** What a tree's master lists (issue #30: the single run's encode or a chunked run's pieces). */
export interface TreeMedia {
  renditions: readonly Rendition[];
  media: Pick<MediaInfo, 'audioTracks' | 'subtitles'>;
}

/**
 * Writes and uploads a tree's master once its media playlists are in the bucket, and says
 * what the task output lists. Shared by the single run and the chunked stitch (issue #30).
 */
export async function publishMaster(
  o: TreeMedia & {
    queue: UploadQueue;
    tree: HlsTree;
    localTree: string;
    video: Published[];
    audio: Published[];
    subtitles: SubtitleOutput[];
  },
): Promise<HlsOutput> {
  const { queue, tree, video, audio, subtitles } = o;
  const master = path.join(o.localTree, 'index.m3u8');
  await mkdir(o.localTree, { recursive: true });
  await writeFile(master, masterPlaylist(variants(o, video, audio), mediaRenditions(o, tree), true));
  queue.add(storageKey(tree.prefix, 'index.m3u8'), master);
  await queue.drain();
  return {
    path: `/${storageKey(tree.prefix, 'index.m3u8')}`,
    renditions: o.renditions.map((r, i) => renditionOutput(r, `/${video[i]?.keyDir}/index.m3u8`, video[i]?.bytes ?? 0)),
    ...(audio.length > 0 ? { audio: audioOutputs(o.media.audioTracks, audio) } : {}),
    ...(subtitles.length > 0 ? { subtitles } : {}),
  };
}

/** One segment as a media playlist lists it, with the bytes its bandwidths are measured from. */
export interface ListedSegment {
  uri: string;
  duration: number;
  bytes: number;
}

/**
 * Writes one media playlist to `localDir/index.m3u8` and queues it for `keyDir`, and says what
 * its master entry needs. Shared by the single run and the chunked stitch (issue #30).
 */
export async function publishMediaPlaylist(
  queue: UploadQueue,
  o: {
    rel: string;
    keyDir: string;
    localDir: string;
    segments: readonly ListedSegment[];
    map?: string | undefined;
    codecs: string;
    ended: boolean;
  },
): Promise<Published> {
  const file = path.join(o.localDir, 'index.m3u8');
  await mkdir(o.localDir, { recursive: true });
  await writeFile(file, mediaPlaylist({ segments: o.segments, map: o.map, ended: o.ended }));
  queue.add(`${o.keyDir}/index.m3u8`, file);
  return { rel: o.rel, keyDir: o.keyDir, ...segmentStats(o.segments), codecs: o.codecs };
}

/** The master's variants: each video rendition with its audio group's cost, or audio alone. */
function variants(enc: TreeMedia, video: Published[], audio: Published[]): Variant[] {
  const main = audio[enc.media.audioTracks.findIndex((a) => a.default)] ?? audio[0];
  if (enc.renditions.length === 0) {
    if (!main) return [];
    return [{ uri: `${main.rel}/index.m3u8`, ...bandwidths(main), codecs: AAC_CODECS }];
  }
  const audioPeak = Math.max(0, ...audio.map((a) => a.peak));
  return enc.renditions.map((r, i) => {
    const v = video[i] as Published;
    return {
      uri: `${r.name}/index.m3u8`,
      bandwidth: v.peak + audioPeak,
      averageBandwidth: v.average + (main?.average ?? 0),
      video: { width: r.width, height: r.height, frameRate: value(r.fps) },
      codecs: main ? `${v.codecs},${AAC_CODECS}` : v.codecs,
    };
  });
}

function bandwidths(p: Published): { bandwidth: number; averageBandwidth: number } {
  return { bandwidth: p.peak, averageBandwidth: p.average };
}

/** EXT-X-MEDIA entries: alternate audio (not for an audio-only input's single track) and subtitles. */
function mediaRenditions(enc: TreeMedia, tree: HlsTree): MediaRendition[] {
  const tracks = enc.media.audioTracks;
  const listAudio = tree.audioGroup && (enc.renditions.length > 0 || tracks.length > 1);
  const audio: MediaRendition[] = listAudio
    ? tracks.map((a) => ({
        type: 'AUDIO',
        uri: `${treeLayout.audioDir(a.index)}/index.m3u8`,
        name: trackName(a.title, a.language, a.index, 'Audio'),
        language: a.language,
        default: a.default,
        channels: 2,
      }))
    : [];
  const subs: MediaRendition[] = enc.media.subtitles.map((s, i) => ({
    type: 'SUBTITLES',
    uri: `subtitles/${s.index}/index.m3u8`,
    name: trackName(s.title, s.language, i, 'Subtitles'),
    language: s.language,
    default: s.default,
    forced: s.forced,
  }));
  return [...audio, ...subs];
}

/** A name unique in its group (RFC 8216 4.3.4.1.1): the title, else the language, numbered. */
function trackName(title: string | undefined, language: string | undefined, i: number, kind: string): string {
  return `${title ?? language ?? kind} ${i + 1}`;
}

function audioOutputs(tracks: readonly AudioTrack[], published: Published[]): AudioOutput[] {
  return tracks.map((a, i) => {
    const p = published[i] as Published;
    return {
      name: treeLayout.audioDir(a.index),
      path: `/${p.keyDir}/index.m3u8`,
      bitrate: AUDIO_BITRATE,
      size: p.bytes,
      ...(a.language ? { language: a.language } : {}),
      default: a.default,
    };
  });
}

/** One media playlist (video rendition or audio track) finalized and queued with its init segment. */
async function publishMedia(
  enc: EncodedMedia,
  queue: UploadQueue,
  tree: HlsTree,
  rel: string,
  isVideo: boolean,
): Promise<Published> {
  const localDir = path.join(enc.outDir, tree.dir, rel);
  const keyDir = storageKey(tree.prefix, rel);
  const playlistFile = path.join(localDir, 'index.m3u8');
  const text = await readFile(playlistFile, 'utf8');
  const playlist = parseMediaPlaylist(text);
  if (playlist.segments.length === 0)
    throw new UnsupportedMediaError(
      `the ${isVideo ? 'video' : 'audio'} could not be decoded: no ${isVideo ? 'frames' : 'samples'} came out of it`,
    );
  const segments = await Promise.all(
    playlist.segments.map(async (s) => ({ ...s, bytes: (await stat(path.join(localDir, s.uri))).size })),
  );
  if (playlist.map) queue.add(`${keyDir}/${playlist.map}`, path.join(localDir, playlist.map));
  const sample = path.join(localDir, playlist.map ?? playlist.segments[0]?.uri ?? '');
  const codecs = isVideo ? await enc.codecs.of(localDir, sample) : AAC_CODECS;
  return publishMediaPlaylist(queue, { rel, keyDir, localDir, segments, map: playlist.map, codecs, ended: true });
}

/**
 * Each text subtitle track as a rendition of the tree: a one-entry media playlist naming the
 * track's WebVTT file (converted by the same ffmpeg run).
 */
async function publishSubtitles(enc: EncodedMedia, queue: UploadQueue, tree: HlsTree): Promise<SubtitleOutput[]> {
  const out: SubtitleOutput[] = [];
  for (const s of enc.media.subtitles) {
    const rel = `subtitles/${s.index}`;
    const localDir = path.join(enc.outDir, tree.dir, rel);
    await mkdir(localDir, { recursive: true });
    await writeFile(path.join(localDir, 'index.m3u8'), subtitlePlaylist('0.vtt', enc.duration));
    const keyDir = storageKey(tree.prefix, rel);
    queue.add(`${keyDir}/0.vtt`, path.join(enc.outDir, treeLayout.subtitleFile(s.index)));
    queue.add(`${keyDir}/index.m3u8`, path.join(localDir, 'index.m3u8'));
    out.push({
      path: `/${keyDir}/index.m3u8`,
      file: `/${keyDir}/0.vtt`,
      ...(s.language ? { language: s.language } : {}),
      default: s.default,
    });
  }
  return out;
}

/** Peak and average bits per second of a media playlist's segments, and their bytes. */
function segmentStats(segments: readonly ListedSegment[]): { peak: number; average: number; bytes: number } {
  let bytes = 0;
  let seconds = 0;
  let peak = 0;
  for (const s of segments) {
    bytes += s.bytes;
    seconds += s.duration;
    // A last segment of a few frames says little about the peak; it still counts in the average.
    if (s.duration >= 0.5 || segments.length === 1) peak = Math.max(peak, (s.bytes * 8) / Math.max(s.duration, 0.001));
  }
  return { peak: Math.round(peak), average: Math.round((bytes * 8) / Math.max(seconds, 0.001)), bytes };
}
