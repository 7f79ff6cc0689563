import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { useAction } from '../hooks.ts';
import { Button } from './Button.tsx';
import { ErrorText } from './ErrorText.tsx';

/**
 * A delete button that asks first, inline (no window.confirm: a question in the page is
 * keyboard and screen reader friendly). `remove` deletes and moves on; what it throws is
 * shown beside the question, which stays for another try.
 */
export function ConfirmDelete({
  label,
  question,
  remove,
}: {
  /** The first button's words, e.g. "Delete stream". */
  label: string;
  question: ComponentChildren;
  remove(): Promise<void>;
}) {
  const [asking, setAsking] = useState(false);
  const { busy, error, run } = useAction(remove);
  if (!asking)
    return (
      <Button variant="danger" onClick={() => setAsking(true)}>
        {label}
      </Button>
    );
  return (
    <fieldset class="card">
      <legend class="visually-hidden">Confirm deletion</legend>
      <p id="delete-question">{question}</p>
      <div class="row">
        <Button variant="danger" busy={busy} onClick={run} aria-describedby="delete-error">
          Yes, delete it
        </Button>
        <Button onClick={() => setAsking(false)}>Keep it</Button>
      </div>
      <ErrorText error={error} id="delete-error" />
    </fieldset>
  );
}
