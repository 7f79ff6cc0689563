// A value from the API (a task's params or output, a delivery's headers) as a person reads it:
// nested definition lists, not JSON. Keys are shown as the API names them, so what a reader
// sees here is what a client would send or get. Raw JSON stays behind the Json toggle.

import type { ComponentChildren } from 'preact';

const MAX_DEPTH = 8;

/** ms timestamps the API puts in fields ending in `At` (createdAt, updatedAt...). */
function isTimeKey(key: string | undefined, v: number): boolean {
  return key !== undefined && /At$/.test(key) && v > 1e12 && v < 1e14;
}

function leaf(value: unknown, key: string | undefined): ComponentChildren {
  if (value === null) return <span class="hint">null</span>;
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (typeof value === 'number') return isTimeKey(key, value) ? new Date(value).toLocaleString() : String(value);
  if (typeof value === 'string') {
    if (value === '') return <span class="hint">(empty)</span>;
    if (/^https?:\/\//.test(value))
      return (
        <a href={value} rel="noreferrer" target="_blank">
          {value}
        </a>
      );
    return value;
  }
  return String(value);
}

/** One value, nested objects and arrays as lists. */
export function ValueList({ value, name, depth = 0 }: { value: unknown; name?: string; depth?: number }) {
  if (value === undefined) return <span class="hint">none</span>;
  if (typeof value !== 'object' || value === null || depth > MAX_DEPTH) return <>{leaf(value, name)}</>;
  if (Array.isArray(value)) {
    if (value.length === 0) return <span class="hint">none</span>;
    if (value.every((v) => typeof v !== 'object' || v === null))
      return <>{value.map((v) => String(leaf(v, undefined))).join(', ')}</>;
    return (
      <ol class="value-list">
        {value.map((v, i) => (
          <li key={i}>
            <ValueList value={v} depth={depth + 1} />
          </li>
        ))}
      </ol>
    );
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return <span class="hint">none</span>;
  return (
    <dl class="props value-props">
      {entries.map(([k, v]) => (
        <div class="value-pair" key={k}>
          <dt>{k}</dt>
          <dd>
            <ValueList value={v} name={k} depth={depth + 1} />
          </dd>
        </div>
      ))}
    </dl>
  );
}
