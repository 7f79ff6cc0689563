import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import { createInputSource, createObjectStore, type ObjectStoreFactory } from '../storage/index.ts';
import type { JobHandler } from '../tasks/index.ts';
import type { TranscodeFileOutput, TranscodeJob } from './types.ts';
import { runPipeline } from './pipeline.ts';
import { ValidationError } from '../lib/errors.ts';
import type { C2paSigner } from './c2pa.ts';
import { DwebObjectStore } from '../storage/dweb/index.ts';

export interface TranscodeHandlerDeps {
  config: Config;
  log?: Logger;
  /** Adapters for storage kinds other than s3 (dweb.storage, from storage/dweb/), by `storage.type`. */
  objectStores?: Partial<Record<string, ObjectStoreFactory>>;
  /** Issue 5: the C2PA signer from `loadC2paSigner(config)`; undefined when signing is not configured. */
  c2paSigner?: C2paSigner | undefined;
}

/**
 * The `transcode-file` job. Errors are from lib/errors.ts: the worker retries the
 * retryable ones (network, 5xx, timeouts) and fails the rest with their message.
 */
export function createTranscodeHandler(deps: TranscodeHandlerDeps): JobHandler<TranscodeJob, TranscodeFileOutput> {
  return async (params, ctx) => {
    const log = ctx.log ?? deps.log;
    // Issue 5: the API refuses this before queueing; checked again for tasks queued elsewhere.
    if (params.c2pa && !deps.c2paSigner)
      throw new ValidationError('c2pa: C2PA signing is not configured on this server');
    if (params.c2pa && !params.outputs.mp4)
      throw new ValidationError('c2pa: signing applies to MP4 outputs; add outputs.mp4');
    const store = createObjectStore(params.storage, deps.config, deps.objectStores);
    const output = await runPipeline(deps.config, {
      source: createInputSource(params.input, deps.config),
      store,
      ...(params.c2pa && deps.c2paSigner ? { c2pa: { signer: deps.c2paSigner } } : {}),
      outputs: params.outputs,
      profiles: params.profiles,
      segmentSecs: params.targetSegmentSizeSecs,
      scratchDir: ctx.scratchDir,
      signal: ctx.signal,
      progress: ctx.progress,
      log,
    });
    // Issue 5: dweb outputs also get each file's CID and gateway URL (path style).
    if (store instanceof DwebObjectStore && store.published) output.files = store.published.files;
    return output;
  };
}
