import { Type } from '@sinclair/typebox';
import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import { createInputSource, type ObjectStoreFactory } from '../storage/index.ts';
import { checkedHandler, type JobHandler, type SPLIT } from '../tasks/index.ts';
import type { C2paSigner } from './c2pa.ts';
import type { FinishSteps } from './finish.ts';
import { builtinOutputPrefix } from './destination.ts';
import { runJob, type JobSpec } from './job.ts';
import type { TranscodeFileOutput, TranscodeJob } from './types.ts';

export interface TranscodeHandlerDeps {
  config: Config;
  log?: Logger;
  /** Adapters for storage kinds other than s3 (dweb.storage, from storage/dweb/), by `storage.type`. */
  objectStores?: Partial<Record<string, ObjectStoreFactory>>;
  /** Issue 5: the C2PA signer from `loadC2paSigner(config)`; undefined when signing is not configured. */
  c2paSigner?: C2paSigner | undefined;
  /** The service's own store (issue #27): where a job that names no `storage` writes. */
  builtinStore?: BuiltinStore | undefined;
  /** The finish steps of the jobs whose pieces this worker may stitch (an asset's). */
  finishSteps?: FinishSteps | undefined;
}

export { builtinOutputPrefix };

// What a stored `transcode-file` task's params must be for this handler to run them (issue
// #26): the shape of a TranscodeJob, checked when a worker takes the task. Not the API's
// bounds (api/contract/transcode.ts): the task met those when it was created, and a bound
// changed since must not strand a queued task. Other keys (the request's creatorId) pass.
const S3Bucket = {
  endpoint: Type.String(),
  bucket: Type.String(),
  region: Type.Optional(Type.String()),
  credentials: Type.Object({ accessKeyId: Type.String(), secretAccessKey: Type.String() }),
};
const literals = <const T extends readonly string[]>(...values: T) =>
  Type.Union(values.map((v: T[number]) => Type.Literal(v)));
/** A stored rendition profile (ProfileSpec); the `upload` task of assets/ stores the same. */
export const StoredProfile = Type.Object({
  name: Type.String(),
  width: Type.Integer(),
  height: Type.Integer(),
  bitrate: Type.Integer(),
  fps: Type.Optional(Type.Number()),
  fpsDen: Type.Optional(Type.Integer()),
  gop: Type.Optional(Type.String()),
  profile: Type.Optional(literals('H264Baseline', 'H264Main', 'H264High', 'H264ConstrainedHigh')),
  encoder: Type.Optional(literals('H.264', 'HEVC', 'AV1', 'VP8', 'VP9')),
  quality: Type.Optional(Type.Integer()),
  perTitle: Type.Optional(Type.Boolean()),
});
const StoredTranscodeJob = Type.Object({
  input: Type.Union([
    Type.Object({ url: Type.String() }),
    Type.Object({ type: Type.Literal('s3'), ...S3Bucket, path: Type.String() }),
  ]),
  storage: Type.Optional(
    Type.Union([
      Type.Object({ type: Type.Literal('s3'), ...S3Bucket }),
      Type.Object({
        type: literals('dweb.storage', 'web3.storage'),
        credentials: Type.Object({ proof: Type.String() }),
      }),
    ]),
  ),
  // Each output kind a folder; which kinds there are is transcode's own list, not repeated here.
  outputs: Type.Record(Type.String(), Type.Object({ path: Type.String() })),
  profiles: Type.Optional(Type.Array(StoredProfile)),
  targetSegmentSizeSecs: Type.Optional(Type.Number()),
  c2pa: Type.Optional(Type.Boolean()),
  perTitle: Type.Optional(Type.Boolean()),
});

/**
 * The `transcode-file` job. Errors are from lib/errors.ts: the worker retries the
 * retryable ones (network, 5xx, timeouts) and fails the rest with their message.
 */
export function createTranscodeHandler(deps: TranscodeHandlerDeps): JobHandler<unknown, TranscodeFileOutput>;
/** With `split` (the worker's, main.ts): a long input is split into pieces (issue #30) and the run ends with SPLIT. */
export function createTranscodeHandler(
  deps: TranscodeHandlerDeps,
  o: { split: true },
): JobHandler<unknown, TranscodeFileOutput | typeof SPLIT>;
export function createTranscodeHandler(
  deps: TranscodeHandlerDeps,
  o?: { split: true },
): JobHandler<unknown, TranscodeFileOutput | typeof SPLIT> {
  return checkedHandler(StoredTranscodeJob, async (stored, ctx) => {
    const params: TranscodeJob = stored;
    const spec: JobSpec = {
      input: { source: createInputSource(params.input, deps.config), ranged: params.input },
      place: { storage: params.storage },
      outputs: params.outputs,
      profiles: params.profiles,
      segmentSecs: params.targetSegmentSizeSecs,
      perTitle: params.perTitle,
      c2pa: params.c2pa,
    };
    // A transcode has no finish step: its output is the outputs (TranscodeFileOutput).
    const output = await runJob(deps, spec, ctx, { canSplit: o?.split === true });
    return output as TranscodeFileOutput | typeof SPLIT;
  });
}
