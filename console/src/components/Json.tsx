import { useState } from 'preact/hooks';

/** Raw JSON only when asked for: a toggle button and, once open, the value pretty-printed. */
export function Json({ value, label = 'JSON' }: { value: unknown; label?: string }) {
  const [open, setOpen] = useState(false);
  return (
    <div class="json">
      <button type="button" class="btn btn-link" aria-expanded={open} onClick={() => setOpen(!open)}>
        {open ? `Hide ${label}` : `Show ${label}`}
      </button>
      {open && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard (axe scrollable-region-focusable)
        <pre tabIndex={0}>{JSON.stringify(value, null, 2)}</pre>
      )}
    </div>
  );
}
