import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import { createInputSource, createObjectStore, type ObjectStoreFactory } from '../storage/index.ts';
import type { JobHandler } from '../tasks/types.ts';
import type { TranscodeFileOutput, TranscodeParams } from './params.ts';
import { runPipeline } from './pipeline.ts';

export interface TranscodeHandlerDeps {
  config: Config;
  log?: Logger;
  /** Adapters for storage kinds other than s3 (dweb.storage, from storage/dweb/), by `storage.type`. */
  objectStores?: Partial<Record<string, ObjectStoreFactory>>;
}

/**
 * The `transcode-file` job. Errors are from lib/errors.ts: the worker retries the
 * retryable ones (network, 5xx, timeouts) and fails the rest with their message.
 */
export function createTranscodeHandler(deps: TranscodeHandlerDeps): JobHandler<TranscodeParams, TranscodeFileOutput> {
  return async (params, ctx) => {
    const log = ctx.log ?? deps.log;
    return runPipeline(deps.config, {
      source: createInputSource(params.input, deps.config),
      store: createObjectStore(params.storage, deps.config, deps.objectStores),
      outputs: params.outputs,
      profiles: params.profiles,
      segmentSecs: params.targetSegmentSizeSecs,
      scratchDir: ctx.scratchDir,
      signal: ctx.signal,
      progress: ctx.progress,
      log,
    });
  };
}
