// What the Tasks pages share: the Task as GET /api/task/{id} shows it (spec/API.md "The Task"),
// what a person can do with it, and how its state reads.

import { PhaseBadge, Progress } from '../components/index.ts';
import { isActive } from '../phases.ts';
import type { Task } from '../wire.ts';

/** What a person can do with it now (spec/API.md: retry a failed or cancelled one, cancel a waiting or running one). */
export function canCancel(t: Task): boolean {
  return isActive(t);
}
export function canRetry(t: Task): boolean {
  return t.status.phase === 'failed' || t.status.phase === 'cancelled';
}

/** The phase, with a progress bar while it runs. */
export function TaskState({ task }: { task: Task }) {
  const { phase, progress } = task.status;
  if (phase !== 'running') return <PhaseBadge phase={phase} />;
  return (
    <div class="task-state">
      <PhaseBadge phase={phase} />
      <Progress value={progress} label={`Task ${task.id.slice(0, 8)} progress`} />
    </div>
  );
}

/** The short form of an id a person can tell apart in a list. */
export function shortId(id: string): string {
  return id.slice(0, 8);
}
