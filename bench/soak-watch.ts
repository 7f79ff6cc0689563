// What the soak (bench/soak.ts) watches for besides the tasks' phases: a task with two encoders
// alive at once (sampled from /proc) or two runs overlapping in the workers' logs, ffmpeg and
// ffprobe left in the scratch directories, the bytes left there, and how long a killed worker's
// runs took to be claimed again.
import { readFileSync, readlinkSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '../src/db/index.ts';
import { processTable } from '../test/tasks/procfs.ts';
import type { KillRecord } from './soak-service.ts';

/** Task ids (and the run directory) of every ffmpeg/ffprobe working under these scratch roots now. */
export function jobProcesses(roots: string[]): { pid: number; comm: string; task: string }[] {
  const found: { pid: number; comm: string; task: string }[] = [];
  for (const p of processTable()) {
    if (p.comm !== 'ffmpeg' && p.comm !== 'ffprobe') continue;
    let where = '';
    try {
      where = `${readlinkSync(`/proc/${p.pid}/cwd`)}\0${readFileSync(`/proc/${p.pid}/cmdline`, 'utf8')}`;
    } catch {
      continue;
    }
    for (const root of roots) {
      const m = new RegExp(`${root.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/([0-9a-f-]{36})-\\d+`).exec(where);
      if (m?.[1]) found.push({ pid: p.pid, comm: p.comm, task: m[1] });
    }
  }
  return found;
}

export class EncoderWatch {
  readonly twiceAtOnce = new Set<string>();
  samples = 0;
  #timer: NodeJS.Timeout | undefined;

  start(roots: () => string[]): void {
    this.#timer = setInterval(() => {
      this.samples++;
      const perTask = new Map<string, number>();
      for (const p of jobProcesses(roots()))
        if (p.comm === 'ffmpeg') perTask.set(p.task, (perTask.get(p.task) ?? 0) + 1);
      for (const [task, n] of perTask) if (n > 1) this.twiceAtOnce.add(task);
    }, 50);
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

export function overlappingRuns(logs: string[], kills: KillRecord[]): Map<string, string> {
  const killedAt = new Map(kills.map((k) => [k.pid, k.at]));
  const runs = new Map<string, { task: string; pid: number; start: number; end: number }>();
  for (const line of logs.flatMap((l) => l.split('\n')).filter(Boolean)) {
    let e: { msg?: string; taskId?: string; attempt?: number; pid?: number; time?: string | number };
    try {
      e = JSON.parse(line);
    } catch {
      continue;
    }
    if (!e.taskId || e.pid === undefined || e.time === undefined) continue;
    // The service logs ISO times; epoch milliseconds are pino's default.
    const time = typeof e.time === 'string' ? Date.parse(e.time) : e.time;
    const key = `${e.pid}:${e.taskId}:${e.attempt}`;
    if (e.msg === 'task started')
      runs.set(key, { task: e.taskId, pid: e.pid, start: time, end: killedAt.get(e.pid) ?? Infinity });
    else if (e.msg === 'task completed' || e.msg === 'task failed' || e.msg === 'task stopped') {
      const r = runs.get(key);
      if (r) r.end = time;
    }
  }
  const byTask = new Map<string, { pid: number; start: number; end: number }[]>();
  for (const r of runs.values()) byTask.set(r.task, [...(byTask.get(r.task) ?? []), r]);
  const twice = new Map<string, string>();
  for (const [task, rs] of byTask) {
    rs.sort((a, b) => a.start - b.start);
    for (let i = 1; i < rs.length; i++)
      if ((rs[i]?.start ?? 0) < (rs[i - 1]?.end ?? 0))
        twice.set(task, rs.map((r) => `pid ${r.pid} ${r.start}-${r.end}`).join(', '));
  }
  return twice;
}

export async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = path.join(dir, e.name);
    total += e.isDirectory()
      ? await dirBytes(p)
      : await stat(p).then(
          (s) => s.size,
          () => 0,
        );
  }
  return total;
}

/**
 * For each run a killed worker held and that was taken back (the next claim counts one more
 * crash): ms from the kill to that claim. A run that ended in the instant between the
 * bench's look and the kill (completed, or failed into its backoff) is not a reclaim.
 */
export async function reclaimLatencies(db: Db, kills: KillRecord[]): Promise<number[]> {
  const out: number[] = [];
  for (const k of kills)
    for (const h of k.held) {
      const rows = await db.query<{ at: Date; crashes: number }>(
        `SELECT created_at AS at, (task->>'crashes')::int AS crashes FROM task_events
         WHERE task_id = $1 AND task->>'phase' = 'running' AND (task->>'attempts')::int > $2
         ORDER BY created_at LIMIT 1`,
        [h.id, h.attempts],
      );
      const next = rows[0];
      if (next && next.crashes > h.crashes) out.push(new Date(next.at).getTime() - k.at);
    }
  return out;
}
