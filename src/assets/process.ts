import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import { InternalError } from '../lib/errors.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import type { InputSource } from '../storage/index.ts';
import type { JobContext, SPLIT } from '../tasks/index.ts';
import {
  type C2paSigner,
  type FinishStep,
  type FinishSteps,
  type JobSpec,
  type MediaInfo,
  type ReadInput,
  runJob,
  type TranscodeFileOutput,
} from '../transcode/index.ts';
import { assetPrefix, assetSourceKey } from './keys.ts';
import { assetOutputs, type ProcessingSpec } from './processing.ts';
import type { AssetOutput, AssetTrack } from './types.ts';

// An asset is made by a transcode whose outputs go to the asset's place, `asset/<playbackId>/`
// in the built-in store, through the job entry every video takes (transcode/job.ts): one
// probe, one plan, chunking and per-title as for any transcode. What is the asset's own is
// its finish step: the source's size and hashes and its videoSpec (read once, as the input
// is read), the source kept at its key (the downloadUrl), and the AssetOutput that the
// trigger of migration 010 copies onto the asset, made once whether the run was single or
// chunked (then by the stitch). A task writes only under its own asset's prefix, so running
// it again (a retry, a lost lease) is safe.

export interface AssetProcessingDeps {
  config: Config;
  store: BuiltinStore;
  log?: Logger;
  /** Issue 5: signs the MP4s of assets with `c2pa: true`; undefined when signing is not configured. */
  c2paSigner?: C2paSigner | undefined;
}

/** The asset's finish step's kind among a worker's finish steps. */
export const ASSET_FINISH = 'asset';

/** What the finish step is told: the asset's playbackId, and its source as the job entry read it. */
interface AssetFinishParams {
  playbackId: string;
  media: MediaInfo;
  digest: Digest;
}

interface Digest {
  size: number;
  md5: string;
  sha256: string;
}

/** The finish steps assets add to a worker's (main.ts): a chunked asset is finished by its stitch. */
export function assetFinishSteps(): FinishSteps {
  return { [ASSET_FINISH]: finishAsset };
}

/**
 * The asset `playbackId` made of `source`. With `keepSource` the source is then stored
 * (moved) at the asset's source key, its downloadUrl; without, it is there already (a
 * direct upload). SPLIT when the job was split into pieces (a long source on a worker).
 */
export async function makeAsset(
  d: AssetProcessingDeps,
  o: {
    assetId: string;
    playbackId: string;
    source: InputSource;
    keepSource: boolean;
    spec: ProcessingSpec;
    ctx: JobContext;
    /** The worker's handlers: a long source may be split into pieces. */
    canSplit: boolean;
  },
): Promise<AssetOutput | typeof SPLIT> {
  const log = o.ctx.log ?? d.log;
  const job: JobSpec = {
    input: { source: o.source, ...(o.keepSource ? {} : { storedAt: assetSourceKey(o.playbackId) }) },
    place: { builtinPrefix: assetPrefix(o.playbackId) },
    outputs: assetOutputs(o.spec),
    profiles: o.spec.profiles,
    segmentSecs: o.spec.targetSegmentSizeSecs,
    c2pa: o.spec.c2pa,
    finish: {
      kind: ASSET_FINISH,
      prepare: async (input: ReadInput, signal: AbortSignal) => {
        const digest = await digestOf(input.path, signal);
        log?.info({ asset: o.assetId, size: digest.size, format: input.media.formatName }, 'asset source read');
        const params: AssetFinishParams = { playbackId: o.playbackId, media: input.media, digest };
        const keep = o.keepSource
          ? { key: assetSourceKey(o.playbackId), contentType: contentTypeOf(input.media) }
          : undefined;
        return { params: { ...params }, keep };
      },
    },
  };
  const deps = { ...d, builtinStore: d.store, finishSteps: assetFinishSteps() };
  const output = await runJob(deps, job, o.ctx, { canSplit: o.canSplit });
  // The finish step above made it (finishAsset).
  return output as AssetOutput | typeof SPLIT;
}

/** The asset's finish step: the outputs as the asset keeps them. */
const finishAsset: FinishStep = async ({ output, params }) => assetOutput({ ...finishParams(params), result: output });

