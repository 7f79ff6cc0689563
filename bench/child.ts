// Starting the processes a bench measures (the service, a bare server, a webhook receiver),
// finding them a port, and reading their CPU seconds.

import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';

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
      // Read on after the URL too: the service logs to stdout, and a full pipe would stall it.
      if (out.length > 100_000) return;
      out += b.toString();
      const m = match.exec(out);
      if (m?.[1]) resolve({ child, url: m[1] });
    });
    child.once('exit', (code) => reject(new Error(`child exited with ${code}: ${out.slice(-500)}`)));
  });
}

/** A TCP port free on 127.0.0.1 just now, for a process that must be told its port. */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
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
