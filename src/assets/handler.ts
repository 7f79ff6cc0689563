import { Type } from '@sinclair/typebox';
import { ValidationError } from '../lib/errors.ts';
import { createInputSource } from '../storage/index.ts';
import { checkedHandler, type JobHandler, type SPLIT, TASK_TYPES } from '../tasks/index.ts';
import { assetSourceKey } from './keys.ts';
import { type AssetProcessingDeps, makeAsset } from './process.ts';
import { ProcessingSpec, processingSpecOf } from './processing.ts';
import type { AssetOutput } from './types.ts';

/** The task type that fetches or takes an uploaded file and makes an asset of it (spec/API.md section C). */
export const UPLOAD_TASK_TYPE = TASK_TYPES.upload;

// What a stored `upload` task's params must be for this handler to run them (issue #26): what
// AssetStore.create writes (assetId, playbackId, and for a direct upload the source's key)
// with what the API edge put in (the URL, the asset's processing spec).
const StoredUploadJob = Type.Object({
  assetId: Type.String(),
  // A key segment of the store: the store's own alphabet only.
  playbackId: Type.String({ pattern: '^[a-z0-9]{16}$' }),
  input: Type.Union([Type.Object({ url: Type.String() }), Type.Object({ key: Type.String() })]),
  ...ProcessingSpec.properties,
});

export type UploadHandlerDeps = AssetProcessingDeps;

/**
 * The `upload` job: the asset made of its source (process.ts), fetched from its URL with the
 * input rules of POST /api/transcode (address guard, gateways, size and time limits) and
 * kept at the asset's source key, or the uploaded file where the store has it. The result is
 * the asset's AssetOutput, which the trigger of migration 010 copies onto it (or SPLIT: a
 * long source is split into pieces, and the stitch makes it).
 */
export function createUploadHandler(d: UploadHandlerDeps): JobHandler<unknown, AssetOutput>;
/** With `split` (the worker's, main.ts): a long source is split into pieces, as a transcode's is. */
export function createUploadHandler(
  d: UploadHandlerDeps,
  o: { split: true },
): JobHandler<unknown, AssetOutput | typeof SPLIT>;
export function createUploadHandler(
  d: UploadHandlerDeps,
  o?: { split: true },
): JobHandler<unknown, AssetOutput | typeof SPLIT> {
  return checkedHandler(StoredUploadJob, async (p, ctx) => {
    const sourceKey = assetSourceKey(p.playbackId);
    if ('key' in p.input && p.input.key !== sourceKey)
      throw new ValidationError(`input.key: an upload task reads its own asset's source (${sourceKey})`);
    const fetched = 'url' in p.input;
    return makeAsset(d, {
      assetId: p.assetId,
      playbackId: p.playbackId,
      // A folder store gives its own file; a bucket, a download.
      source: 'url' in p.input ? createInputSource({ url: p.input.url }, d.config) : d.store.input(sourceKey),
      keepSource: fetched,
      spec: processingSpecOf(p),
      ctx,
      canSplit: o?.split === true,
    });
  });
}
