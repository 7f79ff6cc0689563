import { useState } from 'preact/hooks';
import { Button } from './Button.tsx';

/** Copies `text` to the clipboard and says so (falls back to selecting nothing: shows an error). */
export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setState('copied');
    } catch {
      setState('failed');
    }
    setTimeout(() => setState('idle'), 2000);
  };
  return (
    <span>
      <Button onClick={copy}>{label}</Button>{' '}
      <span role="status" class="hint">
        {state === 'copied' ? 'Copied' : state === 'failed' ? 'Copy failed: select the text and copy it' : ''}
      </span>
    </span>
  );
}
