import pg from 'pg';
import type { Db, Queryable } from './types.ts';

// int8 (counts, money in micro-units) as JS numbers: every value we store fits in 2^53.
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format);
  },
};

/** A PostgreSQL server shared by any number of processes. */
export async function openPostgres(opts: { url: string; poolSize: number }): Promise<Db> {
  const pool = new pg.Pool({ connectionString: opts.url, max: opts.poolSize, types });
  // A broken idle connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  let listener: pg.PoolClient | undefined;
  const handlers = new Map<string, Set<(payload: string) => void>>();

  const query: Queryable['query'] = async (sql, params) =>
    (await pool.query(sql, params ? [...params] : undefined)).rows;

  async function getListener(): Promise<pg.PoolClient> {
    if (listener) return listener;
    const client = await pool.connect();
    client.on('notification', (msg) => {
      for (const h of handlers.get(msg.channel) ?? []) h(msg.payload ?? '');
    });
    listener = client;
    return client;
  }

  return {
    kind: 'postgres',
    query,
    async tx(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn({
          query: async (sql, params) => (await client.query(sql, params ? [...params] : undefined)).rows,
        });
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    async exec(sql) {
      await pool.query(sql);
    },
    async listen(channel, onMessage) {
      const client = await getListener();
      let set = handlers.get(channel);
      if (!set) {
        set = new Set();
        handlers.set(channel, set);
        await client.query(`LISTEN ${pg.Client.prototype.escapeIdentifier(channel)}`);
      }
      set.add(onMessage);
      return async () => {
        set.delete(onMessage);
      };
    },
    async notify(channel, payload) {
      await pool.query('SELECT pg_notify($1, $2)', [channel, payload]);
    },
    async close() {
      listener?.release();
      listener = undefined;
      await pool.end();
    },
  };
}
