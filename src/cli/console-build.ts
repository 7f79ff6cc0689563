import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../lib/log.ts';

// Every way of starting the API serves the console (issue #29): `npm ci` builds it through
// `prepare`, and `mediaplane start` / `api` build it here when console/dist is missing or
// older than console/src (a checkout updated without `npm ci`, an edit). A build that fails
// (esbuild missing) is logged and the API starts anyway: `/` then says how to build it.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export function buildConsoleIfStale(log: Logger): void {
  const script = path.join(root, 'scripts/build-console.ts');
  if (!existsSync(script) || !existsSync(path.join(root, 'console/src'))) return;
  const run = spawnSync(process.execPath, [script, '--if-stale'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
  const said = `${run.stderr ?? ''}`.trim();
  if (run.status === 0) {
    if (said) log.info({ console: 'console/dist' }, said);
    return;
  }
  log.warn({ err: run.error?.message ?? said.slice(-2000) }, 'the console could not be built; / will say so');
}
