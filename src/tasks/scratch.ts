import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { UUID_PATTERN } from '../lib/ids.ts';
import { killAndWait, processesInside } from './processes.ts';
import { type RunKey, runKey } from './queue.ts';

// Scratch directories of runs nobody runs any more (issue #20). A run's directory
// (`<scratchRoot>/<taskId>-<attempt>`, worker.ts) holds its whole downloaded input and its
// partial outputs; its worker removes it when the run ends, but a worker that is killed
// cannot. The next worker with the same scratch root removes the directories that no live
// lease holds, after stopping whatever process of this user still works in them (never
// another user's, issue #25), so crashes cannot fill the disk and a reclaimed task never
// runs beside a leftover encoder of its last run.

const RUN_DIR = new RegExp(`^(${UUID_PATTERN})-(\\d+)$`, 'i');

export interface SweepOptions {
  root: string;
  /** Which of these runs a live lease holds (Queue.liveRuns). */
  liveRuns(runs: readonly { id: string; attempt: number }[]): Promise<Set<RunKey>>;
  /** Runs of this process: never swept, whatever the database says (their own worker ends them). */
  ownRuns: ReadonlySet<RunKey>;
}

export interface SweepResult {
  /** Directories removed, by name. */
  removed: string[];
  /** Processes found working in them and killed. */
  killed: number[];
  /** Those of them still there after SIGKILL and a wait (stuck in the kernel). */
  survivors: number[];
}

/** Removes the run directories under `root` that no live lease holds, their processes first. */
export async function sweepScratch(o: SweepOptions): Promise<SweepResult> {
  const runs = await runDirs(o.root);
  if (runs.length === 0) return { removed: [], killed: [], survivors: [] };
  const live = await o.liveRuns(runs);
  const stale = runs.filter((r) => !live.has(r.key) && !o.ownRuns.has(r.key));
  if (stale.length === 0) return { removed: [], killed: [], survivors: [] };
  const dirs = stale.map((r) => join(o.root, r.key));
  const killed = await processesInside(dirs);
  const survivors = await killAndWait(killed);
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  return { removed: stale.map((r) => r.key), killed, survivors };
}

async function runDirs(root: string): Promise<{ id: string; attempt: number; key: RunKey }[]> {
  const entries = await readdir(root, { withFileTypes: true }).catch(() => []);
  const runs: { id: string; attempt: number; key: RunKey }[] = [];
  for (const e of entries) {
    const m = e.isDirectory() ? RUN_DIR.exec(e.name) : null;
    if (!m?.[1] || !m[2]) continue;
    const id = m[1].toLowerCase();
    const attempt = Number(m[2]);
    runs.push({ id, attempt, key: runKey(id, attempt) });
  }
  return runs;
}
