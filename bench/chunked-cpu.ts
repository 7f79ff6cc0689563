// CPU seconds of each piece of a chunked run (bench/chunked.ts), from /proc: on a host whose
// cores are shared with other work, a piece's wall time says more about the neighbours than
// about the piece, while its CPU seconds are what a slot with a core of its own would spend.
// Each poll, every worker's CPU since the last poll (its own, its finished children's, and its
// live children's: ffmpeg, ffprobe) goes to the pieces GET /api/task/{id} shows it running
// then, shared evenly when it runs several. A piece shorter than a poll is missed.

import { readdirSync, readFileSync } from 'node:fs';

const TICKS = 100;

/** utime + stime (+ cutime + cstime with `children`) of a process, in seconds; 0 when it is gone. */
function cpuOf(pid: number, children: boolean): { secs: number; ppid: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    const own = (f[11] ?? 0) + (f[12] ?? 0) + (children ? (f[13] ?? 0) + (f[14] ?? 0) : 0);
    return { secs: own / TICKS, ppid: f[1] ?? 0 };
  } catch {
    return { secs: 0, ppid: 0 };
  }
}

/** A worker's CPU seconds so far, its live children's included. */
function workerCpu(pid: number): number {
  let total = cpuOf(pid, true).secs;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === pid) continue;
    const child = cpuOf(Number(name), true);
    if (child.ppid === pid) total += child.secs;
  }
  return total;
}

/** The process id in a worker's id (`worker-<pid>-...`, as leases name it). */
const pidOfWorker = (worker: string): number | undefined => {
  const m = /^worker-(\d+)-/.exec(worker);
  return m ? Number(m[1]) : undefined;
};

export class PieceCpu {
  /** CPU seconds per piece label. */
  readonly byLabel = new Map<string, number>();
  /** CPU seconds of the workers while they ran no piece (the split, claims, start-up). */
  outside = 0;
  readonly #last = new Map<number, number>();
  readonly #pids: number[];

  constructor(pids: number[]) {
    this.#pids = pids;
    for (const pid of pids) this.#last.set(pid, workerCpu(pid));
  }

  sample(items: { label: string; phase: string; worker?: string }[]): void {
    for (const pid of this.#pids) {
      const now = workerCpu(pid);
      const delta = Math.max(0, now - (this.#last.get(pid) ?? now));
      this.#last.set(pid, now);
      const running = items.filter((p) => p.phase === 'running' && p.worker && pidOfWorker(p.worker) === pid);
      if (running.length === 0) this.outside += delta;
      for (const p of running) this.byLabel.set(p.label, (this.byLabel.get(p.label) ?? 0) + delta / running.length);
    }
  }
}
