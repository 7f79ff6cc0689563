/** A labelled progress bar; `value` 0..1, or undefined for "working, amount unknown". */
export function Progress({ value, label }: { value: number | undefined; label: string }) {
  const pct = value === undefined ? undefined : Math.round(Math.max(0, Math.min(1, value)) * 100);
  return (
    <div class="progress">
      <progress max={100} value={pct} aria-label={label} />
      <span class="progress-text" aria-hidden="true">
        {pct === undefined ? '…' : `${pct}%`}
      </span>
    </div>
  );
}
