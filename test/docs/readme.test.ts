import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { it } from 'node:test';
import { settingsTable } from '../../src/config/index.ts';

it('the README settings table matches the config schema (npm run docs:settings)', () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  assert.ok(readme.includes(settingsTable()), 'README settings table is out of date: run npm run docs:settings');
});

it('the README starts with the two commands: run and test', () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const block = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
  assert.match(block, /^make start/m);
  assert.match(block, /^make test/m);
});
