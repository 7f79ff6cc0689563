// Starts worker-child.ts as a worker process of its own, the way the multi-process tests run
// workers beside the API: separate processes on one PostgreSQL.

import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { TEST_ENCODE_ENV } from './encode-defaults.ts';

const CHILD = fileURLToPath(new URL('./worker-child.ts', import.meta.url));

/**
 * A worker process with `env` over this process's environment and the tests' encode defaults
 * (encode-defaults.ts); resolves once it polls the queue. The child joins `children` at once,
 * so a test's `after` can kill one that never became ready.
 */
export function spawnWorkerChild(env: Record<string, string>, children?: ChildProcess[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, [CHILD], {
    env: { ...process.env, ...TEST_ENCODE_ENV, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children?.push(child);
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (b: Buffer) => b.toString().includes('ready') && resolve(child));
    child.once('exit', (code) => reject(new Error(`worker exited with ${code} before it was ready`)));
  });
}
