// How a task's or an asset's phase reads, in one mapping for every page: done (ready,
// completed) green, failed red, on its way (pending, waiting, running, uploading, processing,
// deleting) in the accent colour, stopped by a person (cancelled, deleted) muted. The phases
// are the contract's (wire.ts): a phase the server adds is a type error here until it has a tone.

import { everyOf } from './every-of.ts';
import type { Asset, AssetPhase, Task, TaskPhase } from './wire.ts';

/** The badge's look; `ready` is the class the done phases have always had (badge-ready). */
export type PhaseTone = 'ready' | 'busy' | 'failed' | 'stopped';

const TONES: Record<TaskPhase | AssetPhase, PhaseTone> = {
  pending: 'busy',
  waiting: 'busy',
  running: 'busy',
  completed: 'ready',
  failed: 'failed',
  cancelled: 'stopped',
  uploading: 'busy',
  processing: 'busy',
  ready: 'ready',
  deleting: 'busy',
  deleted: 'stopped',
};

export function phaseTone(phase: TaskPhase | AssetPhase): PhaseTone {
  return TONES[phase];
}

/** Every task phase, in the order a task passes them (the phase filter's options). */
export const TASK_PHASES = everyOf<TaskPhase>()(['pending', 'waiting', 'running', 'completed', 'failed', 'cancelled']);

/** Waiting or running: its progress may still change. */
export function isActive(t: Task): boolean {
  return phaseTone(t.status.phase) === 'busy';
}

/** An asset whose phase still changes by itself. */
export function settling(a: Asset): boolean {
  return phaseTone(a.status.phase) === 'busy';
}
