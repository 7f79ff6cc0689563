import { request, createServer, type Server } from 'node:http';
import { chmod, rm, stat } from 'node:fs/promises';
import type { Db, Queryable } from './types.ts';

// The embedded database lives inside one process. So that `mediaplane keys create` (and
// other admin commands) work while the server runs, the server answers SQL on a Unix socket
// in its data directory. The socket file is created mode 0600 under the data directory: only
// the user who can already read the database files can use it.

export async function serveDbSocket(db: Db, path: string): Promise<{ close(): Promise<void> }> {
  await rm(path, { force: true });
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        try {
          const { sql, params } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
            sql: string;
            params?: unknown[];
          };
          const rows = await db.query(sql, params);
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ rows }));
        } catch (err) {
          res
            .writeHead(400, { 'content-type': 'application/json' })
            .end(JSON.stringify({ error: err instanceof Error ? err.message : String(err) }));
        }
      })();
    });
  });
  await new Promise<void>((resolve, reject) =>
    server.once('error', reject).listen({ path, readableAll: false, writableAll: false }, resolve),
  );
  await chmod(path, 0o600);
  return {
    close: () =>
      new Promise<void>((resolve) => server.close(() => void rm(path, { force: true }).then(() => resolve()))),
  };
}

function post(path: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath: path, method: 'POST', path: '/query', headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A Queryable over a running server's socket, or null when no server answers there. */
export async function connectDbSocket(path: string): Promise<Queryable | null> {
  if (!(await stat(path).catch(() => null))) return null;
  try {
    await post(path, JSON.stringify({ sql: 'SELECT 1' }));
  } catch {
    return null;
  }
  return {
    async query<T extends object>(sql: string, params?: readonly unknown[]): Promise<T[]> {
      const res = await post(path, JSON.stringify({ sql, params }));
      const body = JSON.parse(res.text) as { rows?: T[]; error?: string };
      if (res.status !== 200 || !body.rows) throw new Error(body.error ?? `database socket answered ${res.status}`);
      return body.rows;
    },
  };
}
