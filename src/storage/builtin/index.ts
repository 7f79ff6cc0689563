import path from 'node:path';
import { ConfigError } from '../../config/index.ts';
import { objectPathProblem } from '../../lib/object-path.ts';
import { FolderStore } from './folder.ts';
import { S3BuiltinStore } from './s3.ts';
import type { BuiltinStore } from './types.ts';

export type {
  BuiltinMultipart,
  BuiltinStore,
  ByteRange,
  MultipartUpload,
  StoredObject,
  StoredPart,
} from './types.ts';
export { FolderStore } from './folder.ts';
export { S3BuiltinStore } from './s3.ts';

/** Settings the built-in store reads (config/assets.ts, config/storage.ts). */
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
  /** A job's download of a stored source from a bucket store follows the input deadlines. */
  inputTimeoutMs: number;
  inputIdleTimeoutMs: number;
}

/** The built-in store the settings describe: a bucket when MEDIAPLANE_STORE_URL is set, else a folder. */
export function createBuiltinStore(o: BuiltinStoreOptions): BuiltinStore {
  if (o.storeUrl === undefined || o.storeUrl === '') return new FolderStore(path.join(o.dataDir, 'media'));
  const { bucket, prefix } = parseStoreUrl(o.storeUrl);
  const region = o.storeRegion ?? 'us-east-1';
  const endpoint = o.storeEndpoint ?? `https://s3.${region}.amazonaws.com`;
  if (!/^https?:\/\/[^/?#]+/.test(endpoint))
    throw new ConfigError(['MEDIAPLANE_STORE_ENDPOINT: must be an http:// or https:// URL']);
  if (!o.storeAccessKeyId || !o.storeSecretAccessKey)
    throw new ConfigError([
      'MEDIAPLANE_STORE_ACCESS_KEY_ID and MEDIAPLANE_STORE_SECRET_ACCESS_KEY: both must be set when MEDIAPLANE_STORE_URL is',
    ]);
  return new S3BuiltinStore({
    location: {
      endpoint,
      bucket,
      region,
      credentials: { accessKeyId: o.storeAccessKeyId, secretAccessKey: o.storeSecretAccessKey },
    },
    prefix,
    maxAttempts: o.s3MaxAttempts,
    partSizeBytes: o.uploadPartSizeBytes,
    // Its own objects, which an upload's limit bounded already: no size limit of its own.
    inputLimits: {
      maxBytes: Number.MAX_SAFE_INTEGER,
      timeoutMs: o.inputTimeoutMs,
      idleTimeoutMs: o.inputIdleTimeoutMs,
    },
  });
}

/**
 * `s3://BUCKET/PREFIX` -> the bucket and the key prefix ('' or ending with `/`). The value is
 * never quoted back: a URL written as `s3://KEY:SECRET@bucket` would show the secret.
 */
export function parseStoreUrl(url: string): { bucket: string; prefix: string } {
  const m = /^s3:\/\/([^/?#@:]+)(?:\/([^?#]*))?$/.exec(url);
  const bucket = m?.[1];
  if (!m || !bucket || !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket))
    throw new ConfigError([
      'MEDIAPLANE_STORE_URL: must be s3://BUCKET or s3://BUCKET/PREFIX (a bucket name of 3 to 63 lowercase letters, digits, dots and hyphens; keys go in MEDIAPLANE_STORE_ACCESS_KEY_ID and MEDIAPLANE_STORE_SECRET_ACCESS_KEY, never in the URL)',
    ]);
  const folder = (m[2] ?? '').replace(/\/+$/, '');
  if (folder === '') return { bucket, prefix: '' };
  const problem = folder.startsWith('/') ? 'must not start with /' : objectPathProblem(folder);
  if (problem) throw new ConfigError([`MEDIAPLANE_STORE_URL: the prefix after the bucket ${problem}`]);
  return { bucket, prefix: `${folder}/` };
}
