import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after } from 'node:test';
import { loadConfig, type SettingKey } from '../../src/config/index.ts';
import { type Db, openDb } from '../../src/db/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { startRoles, type RoleSet, type StartedRoles } from '../../src/main.ts';
import { seedEmbeddedDb } from './embedded-template.ts';
import { TEST_ENCODE_SETTINGS } from './encode-defaults.ts';
import { stopTestPostgres, testPostgres } from './postgres.ts';

export type DatabaseKind = 'embedded' | 'postgres';

/** Every log line a test server wrote, for asserting that secrets never appear. */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    cb();
  }
  get text(): string {
    return this.lines.join('\n');
  }
}

export interface TestServer {
  url: string;
  running: StartedRoles;
  logs: LogCapture;
  dataDir: string;
  databaseUrl: string | undefined;
  /** Creates an API key for `owner` and returns it. */
  key(owner: string): Promise<string>;
  /** fetch against the server with a bearer key and JSON body. */
  call(
    method: string,
    path: string,
    opts?: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> },
  ): Promise<{ status: number; body: any; headers: Headers }>;
  stop(): Promise<void>;
}

/** The PostgreSQL databases to run a suite against: embedded always, a server when one can run. */
export async function databaseKinds(): Promise<{ kind: DatabaseKind; skip: string | false }[]> {
  const server = await testPostgres();
  return [
    { kind: 'embedded', skip: false },
    { kind: 'postgres', skip: server ? false : 'no PostgreSQL server available (apt-get install postgresql)' },
  ];
}

/** A database URL for `kind`: undefined (embedded) or a fresh database on the test server. */
export async function databaseFor(kind: DatabaseKind): Promise<string | undefined> {
  if (kind === 'embedded') return undefined;
  const server = await testPostgres();
  if (!server) throw new Error('no PostgreSQL test server');
  return server.createDatabase();
}

/**
 * A migrated database of `kind` of its own, for a test that drives the stores without a server;
 * an embedded one is a copy of the run's migrated template in a folder of its own.
 */
export async function openTestDb(kind: DatabaseKind): Promise<Db> {
  if (kind === 'postgres') return openDb({ databaseUrl: await databaseFor(kind) });
  const dataDir = mkdtempSync(join(tmpdir(), 'mediaplane-test-db-'));
  await seedEmbeddedDb(dataDir);
  const db = await openDb({ dataDir });
  return {
    ...db,
    async close() {
      await db.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

after(() => stopTestPostgres());

export async function startTestServer(opts: {
  database?: DatabaseKind;
  databaseUrl?: string | undefined;
  settings?: Partial<Record<SettingKey, unknown>>;
  roles?: RoleSet;
  dataDir?: string;
}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'mediaplane-test-'));
  const databaseUrl = opts.databaseUrl ?? (await databaseFor(opts.database ?? 'embedded'));
  if (databaseUrl === undefined && opts.settings?.databaseUrl === undefined) await seedEmbeddedDb(dataDir);
  const config = loadConfig({
    env: {},
    overrides: {
      port: 0,
      host: '127.0.0.1',
      dataDir,
      databaseUrl,
      allowPrivateUrls: true,
      pollMs: 50,
      heartbeatMs: 200,
      leaseMs: 2000,
      retryBackoffMs: 50,
      shutdownGraceMs: 2000,
      logLevel: 'info',
      // Live ingest listens only in the tests that ask for it (on ports they pick).
      rtmpPort: 0,
      srtPort: 0,
      // A publish's end ends its session at once (EXT-X-ENDLIST, the recording queued) unless a
      // test of reconnects sets a window.
      liveReconnectSecs: 0,
      ...TEST_ENCODE_SETTINGS,
      ...opts.settings,
    },
  });
  const logs = new LogCapture();
  const running = await startRoles(
    config,
    opts.roles ?? { api: true, worker: true },
    createLogger({ level: config.logLevel, destination: logs }),
  );
  const url = running.url ?? '';
  return {
    url,
    running,
    logs,
    dataDir,
    databaseUrl,
    key: async (owner) => (await running.core.accounts.createKey(owner)).key,
    async call(method, path, o = {}) {
      const headers: Record<string, string> = { ...o.headers };
      if (o.key) headers.authorization = `Bearer ${o.key}`;
      let body: string | undefined = o.raw;
      if (o.body !== undefined) body = JSON.stringify(o.body);
      if (body !== undefined) headers['content-type'] ??= 'application/json';
      const res = await fetch(url + path, { method, headers, ...(body === undefined ? {} : { body }) });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {}
      return { status: res.status, body: parsed, headers: res.headers };
    },
    async stop() {
      await running.stop();
      if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Polls until `check` returns a truthy value, or fails after `timeoutMs`. */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false | null>,
  timeoutMs = 15_000,
  what = 'condition',
): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A valid transcode body with S3 storage; `over` replaces top-level parts. */
export function transcodeBody(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    input: { url: 'http://127.0.0.1:9/video.mp4' },
    storage: {
      type: 's3',
      endpoint: 'http://127.0.0.1:9000',
      bucket: 'out',
      credentials: { accessKeyId: 'AKIATESTKEY', secretAccessKey: 'sEcReT/do-not-leak+123' },
    },
    outputs: { hls: { path: '/out/hls' }, mp4: { path: 'out/mp4' } },
    ...over,
  };
}
