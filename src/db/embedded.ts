import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { MediaplaneError } from '../lib/errors.ts';
import { ensurePrivateDir } from '../lib/private-dir.ts';
import type { Db, Queryable } from './types.ts';

/** Another live process holds the embedded database (PGlite is single-process). */
export class EmbeddedDbLockedError extends MediaplaneError {
  readonly code = 'database_in_use';
  readonly statusCode = 503;
  readonly pid: number;
  constructor(pid: number, dir: string) {
    super(
      `the embedded database in ${dir} is in use by process ${pid}; stop it, or set DATABASE_URL to share a PostgreSQL server between processes`,
    );
    this.pid = pid;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

// PGlite keeps the whole database in one process; a second process opening the same files
// would corrupt them. A lock file with our pid keeps others out and is ignored once stale.
async function takeLock(dir: string): Promise<() => Promise<void>> {
  const file = join(dir, 'pglite.lock');
  const held = Number.parseInt(await readFile(file, 'utf8').catch(() => ''), 10);
  if (Number.isInteger(held) && held !== process.pid && alive(held)) throw new EmbeddedDbLockedError(held, dir);
  await writeFile(file, String(process.pid));
  return () => rm(file, { force: true });
}

/** The embedded PostgreSQL (PGlite) kept in `dir`, or in memory when `dir` is undefined. */
export async function openEmbedded(opts: { dir?: string }): Promise<Db> {
  let unlock = async () => {};
  if (opts.dir) {
    // PGlite writes its files 0666 whatever the umask, and the WAL holds secrets: the folder
    // is their only guard (issue #25). The data dir above is made private too (main.ts, cli/).
    await ensurePrivateDir(opts.dir);
    unlock = await takeLock(opts.dir);
  }
  // PostgreSQL's default 128 MB of shared buffers stays resident in the wasm heap; the
  // embedded database serves one process on a laptop, where 16 MB measured ~100 MB less RSS.
  const startParams = [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'];
  const pglite = await PGlite.create({ ...(opts.dir ? { dataDir: join(opts.dir, 'pgdata') } : {}), startParams });
  const on = (q: Pick<PGlite, 'query'>): Queryable => ({
    query: async <T extends object>(sql: string, params?: readonly unknown[]) =>
      (await q.query<T>(sql, params ? [...params] : undefined)).rows,
  });
  const { query } = on(pglite);
  return {
    kind: 'embedded',
    query,
    tx: (fn) => pglite.transaction((t) => fn(on(t))),
    async exec(sql) {
      await pglite.exec(sql);
    },
    async listen(channel, onMessage) {
      return pglite.listen(channel, onMessage);
    },
    async notify(channel, payload) {
      await pglite.query('SELECT pg_notify($1, $2)', [channel, payload]);
    },
    async close() {
      await pglite.close();
      await unlock();
    },
  };
}
