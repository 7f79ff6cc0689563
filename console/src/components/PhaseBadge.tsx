/** A phase (an asset's or a task's) as a small badge: ready green, failed red. */
export function PhaseBadge({ phase }: { phase: string }) {
  return <span class={`badge badge-${phase}`}>{phase}</span>;
}
