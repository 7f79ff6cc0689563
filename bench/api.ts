// POST /api/transcode and GET /api/task/{id}: throughput and p99 latency through the whole
// API (auth, validation, database) against a bare Fastify route measured in the same run,
// plus the idle RSS of `mediaplane start`. Not part of `npm test`.
//   node bench/api.ts [--seconds 10] [--connections 10]   (DATABASE_URL set: against that server)
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Accounts } from '../src/accounts/index.ts';
import { openDb } from '../src/db/index.ts';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const SECONDS = arg('seconds', 10);
const CONNECTIONS = arg('connections', 10);
const BIN = fileURLToPath(new URL('../bin/mediaplane.js', import.meta.url));
const BARE = fileURLToPath(new URL('./bare-server.ts', import.meta.url));

function startChild(
  args: string[],
  env: Record<string, string>,
  match: RegExp,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (b: Buffer) => {
      out += b.toString();
      const m = match.exec(out);
      if (m?.[1]) resolve({ child, url: m[1] });
    });
    child.once('exit', (code) => reject(new Error(`child exited with ${code}: ${out.slice(-500)}`)));
  });
}

async function run(title: string, opts: autocannon.Options): Promise<{ rps: number; p99: number; non2xx: number }> {
  const r = await autocannon({ connections: CONNECTIONS, duration: SECONDS, ...opts });
  const res = { rps: r.requests.average, p99: r.latency.p99, non2xx: r.non2xx };
  console.log(
    `${title.padEnd(36)} ${res.rps.toFixed(0).padStart(7)} req/s   p99 ${String(res.p99).padStart(4)} ms   non-2xx ${res.non2xx}`,
  );
  return res;
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

/** Waits until `url` answers (the roles log nothing at level warn). */
async function waitUp(url: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (
      await fetch(url).then(
        () => true,
        () => false,
      )
    )
      return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up`);
}

function rssKiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

const dataDir = mkdtempSync(join(tmpdir(), 'mediaplane-bench-'));
// The per-owner queue limit stays at its default (100): POSTs rotate over many owners, as
// many clients would send them, so none is refused and the limit's count is measured too.
const OWNERS = 400;
const env = {
  MEDIAPLANE_DATA_DIR: dataDir,
  MEDIAPLANE_PORT: '0',
  MEDIAPLANE_LOG_LEVEL: 'warn',
  MEDIAPLANE_ALLOW_PRIVATE_URLS: 'true',
};
const keys: string[] = [];
{
  const db = await openDb({ databaseUrl: process.env.DATABASE_URL, dataDir });
  const accounts = new Accounts(db);
  for (let i = 0; i < OWNERS; i++) keys.push((await accounts.createKey(`bench${i}`)).key);
  await db.close();
}
const key = keys[0] ?? '';
let next = 0;
const rotate: autocannon.Request = {
  setupRequest: (req) => ({
    ...req,
    headers: { ...req.headers, authorization: `Bearer ${keys[next++ % keys.length]}` },
  }),
};
const body = JSON.stringify({
  input: { url: 'https://example.com/video.mp4' },
  storage: {
    type: 's3',
    endpoint: 'https://s3.example.com',
    bucket: 'b',
    credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
  },
  outputs: { hls: { path: '/out/hls' }, mp4: { path: '/out/mp4' } },
});
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

// Idle RSS of the whole service (API, worker, gateway, local orchestrator) after start-up.
const whole = await startChild([BIN, 'start'], { ...env, MEDIAPLANE_LOG_LEVEL: 'info' }, /"url":"(http:\/\/[^"]+)"/);
await new Promise((r) => setTimeout(r, 3000));
const idleRss = rssKiB(whole.child.pid ?? 0);
whole.child.kill('SIGTERM');
await new Promise((r) => whole.child.once('exit', r));

const bare = await startChild([BARE], {}, /"url":"([^"]+)"/);
// `api` alone: no worker competes for the CPU, so this measures the HTTP path.
const apiPort = await freePort();
const apiChild = spawn(process.execPath, [BIN, 'api'], {
  env: { ...process.env, ...env, MEDIAPLANE_PORT: String(apiPort) },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const api = { child: apiChild, url: `http://127.0.0.1:${apiPort}` };
await waitUp(`${api.url}/healthz`);
try {
  console.log(`autocannon: ${CONNECTIONS} connections, ${SECONDS} s per run, embedded database\n`);
  const bPost = await run('bare Fastify POST', { url: `${bare.url}/api/transcode`, method: 'POST', headers, body });
  const aPost = await run('mediaplane POST /api/transcode', {
    url: `${api.url}/api/transcode`,
    method: 'POST',
    headers,
    body,
    requests: [rotate],
  });
  const created = (await (await fetch(`${api.url}/api/transcode`, { method: 'POST', headers, body })).json()) as {
    id: string;
  };
  const bGet = await run('bare Fastify GET', { url: `${bare.url}/api/task/${created.id}`, headers });
  const aGet = await run('mediaplane GET /api/task/{id}', { url: `${api.url}/api/task/${created.id}`, headers });
  console.log(
    `\nthroughput ratio POST: ${(aPost.rps / bPost.rps).toFixed(3)}   p99 ratio POST: ${(aPost.p99 / Math.max(1, bPost.p99)).toFixed(2)}`,
  );
  console.log(
    `throughput ratio GET:  ${(aGet.rps / bGet.rps).toFixed(3)}   p99 ratio GET:  ${(aGet.p99 / Math.max(1, bGet.p99)).toFixed(2)}`,
  );
  console.log(`idle RSS of mediaplane start: ${(idleRss / 1024).toFixed(1)} MiB`);
} finally {
  bare.child.kill();
  api.child.kill('SIGTERM');
  await new Promise((r) => api.child.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
}
