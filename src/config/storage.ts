import { defineSettings } from './types.ts';

// Settings of the storage domain (see types.ts for the shape of an entry).
export const storageSettings = defineSettings({
  inputMaxBytes: { env: 'MEDIAPLANE_INPUT_MAX_BYTES', type: 'int', group: 'storage', default: 30 * 1024 ** 3, defaultText: '32212254720 (30 GiB)', min: 1, description: 'Largest input a job downloads; bigger inputs fail with "input too large".' },
  inputTimeoutMs: { env: 'MEDIAPLANE_INPUT_TIMEOUT_MS', type: 'int', group: 'storage', default: 3600_000, min: 100, description: 'Longest an input download may take in all.' },
  inputIdleTimeoutMs: { env: 'MEDIAPLANE_INPUT_IDLE_TIMEOUT_MS', type: 'int', group: 'storage', default: 60_000, min: 100, description: 'Longest an input download may go without receiving a byte.' },
  maxRedirects: { env: 'MEDIAPLANE_MAX_REDIRECTS', type: 'int', group: 'storage', default: 5, min: 0, max: 20, description: 'HTTP redirects followed when downloading an input (each hop is checked against the private-address guard).' },
  ipfsGateways: { env: 'MEDIAPLANE_IPFS_GATEWAYS', type: 'list', group: 'storage', default: ['https://ipfs.io', 'https://dweb.link'], description: 'Path-style IPFS gateways tried in order for ipfs:// inputs and /ipfs/ URLs (comma-separated).' },
  arweaveGateways: { env: 'MEDIAPLANE_ARWEAVE_GATEWAYS', type: 'list', group: 'storage', default: ['https://arweave.net'], description: 'Arweave gateways tried in order for ar:// inputs (comma-separated).' },
  uploadConcurrency: { env: 'MEDIAPLANE_UPLOAD_CONCURRENCY', type: 'int', group: 'storage', default: 4, min: 1, max: 64, description: 'Objects uploaded at once per job (segments go up while ffmpeg encodes).' },
  uploadPartSizeBytes: { env: 'MEDIAPLANE_UPLOAD_PART_SIZE_BYTES', type: 'int', group: 'storage', default: 8 * 1024 ** 2, min: 5 * 1024 ** 2, description: 'S3 multipart part size; memory per upload is about this times 4.' },
  s3MaxAttempts: { env: 'MEDIAPLANE_S3_MAX_ATTEMPTS', type: 'int', group: 'storage', default: 4, min: 1, max: 20, description: 'Tries per S3 request on 5xx and network errors before the job fails (and is retried as a whole).' },
});
