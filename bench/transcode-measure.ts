// What the legs of bench/transcode.ts share: the service's settings, the test equipment they
// load in the parent only (the RSS child loads none of it), timing, and CPU seconds read from
// /proc.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
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

/** CPU seconds of a process (`self`) and of its waited-for children (`children`), from /proc. */
export async function cpuTimes(pid: number): Promise<{ self: number; children: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at field 3; utime is 14.
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  const tick = 100;
  return { self: ((f[11] ?? 0) + (f[12] ?? 0)) / tick, children: ((f[13] ?? 0) + (f[14] ?? 0)) / tick };
}
