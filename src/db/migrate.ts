import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Db } from './types.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));

// Files are named NNN_what.sql and run in name order, each once. Number ranges per domain
// keep parallel work from colliding: 001-099 core, 100-199 llm, 200-299 storage, 300-399 webhooks.
// An advisory lock makes concurrent start-ups of several processes take turns.
const LOCK_ID = 7_240_611;

export async function migrate(db: Db): Promise<string[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
  return db.tx(async (q) => {
    await q.query('SELECT pg_advisory_xact_lock($1)', [LOCK_ID]);
    await q.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const done = new Set((await q.query<{ name: string }>('SELECT name FROM schema_migrations')).map((r) => r.name));
    const applied: string[] = [];
    for (const file of files) {
      if (done.has(file)) continue;
      const sql = await readFile(MIGRATIONS_DIR + file, 'utf8');
      // Statements are split on lines holding only ';' so each runs through the same
      // parameterless path on both drivers inside this transaction.
      for (const stmt of sql
        .split(/^;\s*$/m)
        .map((s) => s.trim())
        .filter(Boolean))
        await q.query(stmt);
      await q.query('INSERT INTO schema_migrations (name) VALUES ($1)', [file]);
      applied.push(file);
    }
    return applied;
  });
}
