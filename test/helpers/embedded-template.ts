import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { openDb } from '../../src/db/index.ts';

// An embedded database (PGlite) costs about 5 s to create and migrate on a 2-core host, and
// 0.3 s to copy from one that is already migrated: a test server's data dir starts with a copy
// of a migrated one. PGlite keeps its cluster as plain files under <dataDir>/db,
// where the server's openDb looks (src/db/index.ts), so a copy is all it takes.

/** Set by scripts/test.ts: a data dir whose migrated embedded database every file copies. */
export const EMBEDDED_TEMPLATE_ENV = 'MEDIAPLANE_TEST_EMBEDDED_TEMPLATE';

/** Makes a data dir in `dir` holding a migrated embedded database, closed, for copies. */
export async function makeEmbeddedTemplate(dir: string): Promise<string> {
  const db = await openDb({ dataDir: dir });
  await db.close();
  return dir;
}

let own: Promise<string> | undefined;

/** The run's template (scripts/test.ts), or one this process makes once when run on its own. */
function template(): Promise<string> {
  const given = process.env[EMBEDDED_TEMPLATE_ENV];
  if (given) return Promise.resolve(given);
  own ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mediaplane-embedded-template-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    return makeEmbeddedTemplate(dir);
  })();
  return own;
}

/**
 * Gives `dataDir` a migrated embedded database unless it has one (a restarted server keeps
 * its own). The template's lock file, naming the process that made it, stays behind.
 */
export async function seedEmbeddedDb(dataDir: string): Promise<void> {
  const target = join(dataDir, 'db');
  if (existsSync(target)) return;
  const from = join(await template(), 'db');
  cpSync(from, target, { recursive: true, filter: (src) => basename(src) !== 'pglite.lock' });
}
