import { readdir, readFile, readlink } from 'node:fs/promises';
import { sep } from 'node:path';

// Finding the processes a dead worker's job left behind (issue #20). Child processes are
// spawned to die with their worker (lib/tied-process.ts), but a worker killed in the instant
// between fork and that arrangement, or on a system without it, can leave one running. A job's
// processes work inside its scratch directory (their working directory, or their arguments
// name files there), which is what identifies them here: a pid file could name a pid that
// has since been reused by an unrelated process. Linux only (/proc); elsewhere nothing is found.
//
// Issue #25: what is found is SIGKILLed, so only processes of the service's own user count
// (another user's that names the path is none of ours), and an argument must name a path in
// the directory, not merely contain its text (`/x/run-1` is not in `/x/run-10` nor in `/y/x/run-1`).

const PROC = '/proc';

/**
 * Where a path may start inside one argument besides its first character: after `=` (`-i=/p`,
 * a filter's `filename=/p`), `:` (ffmpeg's `file:/p`, `concat:/a|/b`), `|` (concat's list),
 * `,` (lists) and a quote (a filtergraph's `movie='/p'`).
 */
const PATH_STARTS_AFTER = new Set(['=', ':', '|', ',', "'", '"']);

/**
 * Pids of this user's processes whose working directory lies inside one of `dirs`, or one of
 * whose arguments names a path inside one.
 */
export async function processesInside(dirs: readonly string[]): Promise<number[]> {
  const uid = process.getuid?.();
  if (dirs.length === 0 || uid === undefined) return [];
  let entries: string[];
  try {
    entries = await readdir(PROC);
  } catch {
    return [];
  }
  const roots = dirs.map((d) => (d.length > 1 && d.endsWith(sep) ? d.slice(0, -1) : d));
  const found: number[] = [];
  for (const name of entries) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    if ((await ownedBy(pid, uid)) && (await processInside(pid, roots))) found.push(pid);
  }
  return found;
}

/** Whether every uid of the process (real, effective, saved, filesystem) is `uid`. */
async function ownedBy(pid: number, uid: number): Promise<boolean> {
  const status = await readFile(`${PROC}/${pid}/status`, 'utf8').catch(() => '');
  const uids = /^Uid:\s+(.+)$/m.exec(status)?.[1]?.trim().split(/\s+/);
  return uids !== undefined && uids.length > 0 && uids.every((u) => Number(u) === uid);
}

async function processInside(pid: number, roots: readonly string[]): Promise<boolean> {
  // Either read fails for a process that is gone: not ours.
  const cwd = await readlink(`${PROC}/${pid}/cwd`).catch(() => '');
  if (cwd && roots.some((root) => isInside(cwd, root))) return true;
  const cmdline = await readFile(`${PROC}/${pid}/cmdline`, 'utf8').catch(() => '');
  return cmdline.split('\0').some((arg) => arg !== '' && roots.some((root) => namesPathInside(arg, root)));
}

/** Whether `path` is `root` or lies under it. */
function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(root + sep);
}

/**
 * Whether `arg` holds a path inside `root`: at its start or after one of PATH_STARTS_AFTER,
 * the whole of `root` followed by the end or a separator.
 */
function namesPathInside(arg: string, root: string): boolean {
  for (let at = arg.indexOf(root); at !== -1; at = arg.indexOf(root, at + 1)) {
    const before = at === 0 || PATH_STARTS_AFTER.has(arg.charAt(at - 1));
    const next = arg.charAt(at + root.length);
    if (before && (next === '' || next === sep)) return true;
  }
  return false;
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
