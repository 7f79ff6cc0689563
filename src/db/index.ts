import { join } from 'node:path';
import type { Db } from './types.ts';
import { openEmbedded } from './embedded.ts';
import { openPostgres } from './postgres.ts';
import { migrate } from './migrate.ts';

export type { Db, Queryable } from './types.ts';
export { EmbeddedDbLockedError } from './embedded.ts';
export { migrate } from './migrate.ts';

export interface OpenDbOptions {
  /** A PostgreSQL connection string; without it, the embedded database in `dataDir`. */
  databaseUrl?: string | undefined;
  dataDir?: string | undefined;
  poolSize?: number;
  /** Run pending migrations (default true). */
  migrate?: boolean;
}

/** Opens the database the settings name and brings its schema up to date. */
export async function openDb(opts: OpenDbOptions): Promise<Db> {
  const db = opts.databaseUrl
    ? await openPostgres({ url: opts.databaseUrl, poolSize: opts.poolSize ?? 10 })
    : await openEmbedded(opts.dataDir === undefined ? {} : { dir: join(opts.dataDir, 'db') });
  if (opts.migrate !== false) {
    try {
      await migrate(db);
    } catch (err) {
      await db.close();
      throw err;
    }
  }
  return db;
}
export { serveDbSocket, connectDbSocket } from './socket.ts';

/** Where a server with the embedded database answers SQL for admin commands. */
export const dbSocketPath = (dataDir: string) => join(dataDir, 'db.sock');
