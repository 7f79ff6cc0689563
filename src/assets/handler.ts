import { Type } from '@sinclair/typebox';
import { ValidationError } from '../lib/errors.ts';
import { createInputSource, type InputSource } from '../storage/index.ts';
import { checkedHandler, type JobContext, type JobHandler, type SPLIT, TASK_TYPES } from '../tasks/index.ts';
import { assetSourceKey } from './keys.ts';
import { type AssetProcessingDeps, makeAsset } from './process.ts';
import { ProcessingSpec, processingSpecOf } from './processing.ts';
import { recordingInput } from './recording.ts';
import type { AssetOutput, RecordingArchive } from './types.ts';

/** The task type that fetches or takes an uploaded file and makes an asset of it (spec/API.md section C). */
export const UPLOAD_TASK_TYPE = TASK_TYPES.upload;

// What a stored `upload` task's params must be for this handler to run them (issue #26): what
// AssetStore.create writes (assetId, playbackId, and for a direct upload the source's key)
// with what the API edge put in (the URL, the asset's processing spec), or, for a live
// session's recording (recording.ts), the session whose archive is the source.
const StoredUploadJob = Type.Object({
  assetId: Type.String(),
  // A key segment of the store: the store's own alphabet only.
  playbackId: Type.String({ pattern: '^[a-z0-9]{16}$' }),
  input: Type.Union([
    Type.Object({ url: Type.String() }),
    Type.Object({ key: Type.String() }),
    Type.Object({ recording: Type.Object({ sessionId: Type.String() }) }),
  ]),
  ...ProcessingSpec.properties,
});
type StoredUploadJob = (typeof StoredUploadJob)['static'];

export interface UploadHandlerDeps extends AssetProcessingDeps {
  /** Live sessions' archived source (main.ts passes the live archive): recordings read it. */
  archive?: RecordingArchive | undefined;
}

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
    return makeAsset(d, {
      assetId: p.assetId,
      playbackId: p.playbackId,
      source: await sourceOf(d, p.input, ctx),
      // A direct upload is at the source key already; a fetched file or a recording is kept there.
      keepSource: !('key' in p.input),
      spec: processingSpecOf(p),
      ctx,
      canSplit: o?.split === true,
    });
  });
}

/** Where the upload's file is read from: its URL, the store (a folder's own file or a download), or a live archive. */
async function sourceOf(d: UploadHandlerDeps, input: StoredUploadJob['input'], ctx: JobContext): Promise<InputSource> {
  if ('url' in input) return createInputSource({ url: input.url }, d.config);
  if ('recording' in input) return recordingInput(d.archive, input.recording.sessionId, ctx);
  return d.store.input(input.key);
}
