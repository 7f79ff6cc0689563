// What the Tasks pages share: the Task as GET /api/task/{id} shows it (spec/API.md "The Task"),
// its phases and types, and how a phase reads.

import { Progress } from '../components/index.ts';

export const PHASES = ['pending', 'waiting', 'running', 'completed', 'failed', 'cancelled'] as const;
export const TASK_TYPES = ['transcode-file', 'upload', 'clip', 'export', 'export-data'] as const;

export interface Task {
  id: string;
  type: string;
  createdAt: number;
  scheduledAt?: number;
  projectId?: string;
  inputAssetId?: string;
  outputAssetId?: string;
  params: Record<string, unknown>;
  status: { phase: string; updatedAt: number; progress?: number; errorMessage?: string; retries?: number };
  output?: Record<string, unknown>;
}

/** Waiting or running: its progress may still change. */
export function isActive(t: Task): boolean {
  return t.status.phase === 'pending' || t.status.phase === 'waiting' || t.status.phase === 'running';
}

/** What a person can do with it now (spec/API.md: retry a failed or cancelled one, cancel a waiting or running one). */
export function canCancel(t: Task): boolean {
  return isActive(t);
}
export function canRetry(t: Task): boolean {
  return t.status.phase === 'failed' || t.status.phase === 'cancelled';
}

export function PhaseBadge({ phase }: { phase: string }) {
  const kind = phase === 'completed' ? 'ready' : phase === 'failed' ? 'failed' : phase;
  return <span class={`badge badge-${kind}`}>{phase}</span>;
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
