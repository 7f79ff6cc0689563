import type { ComponentChildren } from 'preact';
import { ErrorText } from './ErrorText.tsx';

/**
 * A labelled control: give the input inside `children` the same `id` (make one with preact's
 * `useId()`), and `aria-describedby={describedBy(id, {error, hint})}`; the error, if any, shows
 * under it in the API's words.
 */
export function Field({
  id,
  label,
  error,
  hint,
  children,
  inline = false,
}: {
  id: string;
  label: ComponentChildren;
  error?: unknown;
  hint?: ComponentChildren;
  children: ComponentChildren;
  /** Label after the control (checkboxes). */
  inline?: boolean;
}) {
  return (
    <div class={`field${inline ? ' field-inline' : ''}`}>
      {!inline && <label for={id}>{label}</label>}
      {children}
      {inline && <label for={id}>{label}</label>}
      {hint && (
        <div class="hint" id={`${id}-hint`}>
          {hint}
        </div>
      )}
      <ErrorText error={error} id={`${id}-error`} />
    </div>
  );
}

/** aria-describedby for a control in a Field with these parts. */
export function describedBy(id: string, parts: { error?: unknown; hint?: unknown }): string | undefined {
  const ids = [parts.hint ? `${id}-hint` : '', parts.error ? `${id}-error` : ''].filter(Boolean);
  return ids.length ? ids.join(' ') : undefined;
}
