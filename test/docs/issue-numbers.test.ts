// What users read speaks of what the service does, not of our issue tracker: no "issue #N" in
// the README, the docs, every command's --help (the settings' descriptions included) or the
// console's sources (their comments too: a browser shows them to anyone who opens the source).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { globSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { it } from 'node:test';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ISSUE = /\bissues? ?#?\d+\b/i;
const run = promisify(execFile);

/** Each line of `text` that names an issue, with where it is. */
function issueLines(where: string, text: string): string[] {
  return text
    .split('\n')
    .flatMap((line, i) => (ISSUE.test(line) ? [`${where}:${i + 1}: ${line.trim().slice(0, 120)}`] : []));
}

it('the README, the docs and the console sources name no issue numbers', () => {
  const files = globSync(['README.md', 'docs/**/*.md', 'console/src/**/*.{ts,tsx,css}', 'console/*.html'], {
    cwd: ROOT,
  });
  assert.ok(files.length > 10, `files: ${files.join(', ')}`);
  const found = files.flatMap((f) => issueLines(f, readFileSync(`${ROOT}/${f}`, 'utf8')));
  assert.deepEqual(found, []);
});

it('no --help output names an issue number', async () => {
  const cli = (args: string[]) => run(process.execPath, [`${ROOT}/bin/mediaplane.js`, ...args], { cwd: ROOT });
  const top = (await cli(['--help'])).stdout;
  const commands = [...top.matchAll(/^ {2}(\w[\w-]*)\s/gm)].map((m) => m[1] ?? '');
  assert.ok(commands.length >= 8, top);
  const helps = await Promise.all(commands.map(async (c) => [c, (await cli([c, '--help'])).stdout] as const));
  const found = [top, ...helps].flatMap((h) =>
    typeof h === 'string' ? issueLines('mediaplane --help', h) : issueLines(`mediaplane ${h[0]} --help`, h[1]),
  );
  assert.deepEqual(found, []);
});
