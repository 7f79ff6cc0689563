import type { ComponentChildren } from 'preact';

/** `text` with each of `names` (setting names) set as code. */
function withNames(text: string, names: string[]): ComponentChildren[] {
  if (names.length === 0) return [text];
  const pattern = new RegExp(`(${names.map((n) => n.replace(/[^\w]/g, '\\$&')).join('|')})`);
  return text.split(pattern).map((part, i) => (names.includes(part) ? <code key={i}>{part}</code> : part));
}

/**
 * A feature this server is not set up for, said instead of offering it: what it is, and what
 * enabling it takes (the server's own sentence, its setting names as code).
 */
export function FeatureOff({
  title,
  feature,
  children,
}: {
  title: string;
  feature: { about: string; settings: string[] };
  children?: ComponentChildren;
}) {
  return (
    <div class="feature-off">
      <p>
        <strong>{title}</strong> is not set up on this server. {withNames(feature.about, feature.settings)}
      </p>
      {children}
    </div>
  );
}
