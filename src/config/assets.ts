import { defineSettings } from './types.ts';

// Settings of the built-in store and of assets (spec/API.md section C).
export const assetSettings = defineSettings({
  storeUrl: {
    env: 'MEDIAPLANE_STORE_URL',
    type: 'string',
    group: 'storage',
    default: undefined,
    defaultText: '(unset: the folder media/ in the data dir)',
    description:
      'The built-in store as an S3-protocol bucket, s3://BUCKET/PREFIX (needed once workers run on several machines); assets and transcodes without `storage` are kept there.',
  },
  storeEndpoint: {
    env: 'MEDIAPLANE_STORE_ENDPOINT',
    type: 'string',
    group: 'storage',
    default: undefined,
    defaultText: '(unset: AWS S3)',
    description: 'The S3-protocol endpoint of MEDIAPLANE_STORE_URL (MinIO, Garage, R2, ...).',
  },
  storeRegion: {
    env: 'MEDIAPLANE_STORE_REGION',
    type: 'string',
    group: 'storage',
    default: 'us-east-1',
    description: 'The region of MEDIAPLANE_STORE_URL.',
  },
  storeAccessKeyId: {
    env: 'MEDIAPLANE_STORE_ACCESS_KEY_ID',
    type: 'string',
    group: 'storage',
    default: undefined,
    secret: true,
    description: 'Access key id for MEDIAPLANE_STORE_URL.',
  },
  storeSecretAccessKey: {
    env: 'MEDIAPLANE_STORE_SECRET_ACCESS_KEY',
    type: 'string',
    group: 'storage',
    default: undefined,
    secret: true,
    description: 'Secret access key for MEDIAPLANE_STORE_URL.',
  },
  storeServe: {
    env: 'MEDIAPLANE_STORE_SERVE',
    type: 'enum',
    group: 'storage',
    default: 'proxy',
    values: ['proxy', 'redirect'] as const,
    description:
      'How /media/ serves what a bucket store holds: `proxy` streams it through the service, `redirect` answers 302 to a presigned URL of the bucket (the folder store always streams).',
  },
  storePresignSeconds: {
    env: 'MEDIAPLANE_STORE_PRESIGN_SECONDS',
    type: 'int',
    group: 'storage',
    default: 3600,
    min: 10,
    max: 604_800,
    description: 'How long a presigned URL of MEDIAPLANE_STORE_SERVE=redirect stays valid.',
  },
  uploadMaxBytes: {
    env: 'MEDIAPLANE_UPLOAD_MAX_BYTES',
    type: 'int',
    group: 'storage',
    default: 30 * 1024 ** 3,
    defaultText: '32212254720 (30 GiB)',
    min: 1,
    description: 'Largest file a direct or tus upload may send (413 above it; nothing is kept).',
  },
  // Each upload is bounded by MEDIAPLANE_UPLOAD_MAX_BYTES, but an owner may ask for many upload
  // URLs: without a total, 100 pending uploads could stage 100 times that on the API's disk.
  uploadMaxStagedBytesPerOwner: {
    env: 'MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER',
    type: 'int',
    group: 'storage',
    default: 4 * 30 * 1024 ** 3,
    defaultText: '128849018880 (120 GiB: four uploads of the default largest size)',
    min: 1,
    description:
      "Bytes one owner's unfinished uploads (direct and tus) may hold at once, counted in the database across API processes: a tus upload counts its Upload-Length from creation, a direct PUT its Content-Length or the bytes it streams; one that would pass it is a 413 (finish or delete pending uploads first).",
  },
  uploadUrlTtlMs: {
    env: 'MEDIAPLANE_UPLOAD_URL_TTL_MS',
    type: 'int',
    group: 'storage',
    default: 24 * 3600_000,
    min: 1000,
    description:
      'How long the upload URLs of POST /api/asset/request-upload stay valid; an upload not finished by then fails and its bytes are freed.',
  },
  uploadIdleTimeoutMs: {
    env: 'MEDIAPLANE_UPLOAD_IDLE_TIMEOUT_MS',
    type: 'int',
    group: 'storage',
    default: 60_000,
    min: 100,
    max: 3_600_000,
    description:
      'An upload body (direct PUT, tus PATCH) may take longer than MEDIAPLANE_REQUEST_TIMEOUT_MS, but no byte for this long closes its connection (a tus client resumes from the bytes kept).',
  },
});
