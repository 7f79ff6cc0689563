// Rewrites the generated tables of the docs: the README's settings table from the config
// schema, and docs/keys.md's key limits table from the table of limit settings.
import { readFileSync, writeFileSync } from 'node:fs';
import { limitsDocTable } from '../src/accounts/index.ts';
import { settingsTable } from '../src/config/index.ts';

function rewrite(path: string, marker: string, table: string): void {
  const file = new URL(path, import.meta.url);
  const text = readFileSync(file, 'utf8');
  const between = new RegExp(`(<!-- ${marker}:begin -->\\n)[\\s\\S]*?(<!-- ${marker}:end -->)`);
  if (!between.test(text)) throw new Error(`${path}: no <!-- ${marker}:begin/end --> markers`);
  writeFileSync(file, text.replace(between, `$1${table}\n$2`));
}

rewrite('../README.md', 'settings', settingsTable());
rewrite('../docs/keys.md', 'key-limits', limitsDocTable());
