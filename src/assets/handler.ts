import path from 'node:path';
import { Type } from '@sinclair/typebox';
import { ValidationError } from '../lib/errors.ts';
import { createInputSource } from '../storage/index.ts';
import { checkedHandler, type JobContext, type JobHandler } from '../tasks/index.ts';
import { assetSourceKey } from './keys.ts';
import { type AssetProcessingDeps, makeAsset, processingOf, storedProcessing } from './process.ts';
import type { AssetOutput } from './types.ts';

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
  ...storedProcessing,
});

export type UploadHandlerDeps = AssetProcessingDeps;

/** The part of the progress the download of a URL input takes (the encode takes the rest). */
const DOWNLOAD_SHARE = 0.1;

/**
 * The `upload` job: the source (fetched from its URL, or the uploaded file in the store), then
 * the asset made of it (process.ts). A fetched source is kept at the asset's source key.
 * The result is the asset's AssetOutput, which the trigger of migration 010 copies onto it.
 */
export function createUploadHandler(d: UploadHandlerDeps): JobHandler<unknown, AssetOutput> {
  return checkedHandler(StoredUploadJob, async (p, ctx) => {
    const sourceKey = assetSourceKey(p.playbackId);
    if ('key' in p.input && p.input.key !== sourceKey)
      throw new ValidationError(`input.key: an upload task reads its own asset's source (${sourceKey})`);
    const processing = processingOf(d, p);
    const source = await fetchSource(d, p.input, ctx);
    return makeAsset(d, {
      assetId: p.assetId,
      playbackId: p.playbackId,
      file: source.path,
      keepSource: source.fetched,
      processing,
      ctx,
      // The pipeline starts again at 0 and skips its own download share: a local file.
      progress: (f) => ctx.progress(source.fetched ? Math.max(DOWNLOAD_SHARE, f) : f),
    });
  });
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
