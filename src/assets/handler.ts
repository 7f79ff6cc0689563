import type { Logger } from 'pino';
import type { Config } from '../config/index.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import type { JobHandler } from '../tasks/index.ts';
import type { AssetOutput } from './store.ts';

/** The task type that fetches or takes an uploaded file and makes an asset of it (spec/API.md section C). */
export const UPLOAD_TASK_TYPE = 'upload';

export function createUploadHandler(_d: {
  config: Config;
  store: BuiltinStore;
  log?: Logger;
}): JobHandler<unknown, AssetOutput> {
  return () => Promise.reject(new Error('TODO'));
}
