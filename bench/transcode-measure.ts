// What the legs of bench/transcode.ts share: the service's settings, the test equipment they
// load in the parent only (the RSS child loads none of it), and timing.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { loadConfig } from '../src/config/index.ts';

// The measuring child loads what a worker loads for a transfer (config, storage); the test
// servers (s3rver) and the encoder side are loaded by the parent only, so the child's peak
// RSS is not inflated by code a worker never runs.
export const parentOnly = async () => ({
  ...(await import('../src/transcode/index.ts')),
  ...(await import('../src/transcode/outputs/index.ts')),
  ...(await import('../test/helpers/http-input.ts')),
  ...(await import('../test/helpers/media.ts')),
  ...(await import('../test/helpers/s3.ts')),
});

export const run = promisify(execFile);
export const config = loadConfig({ env: {}, overrides: { allowPrivateUrls: true } });

export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
}
