import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { withTimestampMap } from '../playlist.ts';
import type { SubtitleTrack } from '../probe.ts';
import { storageKey } from '../uploads.ts';
import { chunkedBehaviour, type StitchRun } from './chunked-format.ts';
import { adtsToMp4, type CommandPlan, type Encoder, type OutputFormat, type OutputRun } from './format.ts';
import { collectTree, publishTree, type PublishedTree, type TreeShare } from './hls-chunked.ts';
import { treeLayout, type HlsTree } from './hls-publish.ts';

// An HLS tree (outputs/hls.ts with TS segments, outputs/fmp4.ts with fMP4 ones): one media
// playlist per rendition and per audio group track under `<key>/`, uploaded segment by
// segment while ffmpeg writes them, then a master playlist. Chunked, each piece uploads its
// segments and the stitch writes the playlists (hls-chunked.ts).

export interface TreeOptions<Key extends string> {
  key: Key;
  label: string;
  segments: 'ts' | 'fmp4';
  encoders: readonly Encoder[];
  /**
   * A video with one audio track keeps it muxed into each rendition, as players of plain HLS
   * expect; otherwise (and always for a CMAF tree) audio is its own rendition group.
   */
  muxesSingleTrack: boolean;
}

/**
 * An HLS tree's format; `publish` says what it uploads after the encode, `stitch` what a
 * chunked run adds once the tree's playlists are written from the pieces.
 */
export function hlsTreeFormat<Key extends string, Result>(
  o: TreeOptions<Key>,
  publish: (run: OutputRun, tree: HlsTree) => Promise<Result>,
  stitch: (run: StitchRun<TreeShare>, published: PublishedTree) => Promise<Result>,
): OutputFormat<Key, Result, true> {
  const dir = o.key;
  const fmp4 = o.segments === 'fmp4';
  const segment = fmp4 ? '%d.m4s' : '%d.ts';
  const muxed = (plan: CommandPlan): boolean =>
    o.muxesSingleTrack && plan.probe.audioTracks.length === 1 && plan.renditions.length > 0;
  const audioGroup = (plan: CommandPlan): boolean => plan.probe.audioTracks.length > 0 && !muxed(plan);
  /** Each media playlist of the tree, relative to it: the renditions', then the audio group's. */
  const playlists = (plan: CommandPlan): string[] => [
    ...plan.renditions.map((r) => r.name),
    ...(audioGroup(plan) ? plan.probe.audioTracks.map((a) => treeLayout.audioDir(a.index)) : []),
  ];
  const target = (plan: CommandPlan, cutAt: number, rel: string, select: string): string =>
    `[${fmp4 ? adtsToMp4(plan) : ''}${select}f=hls:${hlsOptions(cutAt, `${dir}/${rel}/${segment}`, fmp4)}${chunkOptions(plan, fmp4)}]${dir}/${rel}/index.m3u8`;
  return {
    key: o.key,
    label: o.label,
    requested: true,
    encoders: o.encoders,
    reservedNames: treeLayout.folders,
    tree: true,
    segments: o.segments,
    writes: (plan) => !!plan.kinds[o.key],
    dirs: (plan) => [
      ...playlists(plan).map((rel) => `${dir}/${rel}`),
      ...(plan.probe.subtitles.length > 0 ? ['subtitles'] : []),
    ],
    videoTarget: (plan, r, cutAt) => target(plan, cutAt, r.name, muxed(plan) ? "select=\\'v,a\\':" : 'select=v:'),
    muxesAudio: muxed,
    audioTarget: (plan, track, cutAt) =>
      audioGroup(plan) ? target(plan, cutAt, treeLayout.audioDir(track.index), '') : undefined,
    open: (run, prefix) => ({
      watched: playlists(run.plan).map((rel) => ({
        local: path.join(run.outDir, dir, rel, 'index.m3u8'),
        keyDir: storageKey(prefix, rel),
      })),
      publish: async () => {
        await subtitlesReady(run);
        return publish(run, { prefix, dir, audioGroup: audioGroup(run.plan) });
      },
    }),
    chunked: chunkedBehaviour<TreeShare, Result>({
      collect: (piece) => collectTree(piece, dir),
      early: async (run) => {
        await publishTree(run, { dir, ended: false });
      },
      stitch: async (run) => stitch(run, await publishTree(run, { dir, ended: true })),
    }),
  };
}

function hlsOptions(cutAt: number, segmentFile: string, fmp4: boolean): string {
  const opts = [
    `hls_time=${cutAt.toFixed(6)}`,
    'hls_list_size=0',
    'hls_playlist_type=event',
    'hls_flags=independent_segments+temp_file',
  ];
  if (fmp4) opts.push('hls_segment_type=fmp4', 'hls_fmp4_init_filename=init.mp4');
  opts.push(`hls_segment_filename=${segmentFile}`);
  return opts.join(':');
}

/**
 * A chunk's (or an audio piece's) segments are numbered on from the pieces before it, and its TS
 * timestamps placed where it starts in the whole: the hls muxer first shifts the chunk to
 * start at 0 (make_zero: as a whole run's muxer shifts its negative B-frame decode times),
 * then its TS muxer adds the chunk's start, so a seam matches a single run's packets exactly.
 * fMP4 segments are written as a single run's first ones and their tfdt patched after
 * (fmp4-patch.ts, from hls-chunked.ts): the init segment stays the whole run's.
 */
function chunkOptions(plan: CommandPlan, fmp4: boolean): string {
  const c = plan.chunk ?? plan.audioPiece;
  if (!c) return '';
  const number = `:start_number=${c.firstSegment}`;
  return fmp4
    ? number
    : `${number}:avoid_negative_ts=make_zero:hls_ts_options=output_ts_offset=${c.startSecs.toFixed(6)}`;
}

/**
 * Each text subtitle track as one WebVTT file, written once for every HLS tree (and DASH)
 * that lists it; a job without an HLS tree has nothing to list them in.
 */
export function subtitleArgs(tracks: readonly SubtitleTrack[]): string[] {
  return tracks.flatMap((s) => [
    '-map',
    `0:s:${s.index}`,
    '-map_metadata',
    '-1',
    '-c:s',
    'webvtt',
    '-f',
    'webvtt',
    treeLayout.subtitleFile(s.index),
  ]);
}

// The WebVTT files both trees list are readied once per job, before either uploads them.
const subtitlesOf = new WeakMap<OutputRun, Promise<void>>();

function subtitlesReady(run: OutputRun): Promise<void> {
  let ready = subtitlesOf.get(run);
  if (!ready) {
    ready = prepareSubtitles(run);
    subtitlesOf.set(run, ready);
  }
  return ready;
}

/** The WebVTT files ffmpeg converted, readied for HLS players. */
async function prepareSubtitles(run: OutputRun): Promise<void> {
  for (const s of run.media.subtitles) {
    const file = path.join(run.outDir, treeLayout.subtitleFile(s.index));
    await writeFile(file, withTimestampMap(await readFile(file, 'utf8')));
  }
}
