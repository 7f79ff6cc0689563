import type { Config } from '../config/index.ts';
import { InputUnreadableError, StorageDeniedError } from '../lib/errors.ts';
import type { DownloadLimits } from './download.ts';
import { GatewayInput, gatewayCandidates } from './gateway.ts';
import { HttpInput } from './http.ts';
import { S3InputSource } from './s3-input.ts';
import { S3ObjectStore } from './s3-store.ts';
import type { InputSource, InputSpec, ObjectStore, StorageTarget } from './types.ts';

export type {
  DwebTarget,
  FetchedInput,
  FetchOptions,
  FileRange,
  InputSource,
  InputSpec,
  ObjectStore,
  PartWriter,
  Published,
  PublishedFile,
  PutBody,
  PutOptions,
  S3Location,
  S3Object,
  S3Target,
  StorageTarget,
} from './types.ts';
export { FileInput, LocalDirStore } from './local.ts';
export { S3ObjectStore } from './s3-store.ts';
export { S3InputSource } from './s3-input.ts';
export { HttpInput, showUrl } from './http.ts';
export { GatewayInput, gatewayCandidates, isSubdomainGatewayHost, pathStyleHint } from './gateway.ts';
export { DownloadGuard, type DownloadLimits } from './download.ts';
export { openRangeReader, storedRangeReader, type RangeReader, type RangeReaderOptions } from './ranges.ts';
export { parseRange, startRangeProxy, type RangeProxy } from './range-proxy.ts';

type StorageConfig = Pick<
  Config,
  | 'inputMaxBytes'
  | 'inputTimeoutMs'
  | 'inputIdleTimeoutMs'
  | 'maxRedirects'
  | 'ipfsGateways'
  | 'arweaveGateways'
  | 'allowPrivateUrls'
  | 's3MaxAttempts'
  | 'uploadPartSizeBytes'
>;

function limits(config: StorageConfig): DownloadLimits {
  return { maxBytes: config.inputMaxBytes, timeoutMs: config.inputTimeoutMs, idleTimeoutMs: config.inputIdleTimeoutMs };
}

/** The InputSource for a job's input: S3 object, gateway content or plain HTTP(S). */
export function createInputSource(input: InputSpec, config: StorageConfig): InputSource {
  if ('type' in input) {
    return new S3InputSource(input, {
      limits: limits(config),
      maxAttempts: config.s3MaxAttempts,
      allowPrivate: config.allowPrivateUrls,
    });
  }
  const http = { limits: limits(config), maxRedirects: config.maxRedirects, allowPrivate: config.allowPrivateUrls };
  let url: URL;
  try {
    url = new URL(input.url);
  } catch {
    throw new InputUnreadableError('input.url is not a valid URL');
  }
  const candidates = gatewayCandidates(input.url, config);
  if (candidates) return new GatewayInput(input.url, candidates, http);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InputUnreadableError(
      `input.url: the scheme ${url.protocol} is not supported (use https://, http://, ipfs:// or ar://)`,
    );
  }
  return new HttpInput(url, http);
}

/**
 * Builds the store for one job. Kinds other than s3 come from `factories`, which the
 * composition root fills (the dweb adapter lives in storage/dweb/, issue 5), so adding a
 * kind touches no file here.
 */
export type ObjectStoreFactory = (target: StorageTarget) => ObjectStore;

export function createObjectStore(
  storage: StorageTarget,
  config: StorageConfig,
  factories: Partial<Record<string, ObjectStoreFactory>> = {},
): ObjectStore {
  const factory = factories[storage.type];
  if (factory) return factory(storage);
  if (storage.type === 's3') {
    return new S3ObjectStore(storage, {
      maxAttempts: config.s3MaxAttempts,
      partSizeBytes: config.uploadPartSizeBytes,
      allowPrivate: config.allowPrivateUrls,
    });
  }
  throw new StorageDeniedError(`storage type ${storage.type} is not available on this server`);
}
