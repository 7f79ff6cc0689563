import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openDb } from '../../src/db/index.ts';

// A real PostgreSQL server for the tests: MEDIAPLANE_TEST_DATABASE_URL when set, else a
// throwaway cluster started from Debian's packages on a free loopback port (as the
// `postgres` user when the tests run as root, since the server refuses to run as root).

function binDir(): string | null {
  if (existsSync('/usr/local/bin/initdb')) return '/usr/local/bin';
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return null;
  const versions = readdirSync(base).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) if (existsSync(join(base, v, 'bin', 'initdb'))) return join(base, v, 'bin');
  return null;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

export interface TestPostgres {
  /** The server's own `postgres` database: what MEDIAPLANE_TEST_DATABASE_URL would say. */
  url: string;
  /** A fresh database on the server, its schema migrated (a copy of the run's template). */
  createDatabase(): Promise<string>;
  stop(): Promise<void>;
}

let shared: Promise<TestPostgres | null> | undefined;

/**
 * The test server, started once per test process; null (with a reason) when none can run.
 * `npm test` (scripts/test.ts) starts one for all the files and hands it down through
 * MEDIAPLANE_TEST_DATABASE_URL; each file still makes its own databases (issue #26).
 */
export function testPostgres(): Promise<TestPostgres | null> {
  shared ??= start();
  return shared;
}

/** Stops the test server if this process started one. */
export async function stopTestPostgres(): Promise<void> {
  if (!shared) return;
  const server = await shared;
  shared = undefined;
  await server?.stop();
}

export function postgresUnavailableReason(): string {
  return 'no PostgreSQL server binaries (apt-get install postgresql) and MEDIAPLANE_TEST_DATABASE_URL is unset';
}

async function start(): Promise<TestPostgres | null> {
  const external = process.env.MEDIAPLANE_TEST_DATABASE_URL;
  if (external) return withDatabases(external, async () => {});
  const bin = binDir();
  if (!bin) return null;
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'mediaplane-pg-'));
  const sockDir = mkdtempSync(join(tmpdir(), 'mediaplane-pgsock-'));
  // Spawned directly under the postgres user's ids, so signals reach the server itself.
  let ids: { uid: number; gid: number } | Record<string, never> = {};
  if (asRoot) {
    ids = {
      uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
      gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
    };
    chownSync(dir, ids.uid, ids.gid);
    chownSync(sockDir, ids.uid, ids.gid);
  }
  const env = { ...process.env, HOME: dir };
  execFileSync(
    join(bin, 'initdb'),
    ['-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'],
    { stdio: 'ignore', cwd: dir, env, ...ids },
  );
  const port = await freePort();
  const args = [
    '-D',
    join(dir, 'data'),
    '-p',
    String(port),
    '-k',
    sockDir,
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'fsync=off',
    '-c',
    'synchronous_commit=off',
    '-c',
    'full_page_writes=off',
    '-c',
    // Several test files at once share the server (scripts/test.ts), each with its pools.
    'max_connections=500',
  ];
  const child: ChildProcess = spawn(join(bin, 'postgres'), args, { stdio: 'ignore', cwd: dir, env, ...ids });
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  await waitReady(url, child);
  const cleanup = async () => {
    child.kill('SIGINT');
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    rmSync(dir, { recursive: true, force: true });
    rmSync(sockDir, { recursive: true, force: true });
  };
  process.once('exit', () => child.kill('SIGKILL'));
  return withDatabases(url, cleanup);
}

async function waitReady(url: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`postgres exited with ${child.exitCode}`);
    const c = new pg.Client({ connectionString: url });
    try {
      await c.connect();
      await c.end();
      return;
    } catch {
      await c.end().catch(() => {});
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error('postgres did not become ready');
}

/** Set by scripts/test.ts: a migrated database on the test server that every file's databases copy. */
export const DATABASE_TEMPLATE_ENV = 'MEDIAPLANE_TEST_DATABASE_TEMPLATE';

/** Runs one statement on the server's own database (CREATE DATABASE cannot run in a pool's transaction). */
async function onServer(url: string, sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

function databaseUrl(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/**
 * A database on the server with every migration applied, which CREATE DATABASE ... TEMPLATE
 * copies in milliseconds, where each test database used to run every migration.
 * Nobody connects to it after, as PostgreSQL requires of a template.
 */
export async function makeMigratedTemplate(url: string): Promise<string> {
  const name = `mediaplane_template_${process.pid}_${Date.now()}`;
  await onServer(url, `CREATE DATABASE ${name}`);
  const db = await openDb({ databaseUrl: databaseUrl(url, name), poolSize: 1 });
  await db.close();
  return name;
}

function withDatabases(url: string, cleanup: () => Promise<void>): TestPostgres {
  let n = 0;
  // scripts/test.ts made one for the whole run; a file run on its own makes its own, once.
  let template: Promise<string> | undefined;
  const given = process.env[DATABASE_TEMPLATE_ENV];
  const migrated = () => {
    template ??= given ? Promise.resolve(given) : makeMigratedTemplate(url);
    return template;
  };
  return {
    url,
    async createDatabase() {
      const name = `mediaplane_test_${process.pid}_${++n}_${Date.now()}`;
      await onServer(url, `CREATE DATABASE ${name} TEMPLATE ${await migrated()}`);
      return databaseUrl(url, name);
    },
    stop: cleanup,
  };
}
