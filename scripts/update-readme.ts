// Rewrites the settings table between the README's markers from the config schema.
import { readFileSync, writeFileSync } from 'node:fs';
import { settingsTable } from '../src/config/index.ts';

const file = new URL('../README.md', import.meta.url);
const text = readFileSync(file, 'utf8');
const next = text.replace(/(<!-- settings:begin -->\n)[\s\S]*?(<!-- settings:end -->)/, `$1${settingsTable()}\n$2`);
writeFileSync(file, next);
