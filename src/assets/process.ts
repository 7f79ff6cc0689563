import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { type Static, Type } from '@sinclair/typebox';
import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import { ValidationError } from '../lib/errors.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import { FileInput } from '../storage/index.ts';
import type { JobContext } from '../tasks/index.ts';
import {
  type C2paSigner,
  type MediaInfo,
  type OutputFolders,
  probe,
  runPipeline,
  StoredProfile,
  signingProblem,
  type TranscodeFileOutput,
} from '../transcode/index.ts';
import { assetPrefix, assetSourceKey } from './keys.ts';
import type { AssetOutput, AssetTrack } from './types.ts';

// What makes an asset of a source file, for every task type that makes assets (issue #27's
// `upload`, issue #28's `clip`): its size and hashes, its probe, the HLS ladder (plus MP4s with
// `staticMp4`) and thumbnails into the store under `asset/<playbackId>/`, and the AssetOutput
// that the trigger of migration 010 copies onto the asset. A task writes only under its own
// asset's prefix, so running it again (a retry, a lost lease) is safe.

/** The processing options a stored task of an asset type may carry (what the asset's owner asked). */
export const storedProcessing = {
  staticMp4: Type.Optional(Type.Boolean()),
  profiles: Type.Optional(Type.Array(StoredProfile)),
  c2pa: Type.Optional(Type.Boolean()),
  targetSegmentSizeSecs: Type.Optional(Type.Number()),
};

export interface AssetProcessingDeps {
  config: Config;
  store: BuiltinStore;
  log?: Logger;
  /** Issue 5: signs the MP4s of assets with `c2pa: true`; undefined when signing is not configured. */
  c2paSigner?: C2paSigner | undefined;
}

/** What the pipeline is asked, checked before any byte is fetched or cut. */
export interface AssetProcessing {
  outputs: OutputFolders;
  c2pa: C2paSigner | undefined;
  profiles: Static<typeof StoredProfile>[] | undefined;
  segmentSecs: number | undefined;
}

/** The processing a task asks for; c2pa without a signer or without MP4s is refused as the transcode handler refuses it. */
export function processingOf(
  d: AssetProcessingDeps,
  p: { staticMp4?: boolean; profiles?: Static<typeof StoredProfile>[]; c2pa?: boolean; targetSegmentSizeSecs?: number },
): AssetProcessing {
  const outputs: OutputFolders = { hls: { path: '/hls' }, ...(p.staticMp4 ? { mp4: { path: '/mp4' } } : {}) };
  return { outputs, c2pa: signer(d, p.c2pa, outputs), profiles: p.profiles, segmentSecs: p.targetSegmentSizeSecs };
}

function signer(d: AssetProcessingDeps, c2pa: boolean | undefined, outputs: OutputFolders): C2paSigner | undefined {
  if (!c2pa) return undefined;
  if (!d.c2paSigner) throw new ValidationError('c2pa: C2PA signing is not configured on this server');
  // The asset's only signed files are its MP4s.
  if (signingProblem(outputs))
    throw new ValidationError('c2pa: signing applies to MP4 renditions; ask for staticMp4 too');
  return d.c2paSigner;
}

/**
 * The asset `playbackId` made of the local file `file`. With `keepSource` the file is then
 * stored (moved) at the asset's source key, its downloadUrl; without, it is there already (a
 * direct upload). `progress` gets the pipeline's own 0..1.
 */
export async function makeAsset(
  d: AssetProcessingDeps,
  o: {
    assetId: string;
    playbackId: string;
    file: string;
    keepSource: boolean;
    processing: AssetProcessing;
    ctx: JobContext;
    progress(fraction: number): void;
  },
): Promise<AssetOutput> {
  const { ctx, processing: p } = o;
  const log = ctx.log ?? d.log;
  const [digest, media] = await Promise.all([
    digestOf(o.file, ctx.signal),
    probe(o.file, { ffprobePath: d.config.ffprobePath, signal: ctx.signal }),
  ]);
  log?.info({ asset: o.assetId, size: digest.size, format: media.formatName }, 'asset source read');
  const result = await runPipeline(d.config, {
    source: new FileInput(o.file),
    store: d.store.writer(assetPrefix(o.playbackId)),
    outputs: p.outputs,
    profiles: p.profiles,
    segmentSecs: p.segmentSecs,
    scratchDir: ctx.scratchDir,
    signal: ctx.signal,
    progress: o.progress,
    log,
    thumbnails: true,
    ...(p.c2pa ? { c2pa: { signer: p.c2pa } } : {}),
  });
  if (o.keepSource)
    await d.store.putFile(assetSourceKey(o.playbackId), o.file, {
      contentType: contentTypeOf(media),
      signal: ctx.signal,
      move: true,
    });
  return assetOutput({ playbackId: o.playbackId, media, result, digest });
}

/** Size, md5 and sha256 of a file, in one streamed read. */
async function digestOf(file: string, signal: AbortSignal): Promise<{ size: number; md5: string; sha256: string }> {
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

/** The pipeline's result as the asset keeps it: full store keys, the source's spec, size and hashes. */
function assetOutput(o: {
  playbackId: string;
  media: MediaInfo;
  result: TranscodeFileOutput;
  digest: { size: number; md5: string; sha256: string };
}): AssetOutput {
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
