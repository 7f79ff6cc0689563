// After the encode: each HLS tree's media playlists, its alternate audio and subtitle
// renditions, and its master playlist last, once everything the master names is uploaded.
// Shared by the two HLS trees (outputs/hls.ts, outputs/fmp4.ts).
import { readFile, stat, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { UnsupportedMediaError } from '../../lib/errors.ts';
import { settledAll } from '../../lib/settled.ts';
import { AAC_CODECS, AUDIO_BITRATE } from '../encoders.ts';
import {
  finalPlaylist,
  masterPlaylist,
  parseMediaPlaylist,
  subtitlePlaylist,
  type MediaRendition,
  type Variant,
} from '../playlist.ts';
import { value, type AudioTrack } from '../probe.ts';
import { renditionOutput, type AudioOutput, type HlsOutput, type SubtitleOutput } from '../renditions.ts';
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
  const master = path.join(localTree, 'index.m3u8');
  await writeFile(master, masterPlaylist(variants(enc, video, audio), mediaRenditions(enc, tree), true));
  queue.add(storageKey(tree.prefix, 'index.m3u8'), master);
  await queue.drain();
  const output: HlsOutput = {
    path: `/${storageKey(tree.prefix, 'index.m3u8')}`,
    renditions: enc.renditions.map((r, i) =>
      renditionOutput(r, `/${video[i]?.keyDir}/index.m3u8`, video[i]?.bytes ?? 0),
    ),
    ...(audio.length > 0 ? { audio: audioOutputs(enc.media.audioTracks, audio) } : {}),
    ...(subtitles.length > 0 ? { subtitles } : {}),
  };
  return { output, video, audio };
}

/** The master's variants: each video rendition with its audio group's cost, or audio alone. */
function variants(enc: EncodedMedia, video: Published[], audio: Published[]): Variant[] {
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
function mediaRenditions(enc: EncodedMedia, tree: HlsTree): MediaRendition[] {
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
  await writeFile(
    playlistFile,
    finalPlaylist(
      text,
      playlist.segments.map((s) => s.duration),
    ),
  );
  if (playlist.map) queue.add(`${keyDir}/${playlist.map}`, path.join(localDir, playlist.map));
  queue.add(`${keyDir}/index.m3u8`, playlistFile);
  const stats = await segmentStats(localDir, playlist.segments);
  const sample = path.join(localDir, playlist.map ?? playlist.segments[0]?.uri ?? '');
  const codecs = isVideo ? await enc.codecs.of(localDir, sample) : AAC_CODECS;
  return { rel, keyDir, ...stats, codecs };
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

async function segmentStats(
  dir: string,
  segments: { uri: string; duration: number }[],
): Promise<{ peak: number; average: number; bytes: number }> {
  let bytes = 0;
  let seconds = 0;
  let peak = 0;
  for (const s of segments) {
    const { size } = await stat(path.join(dir, s.uri));
    bytes += size;
    seconds += s.duration;
    // A last segment of a few frames says little about the peak; it still counts in the average.
    if (s.duration >= 0.5 || segments.length === 1) peak = Math.max(peak, (size * 8) / Math.max(s.duration, 0.001));
  }
  return { peak: Math.round(peak), average: Math.round((bytes * 8) / Math.max(seconds, 0.001)), bytes };
}
