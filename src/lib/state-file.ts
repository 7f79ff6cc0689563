import { readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { MediaplaneError } from './errors.ts';
import { ensurePrivateDir } from './private-dir.ts';

/** Another process created the state file but it holds nothing readable. */
export class StateFileError extends MediaplaneError {
  readonly code = 'state_file_unreadable';
  readonly statusCode = 500;
}

/** A state file's trimmed text, or undefined when it is missing or empty. */
async function readTrimmed(path: string): Promise<string | undefined> {
  try {
    return (await readFile(path, 'utf8')).trim() || undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * The text kept in `path` (a secret generated on first start: a salt, a key), creating it
 * with `make()` when absent, mode 0600, in a directory made private (issue #25). Processes
 * that start together on one data dir agree: the file is written with `wx`, so the first
 * write wins and the others read it.
 */
export async function readOrCreate(path: string, make: () => string | Promise<string>): Promise<string> {
  const existing = await readTrimmed(path);
  if (existing) return existing;
  await ensurePrivateDir(dirname(path));
  const fresh = (await make()).trim();
  try {
    await writeFile(path, `${fresh}\n`, { flag: 'wx', mode: 0o600 });
    return fresh;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const winner = await readTrimmed(path);
    if (!winner) throw new StateFileError(`${path} is empty or unreadable`);
    return winner;
  }
}
