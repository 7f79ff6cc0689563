// Starting the process a bench measures: the service, a bare server, a webhook receiver.

import { type ChildProcess, spawn } from 'node:child_process';

/**
 * Spawns `node args` with `env` over the bench's own and resolves once its stdout matched
 * `match` (whose first group is the URL it listens at); rejects if it exits before.
 */
export function startChild(
  args: string[],
  env: Record<string, string>,
  match: RegExp,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (b: Buffer) => {
      out += b.toString();
      const m = match.exec(out);
      if (m?.[1]) resolve({ child, url: m[1] });
    });
    child.once('exit', (code) => reject(new Error(`child exited with ${code}: ${out.slice(-500)}`)));
  });
}
