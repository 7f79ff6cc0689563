import { readdir, readFile, readlink } from 'node:fs/promises';
import { sep } from 'node:path';

// Finding the processes a dead worker's job left behind (issue #20). Child processes are
// spawned to die with their worker (transcode/run.ts), but a worker killed in the instant
// between fork and that arrangement, or on a system without it, can leave one running. A job's
// processes work inside its scratch directory (their working directory, or their arguments
// name files there), which is what identifies them here: a pid file could name a pid that
// has since been reused by an unrelated process. Linux only (/proc); elsewhere nothing is found.

const PROC = '/proc';

/** Pids of the processes whose working directory or command line lies inside one of `dirs`. */
export async function processesInside(dirs: readonly string[]): Promise<number[]> {
  if (dirs.length === 0) return [];
  let entries: string[];
  try {
    entries = await readdir(PROC);
  } catch {
    return [];
  }
  const prefixes = dirs.map((d) => (d.endsWith(sep) ? d : d + sep));
  const inside = (s: string): boolean => prefixes.some((p) => s.includes(p) || `${s}${sep}` === p);
  const found: number[] = [];
  for (const name of entries) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    if (await processInside(pid, inside)) found.push(pid);
  }
  return found;
}

async function processInside(pid: number, inside: (s: string) => boolean): Promise<boolean> {
  // Either read fails for a process that is gone or belongs to another user: not ours.
  const cwd = await readlink(`${PROC}/${pid}/cwd`).catch(() => '');
  if (cwd && inside(cwd)) return true;
  const cmdline = await readFile(`${PROC}/${pid}/cmdline`, 'utf8').catch(() => '');
  return cmdline.split('\0').some((arg) => arg !== '' && inside(arg));
}

/** Whether a process is gone; a zombie (exited, not yet reaped by its new parent) is gone. */
export async function processGone(pid: number): Promise<boolean> {
  const stat = await readFile(`${PROC}/${pid}/stat`, 'utf8').catch(() => null);
  if (stat === null) return !isAlive(pid);
  // The state letter follows the command name, which is in parentheses and may hold spaces.
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** SIGKILLs the processes and waits (up to `timeoutMs`) until they are gone; returns the pids still there. */
export async function killAndWait(pids: readonly number[], timeoutMs = 2000): Promise<number[]> {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already, or not ours to kill: waited on below all the same.
    }
  }
  const until = Date.now() + timeoutMs;
  let left = [...pids];
  while (left.length > 0) {
    const gone = await Promise.all(left.map(processGone));
    left = left.filter((_, i) => !gone[i]);
    if (left.length === 0 || Date.now() > until) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  return left;
}
