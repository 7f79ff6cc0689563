import { phaseTone } from '../phases.ts';
import type { AssetPhase, TaskPhase } from '../wire.ts';

/** A task's or an asset's phase as a small badge, coloured by its tone (phases.ts). */
export function PhaseBadge({ phase }: { phase: TaskPhase | AssetPhase }) {
  return <span class={`badge badge-${phaseTone(phase)}`}>{phase}</span>;
}
