import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Type } from '@sinclair/typebox';
import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import { ValidationError } from '../lib/errors.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import { createInputSource, FileInput } from '../storage/index.ts';
import { checkedHandler, type JobContext, type JobHandler } from '../tasks/index.ts';
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

/** The task type that fetches or takes an uploaded file and makes an asset of it (spec/API.md section C). */
export const UPLOAD_TASK_TYPE = 'upload';

// What a stored `upload` task's params must be for this handler to run them (issue #26): what
// AssetStore.create writes (assetId, playbackId, and for a direct upload the source's key)
// with what the API edge put in (the URL, the asset's processing options).
const StoredUploadJob = Type.Object({
  assetId: Type.String(),
  // A key segment of the store: the store's own alphabet only.
  playbackId: Type.String({ pattern: '^[a-z0-9]{16}$' }),
  input: Type.Union([Type.Object({ url: Type.String() }), Type.Object({ key: Type.String() })]),
  staticMp4: Type.Optional(Type.Boolean()),
  profiles: Type.Optional(Type.Array(StoredProfile)),
  c2pa: Type.Optional(Type.Boolean()),
  targetSegmentSizeSecs: Type.Optional(Type.Number()),
});

export interface UploadHandlerDeps {
  config: Config;
  store: BuiltinStore;
  log?: Logger;
  /** Issue 5: signs the MP4s of assets with `c2pa: true`; undefined when signing is not configured. */
  c2paSigner?: C2paSigner | undefined;
}

/** The part of the progress the download of a URL input takes (the encode takes the rest). */
const DOWNLOAD_SHARE = 0.1;

/**
 * The `upload` job: the source (fetched from its URL, or the uploaded file in the store),
 * its size and hashes, its probe, then HLS (plus MP4s with `staticMp4`) and thumbnails into
 * the store under `asset/<playbackId>/`. A fetched source is kept at the asset's source key.
 * The result is the asset's AssetOutput, which the trigger of migration 010 copies onto it.
 */
export function createUploadHandler(d: UploadHandlerDeps): JobHandler<unknown, AssetOutput> {
  return checkedHandler(StoredUploadJob, async (p, ctx) => {
    const log = ctx.log ?? d.log;
    const sourceKey = assetSourceKey(p.playbackId);
    if ('key' in p.input && p.input.key !== sourceKey)
      throw new ValidationError(`input.key: an upload task reads its own asset's source (${sourceKey})`);
    const outputs: OutputFolders = { hls: { path: '/hls' }, ...(p.staticMp4 ? { mp4: { path: '/mp4' } } : {}) };
    const c2pa = signer(d, p.c2pa, outputs);
    const source = await fetchSource(d, p.input, ctx);
    const [digest, media] = await Promise.all([
      digestOf(source.path, ctx.signal),
      probe(source.path, { ffprobePath: d.config.ffprobePath, signal: ctx.signal }),
    ]);
    log?.info({ asset: p.assetId, size: digest.size, format: media.formatName }, 'asset source read');
    const result = await runPipeline(d.config, {
      source: new FileInput(source.path),
      store: d.store.writer(assetPrefix(p.playbackId)),
      outputs,
      profiles: p.profiles,
      segmentSecs: p.targetSegmentSizeSecs,
      scratchDir: ctx.scratchDir,
      signal: ctx.signal,
      // The pipeline starts again at 0 and skips its own download share: a local file.
      progress: (f) => ctx.progress(source.fetched ? Math.max(DOWNLOAD_SHARE, f) : f),
      log,
      thumbnails: true,
      ...(c2pa ? { c2pa: { signer: c2pa } } : {}),
    });
    if (source.fetched)
      await d.store.putFile(sourceKey, source.path, {
        contentType: contentTypeOf(media),
        signal: ctx.signal,
        move: true,
      });
    return assetOutput({ playbackId: p.playbackId, media, result, digest });
  });
}

/** The signer for `c2pa: true`, refused as the transcode handler refuses it. */
function signer(d: UploadHandlerDeps, c2pa: boolean | undefined, outputs: OutputFolders): C2paSigner | undefined {
  if (!c2pa) return undefined;
  if (!d.c2paSigner) throw new ValidationError('c2pa: C2PA signing is not configured on this server');
  // The asset's only signed files are its MP4s.
  if (signingProblem(outputs))
    throw new ValidationError('c2pa: signing applies to MP4 renditions; ask for staticMp4 too');
  return d.c2paSigner;
}

/**
 * The source as a local file: a URL is fetched into the scratch directory with the input
 * rules of POST /api/transcode (address guard, gateways, size and time limits); the uploaded
 * file is read where the store has it (a folder store's own file), or downloaded (a bucket).
 */
async function fetchSource(
  d: UploadHandlerDeps,
  input: { url: string } | { key: string },
  ctx: JobContext,
): Promise<{ path: string; fetched: boolean }> {
  const fetched = 'url' in input;
  const from = fetched ? createInputSource({ url: input.url }, d.config) : d.store.input(input.key);
  const got = await from.fetch({
    dest: path.join(ctx.scratchDir, 'source'),
    signal: ctx.signal,
    onBytes: (n, total) => fetched && total && ctx.progress((DOWNLOAD_SHARE * n) / total),
  });
  return { path: got.path, fetched };
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
