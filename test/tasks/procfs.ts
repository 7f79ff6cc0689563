import { readdirSync, readFileSync } from 'node:fs';

// What the tests read of other processes in /proc (Linux): a worker's children, by name.

/** Pid, parent pid and command name of every process now. */
export function processTable(): { pid: number; ppid: number; comm: string }[] {
  const out: { pid: number; ppid: number; comm: string }[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue;
    }
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    const open = stat.indexOf('(');
    const close = stat.lastIndexOf(')');
    const ppid = Number(stat.slice(close + 2).split(' ')[1]);
    out.push({ pid: Number(name), ppid, comm: stat.slice(open + 1, close) });
  }
  return out;
}

/** Pids of `parent`'s children, those named `comm` only when given. */
export function childrenOf(parent: number, comm?: string): number[] {
  return processTable()
    .filter((p) => p.ppid === parent && (comm === undefined || p.comm === comm))
    .map((p) => p.pid);
}