/** The params as the job entry wrote them (a piece's row holds them as JSON). */
function finishParams(p: Record<string, unknown>): AssetFinishParams {
  const { playbackId, media, digest } = p;
  const has = (o: unknown, field: string) => typeof o === 'object' && o !== null && field in o;
  if (typeof playbackId !== 'string' || !has(digest, 'sha256') || !has(media, 'formatName'))
    throw new InternalError('asset: the finish step got no playbackId, digest or probe');
  // Written by makeAsset's prepare step above, from its own probe and digest.
  return { playbackId, media: media as MediaInfo, digest: digest as Digest };
}

/** Size, md5 and sha256 of a file, in one streamed read. */
async function digestOf(file: string, signal: AbortSignal): Promise<Digest> {
  const md5 = createHash('md5');
  const sha256 = createHash('sha256');
  let size = 0;
  await pipeline(
    createReadStream(file, { highWaterMark: 1 << 20 }),
    async (chunks: AsyncIterable<Buffer>) => {
      for await (const c of chunks) {
        md5.update(c);
        sha256.update(c);
        size += c.length;
      }
    },
    { signal },
  );
  return { size, md5: md5.digest('hex'), sha256: sha256.digest('hex') };
}

/** ffprobe's container names as Livepeer's videoSpec.format shows them (the first name otherwise). */
const FORMATS: Record<string, string> = { 'mov,mp4,m4a,3gp,3g2,mj2': 'mp4', 'matroska,webm': 'mkv' };

function formatOf(media: MediaInfo): string {
  const named = FORMATS[media.formatName] ?? media.formatName.split(',')[0] ?? media.formatName;
  // WebM is Matroska holding only WebM's codecs.
  const webm = ['vp8', 'vp9', 'av1', 'opus', 'vorbis'];
  const codecs = [media.video?.codec, ...media.audioTracks.map((a) => a.codec)].filter((c) => c !== undefined);
  return named === 'mkv' && codecs.every((c) => webm.includes(c)) ? 'webm' : named;
}

function contentTypeOf(media: MediaInfo): string {
  const format = formatOf(media);
  if (format === 'mp4') return media.video ? 'video/mp4' : 'audio/mp4';
  if (format === 'webm') return media.video ? 'video/webm' : 'audio/webm';
  return 'application/octet-stream';
}

/** The tracks of the source, as Livepeer's SDK models them (components/asset.ts Tracks). */
function tracksOf(media: MediaInfo): AssetTrack[] {
  const v = media.video;
  const video: AssetTrack[] = v
    ? [
        {
          type: 'video',
          codec: v.codec,
          width: v.width,
          height: v.height,
          pixelFormat: v.pixFmt,
          fps: Math.round((v.fps.num / v.fps.den) * 1000) / 1000,
          bitDepth: v.bitDepth,
          ...(v.bitrate === undefined ? {} : { bitrate: v.bitrate }),
        },
      ]
    : [];
  const audio = media.audioTracks.map(
    (a): AssetTrack => ({
      type: 'audio',
      codec: a.codec,
      channels: a.channels,
      sampleRate: a.sampleRate,
      ...(a.bitrate === undefined ? {} : { bitrate: a.bitrate }),
    }),
  );
  return [...video, ...audio];
}

/** The job's outputs as the asset keeps them: full store keys, the source's spec, size and hashes. */
function assetOutput(o: AssetFinishParams & { result: TranscodeFileOutput }): AssetOutput {
  const key = (p: string) => assetPrefix(o.playbackId) + p.replace(/^\/+/, '');
  const { hls, mp4, thumbnails } = o.result;
  const duration = o.result.input_video.duration;
  const bitrate = o.media.bitrate ?? (duration > 0 ? Math.round((o.digest.size * 8) / duration) : undefined);
  return {
    type: o.media.video ? 'video' : 'audio',
    videoSpec: {
      format: formatOf(o.media),
      duration,
      ...(bitrate === undefined ? {} : { bitrate }),
      tracks: tracksOf(o.media),
    },
    size: o.digest.size,
    hash: [
      { hash: o.digest.md5, algorithm: 'md5' },
      { hash: o.digest.sha256, algorithm: 'sha256' },
    ],
    source: { key: assetSourceKey(o.playbackId) },
    ...(hls ? { hls: { key: key(hls.path) } } : {}),
    ...(mp4
      ? {
          mp4: mp4.map((m) => ({
            key: key(m.path),
            ...('width' in m ? { width: m.width, height: m.height } : {}),
            bitrate: m.bitrate,
            size: m.size,
          })),
        }
      : {}),
    ...(thumbnails ? { thumbnails: { key: key(thumbnails.path), poster: key(thumbnails.poster) } } : {}),
  };
}
