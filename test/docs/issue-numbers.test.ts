// What users read speaks of what the service does, not of our issue tracker: no "issue #N" in
// the README, the docs, every command's --help (the settings' descriptions included) or the
// console's sources (their comments too: a browser shows them to anyone who opens the source).

import assert from 'node:assert/strict';
import { globSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ISSUE = /\bissues? ?#?\d+\b/i;

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
  // In this process (the CLI's own main): a child process per command cost half a minute.
  const { main } = await import('../../src/main.ts');
  const help = async (args: string[]): Promise<string> => {
    const write = process.stdout.write;
    let out = '';
    process.stdout.write = ((chunk: string | Uint8Array) => {
      out += String(chunk);
      return true;
    }) as typeof process.stdout.write;
    try {
      await main(args);
    } finally {
      process.stdout.write = write;
    }
    return out;
  };
  const top = await help(['--help']);
  const commands = [...top.matchAll(/^ {2}(\w[\w-]*)\s/gm)].map((m) => m[1] ?? '');
  assert.ok(commands.length >= 8, top);
  const found = issueLines('mediaplane --help', top);
  for (const c of commands) {
    const text = await help([c, '--help']);
    assert.ok(text.length > 40, `mediaplane ${c} --help printed: ${text}`);
    found.push(...issueLines(`mediaplane ${c} --help`, text));
  }
  assert.deepEqual(found, []);
});
