import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InternalError } from '../../lib/errors.ts';
import { buildTimeline, dashManifest, timelineOf, type DashInput, type SegmentTimeline } from '../dash.ts';
import type { HlsOutput } from '../renditions.ts';
import { storageKey, type UploadQueue } from '../uploads.ts';
import type { StitchRun } from './chunked-format.ts';
import type { EncodedMedia, OutputRun } from './format.ts';
import { partOf, type MediaPart, type PublishedTree, type TreeShare } from './hls-chunked.ts';
import { publishHls, type HlsTree, type Published, type TreeMedia } from './hls-publish.ts';
import { hlsTreeFormat } from './hls-tree.ts';

/** The fMP4 (CMAF) tree's result: its HLS master, and the DASH manifest over the same segments. */
export type CmafOutput = HlsOutput & { dash?: string };

/**
 * HLS with fMP4 (CMAF) segments and a DASH manifest over the same segments (`outputs.fmp4`):
 * every encoder, audio always in its own rendition group, as CMAF expects.
 */
export const fmp4 = hlsTreeFormat<'fmp4', CmafOutput>(
  {
    key: 'fmp4',
    label: 'fMP4 (HLS and DASH)',
    segments: 'fmp4',
    encoders: ['H.264', 'HEVC', 'AV1', 'VP9'],
    muxesSingleTrack: false,
  },
  publishCmaf,
  async (run, published) => ({ ...published.output, dash: await stitchDash(run, published) }),
);

/** The fMP4 tree: its HLS master, then DASH over the same segments. */
async function publishCmaf(run: OutputRun, tree: HlsTree): Promise<CmafOutput> {
  const hls = await publishHls(run, run.queue, tree);
  const dash = await publishDash(run, run.queue, tree, hls);
  return { ...hls.output, dash };
}

/**
 * The DASH manifest of the fMP4 tree, over the same init segments and fragments as its HLS
 * master: the timelines are read from the fragments themselves. Uploaded last, like a master.
 */
async function publishDash(
  enc: EncodedMedia,
  queue: UploadQueue,
  tree: HlsTree,
  published: { video: Published[]; audio: Published[] },
): Promise<string> {
  const local = (rel: string): string => path.join(enc.outDir, tree.dir, rel);
  const input = dashInput({
    ...enc,
    ...published,
    timelines: {
      video: await Promise.all(published.video.map((p) => timelineOf(local(p.rel)))),
      audio: await Promise.all(published.audio.map((p) => timelineOf(local(p.rel)))),
    },
  });
  const file = local('index.mpd');
  await writeFile(file, dashManifest(input));
  queue.add(storageKey(tree.prefix, 'index.mpd'), file);
  await queue.drain();
  return `/${storageKey(tree.prefix, 'index.mpd')}`;
}

/** A media playlist's DASH timeline from the pieces' fragments, in order. */
function chunkedTimeline(parts: readonly MediaPart[]): SegmentTimeline {
  const timescale = parts[0]?.timescale;
  if (!timescale) throw new InternalError('chunked: an fMP4 part without its timescale');
  const spans = parts.flatMap((p) => (p.spans ?? []).map(([start, duration]) => ({ start, duration })));
  return buildTimeline(spans, timescale);
}

/** A chunked run's MPD over the same segments as its HLS master: timelines from the chunks' fragments. */
async function stitchDash(run: StitchRun<TreeShare>, published: PublishedTree): Promise<string> {
  const { job } = run;
  const input = dashInput({
    renditions: job.renditions,
    media: { audioTracks: job.media.audioTracks, subtitles: [] },
    video: published.video,
    audio: published.audio,
    timelines: {
      video: job.renditions.map((r) => chunkedTimeline(run.chunks.map((c) => partOf(c, r.name)))),
      audio: published.audio.map((a) => chunkedTimeline(run.audio.map((p) => partOf(p, a.rel)))),
    },
  });
  const file = path.join(run.localDir, 'index.mpd');
  await writeFile(file, dashManifest(input));
  const key = storageKey(published.tree.prefix, 'index.mpd');
  run.queue.add(key, file);
  await run.queue.drain();
  return `/${key}`;
}

/**
 * What the MPD lists: each rendition and audio track with its HLS entry's bandwidth and
 * codecs and its timeline. Shared by the single run and the chunked stitch.
 */
function dashInput(
  o: TreeMedia & {
    video: readonly Published[];
    audio: readonly Published[];
    timelines: { video: readonly SegmentTimeline[]; audio: readonly SegmentTimeline[] };
  },
): DashInput {
  const at = <T>(list: readonly T[], i: number): T => {
    const x = list[i];
    if (x === undefined) throw new InternalError(`dash: no entry ${i} of ${list.length}`);
    return x;
  };
  return {
    video: o.renditions.map((r, i) => {
      const p = at(o.video, i);
      const { width, height, fps } = r;
      return {
        name: r.name,
        dir: p.rel,
        bandwidth: p.peak,
        width,
        height,
        fps,
        codecs: p.codecs,
        timeline: at(o.timelines.video, i),
      };
    }),
    audio: o.media.audioTracks.map((a, i) => {
      const p = at(o.audio, i);
      const labels = { lang: a.language, label: a.title, default: a.default };
      const timeline = at(o.timelines.audio, i);
      return { dir: p.rel, ...labels, channels: 2, sampleRate: 48000, bandwidth: p.peak, codecs: p.codecs, timeline };
    }),
    subtitles: o.media.subtitles.map((s) => ({
      uri: `subtitles/${s.index}/0.vtt`,
      lang: s.language,
      label: s.title,
      default: s.default,
    })),
  };
}
