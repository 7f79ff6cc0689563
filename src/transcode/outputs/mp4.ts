import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { InternalError } from '../../lib/errors.ts';
import { settledAll } from '../../lib/settled.ts';
import { signMp4 } from '../c2pa.ts';
import { AUDIO_BITRATE, trackLabels } from '../encoders.ts';
import { renditionOutput, type AudioOutput, type RenditionOutput } from '../renditions.ts';
import { StreamedMp4 } from '../streamed-mp4.ts';
import { storageKey } from '../uploads.ts';
import { chunkedBehaviour, type StitchRun } from './chunked-format.ts';
import { joinMp4s } from './mp4-join.ts';
import {
  adtsToMp4,
  audioCodecArgs,
  audioSource,
  type CommandPlan,
  type OutputFormat,
  type OutputRun,
} from './format.ts';

/** Where ffmpeg writes the MP4s, relative to the job's output folder. */
export const layout = {
  mp4File: (r: string): string => `mp4/${r}.mp4`,
  /** An audio-only input's MP4 output. */
  audioMp4: 'mp4/audio.m4a',
} as const;

export type Mp4Output = (RenditionOutput | AudioOutput)[];

/**
 * One faststart MP4 per rendition with every audio track (`outputs.mp4`), or an audio-only
 * input's `audio.m4a`; the only files C2PA signs (issue 5).
 */
export const mp4: OutputFormat<'mp4', Mp4Output, true> = {
  key: 'mp4',
  label: 'MP4',
  requested: true,
  encoders: ['H.264', 'HEVC', 'AV1', 'VP9'],
  signs: true,
  writes: (plan) => !!plan.kinds.mp4,
  dirs: () => ['mp4'],
  muxesAudio: () => true,
  videoTarget: (_plan, r) => `[f=mp4:movflags=+faststart]${layout.mp4File(r.name)}`,
  // An audio-only input's one track goes into the tee of its audio-group encode (command.ts):
  // encoded once for the HLS trees and the `.m4a` alike; with more tracks the `.m4a` holds
  // them all and is an output of its own.
  audioTarget: (plan) =>
    oneTrackAudioOnly(plan) ? `[${adtsToMp4(plan)}f=mp4:movflags=+faststart]${layout.audioMp4}` : undefined,
  outputArgs: (plan) => (plan.renditions.length === 0 && !oneTrackAudioOnly(plan) ? audioOnlyMp4Args(plan) : []),
  open: (run, prefix) => {
    const streams = streamedMp4s(run, prefix);
    return {
      poll: (onError) => {
        for (const s of streams.values()) s.poll(onError);
      },
      publish: () => uploadMp4s(run, streams, prefix),
    };
  },
  // Chunked: each chunk keeps its part of every rendition and each audio piece its `.m4a`;
  // the stitch joins them without encoding again.
  chunked: chunkedBehaviour<Mp4Share, Mp4Output>({
    collect: async (piece) => {
      if (piece.chunk)
        return Object.fromEntries(
          piece.job.renditions.map((r) => [r.name, piece.keep(layout.mp4File(r.name), 'video/mp4')]),
        );
      return piece.job.media.audioTracks.length > 0 ? { audio: piece.keep(layout.audioMp4, 'audio/mp4') } : undefined;
    },
    stitch: stitchMp4s,
  }),
};

/** The built-in store's keys of a piece's MP4 parts, by rendition name (`audio`: an audio piece's `.m4a`). */
type Mp4Share = Record<string, string>;

/**
 * One faststart MP4 per rendition from a chunked run: its chunks' parts and the audio pieces'
 * `.m4a` parts joined in Node (mp4-join.ts: the parts' packets as they are, in one pass), then
 * signed when the job asks. The audio tracks keep the labels the audio pieces gave them.
 */
async function stitchMp4s(run: StitchRun<Mp4Share>): Promise<Mp4Output> {
  const { job, localDir: dir } = run;
  await mkdir(path.join(dir, 'parts'), { recursive: true });
  const audio = job.media.audioTracks.length > 0 ? await audioParts(run) : [];
  // The single run's manifests name the input as their parent, by its hash: so do these.
  const c2pa = run.c2pa ? { signer: run.c2pa.signer, parent: { path: await run.c2pa.parent() } } : undefined;
  const out: Mp4Output = [];
  for (const r of job.renditions) {
    const keys = run.chunks.map((c) => c[r.name] ?? '');
    if (keys.some((k) => k === '')) throw new InternalError(`chunked: a chunk has no MP4 part of ${r.name}`);
    const video = await fetchParts(run, keys, r.name);
    const file = path.join(dir, `${r.name}.mp4`);
    await joinMp4s({ sequences: audio.length > 0 ? [video, audio] : [video], output: file, signal: run.signal });
    // The rendition's parts are in its file now: a film's parts need not wait on the disk.
    await Promise.all(video.map((f) => rm(f, { force: true })));
    if (c2pa) await signMp4({ input: file, output: file, title: r.name, ...c2pa, signal: run.signal });
    const key = storageKey(run.prefix, `${r.name}.mp4`);
    run.queue.add(key, file);
    out.push({ ...renditionOutput(r, `/${key}`, 0), ...(c2pa ? { signed: true } : {}) });
  }
  await run.queue.drain();
  return out.map((o) => ({ ...o, size: run.queue.sizes.get(o.path.slice(1)) ?? 0 }));
}

