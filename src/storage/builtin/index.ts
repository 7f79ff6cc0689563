import path from 'node:path';
import { FolderStore } from './folder.ts';
import type { BuiltinStore } from './types.ts';

export type { BuiltinStore, ByteRange, StoredObject } from './types.ts';

/** Settings the built-in store reads (config/store.ts). */
export interface BuiltinStoreOptions {
  /** The data directory: the folder store lives in `<dataDir>/media`. */
  dataDir: string;
  /** MEDIAPLANE_STORE_URL (`s3://BUCKET/PREFIX`); unset: the folder store. */
  storeUrl?: string | undefined;
  storeEndpoint?: string | undefined;
  storeRegion?: string | undefined;
  storeAccessKeyId?: string | undefined;
  storeSecretAccessKey?: string | undefined;
  s3MaxAttempts: number;
  uploadPartSizeBytes: number;
}

/** The built-in store the settings describe: a bucket when MEDIAPLANE_STORE_URL is set, else a folder. */
export function createBuiltinStore(o: BuiltinStoreOptions): BuiltinStore {
  // TODO(issue #27): the bucket store when o.storeUrl is set.
  return new FolderStore(path.join(o.dataDir, 'media'));
}