/**
 * The audio pieces' `.m4a` parts, in order: the first part's priming packet and edit list
 * begin the audio; the others start at their first kept packet, so their packets follow on.
 */
async function audioParts(run: StitchRun<Mp4Share>): Promise<string[]> {
  const keys = run.audio.map((a) => a.audio ?? '');
  if (keys.some((k) => k === '')) throw new InternalError('chunked: an audio piece has no MP4 part');
  return fetchParts(run, keys, 'audio');
}

/** Kept parts fetched to the format's folder, in order. */
async function fetchParts(run: StitchRun<Mp4Share>, keys: readonly string[], name: string): Promise<string[]> {
  const files: string[] = [];
  for (const [i, key] of keys.entries())
    files.push(await run.fetchKept(key, path.join(run.localDir, 'parts', `${name}-${i}.mp4`)));
  return files;
}

function oneTrackAudioOnly(plan: CommandPlan): boolean {
  return plan.renditions.length === 0 && plan.probe.audioTracks.length === 1;
}

/** An audio-only input's (or an audio piece's) MP4 output: every track in one `.m4a`. */
function audioOnlyMp4Args(plan: CommandPlan): string[] {
  const tracks = plan.probe.audioTracks;
  const maps = tracks.flatMap((a) => ['-map', audioSource(plan, a)]);
  return [
    ...maps,
    '-map_metadata',
    '-1',
    ...audioCodecArgs(plan),
    ...trackLabels(tracks),
    '-movflags',
    '+faststart',
    layout.audioMp4,
  ];
}

/** An MP4 per rendition that can go up during the encode: S3-like stores, and no C2PA (it signs the finished file). */
function streamedMp4s(run: OutputRun, prefix: string): Map<string, StreamedMp4> {
  const parts = run.store.parts;
  const out = new Map<string, StreamedMp4>();
  if (!parts || run.c2pa) return out;
  for (const r of run.renditions) {
    const s = new StreamedMp4({
      parts,
      key: storageKey(prefix, `${r.name}.mp4`),
      file: path.join(run.outDir, layout.mp4File(r.name)),
      put: { contentType: 'video/mp4', signal: run.signal },
    });
    run.queue.whenAbandoned(() => s.abandon());
    out.set(r.name, s);
  }
  return out;
}

/** Issue 5 hook: C2PA-sign each MP4 in place before upload; a signing failure fails the task. */
async function signAll(run: OutputRun, files: readonly string[]): Promise<void> {
  const c2pa = run.c2pa;
  if (!c2pa) return;
  for (const [i, rel] of files.entries()) {
    const file = path.join(run.outDir, rel);
    const parent = { path: run.plan.input, ...(c2pa.inputTitle ? { title: c2pa.inputTitle } : {}) };
    const title = run.renditions[i]?.name ?? 'audio';
    await signMp4({ input: file, output: file, title, parent, signer: c2pa.signer, signal: run.jobSignal });
  }
}

/** The MP4 outputs: one per rendition, or an audio-only input's `audio.m4a`. */
async function uploadMp4s(run: OutputRun, streams: Map<string, StreamedMp4>, prefix: string): Promise<Mp4Output> {
  const { queue, renditions } = run;
  const files = renditions.length > 0 ? renditions.map((r) => layout.mp4File(r.name)) : [layout.audioMp4];
  await signAll(run, files);
  const key = (rel: string): string => storageKey(prefix, path.basename(rel));
  const streamed = new Map<string, number>();
  await settledAll(
    files.map(async (rel, i) => {
      const stream = streams.get(renditions[i]?.name ?? '');
      const size = await stream?.finish();
      if (size === undefined) return queue.add(key(rel), path.join(run.outDir, rel));
      streamed.set(key(rel), size);
      run.log?.debug(
        { rendition: renditions[i]?.name, size, partsDuringEncode: stream?.earlyParts },
        'mp4 uploaded while encoding',
      );
    }),
  );
  await queue.drain();
  const size = (rel: string): number => streamed.get(key(rel)) ?? queue.sizes.get(key(rel)) ?? 0;
  const signed = run.c2pa ? { signed: true } : {};
  if (renditions.length === 0)
    return [
      {
        name: 'audio',
        path: `/${key(layout.audioMp4)}`,
        bitrate: AUDIO_BITRATE,
        size: size(layout.audioMp4),
        ...signed,
      },
    ];
  return renditions.map((r) => ({
    ...renditionOutput(r, `/${key(layout.mp4File(r.name))}`, size(layout.mp4File(r.name))),
    ...signed,
  }));
}
