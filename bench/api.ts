// POST /api/transcode and GET /api/task/{id}: throughput and p99 latency through the whole
// API (auth, validation, database) against a bare Fastify route measured in the same run,
// plus the idle RSS of `mediaplane start`, and POST /api/transcode with two webhooks subscribed
// to every event against none, in the same run (issue #18: target >= 0.9, the outbox write is
// cheap): with delivery held back during the timed run (outboxRatio), then going out (liveRatio).
// Not part of `npm test`.
//   node bench/api.ts [--seconds 10] [--connections 10] [--only webhooks]
//   (DATABASE_URL set: against that server; --only webhooks runs that leg alone)
// The file is also its own two children (`--child api|receiver`, see below).
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Accounts } from '../src/accounts/index.ts';
import { openDb } from '../src/db/index.ts';
import { startChild } from './child.ts';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const SECONDS = arg('seconds', 10);
const CONNECTIONS = arg('connections', 10);
const ONLY_WEBHOOKS =
  process.argv.includes('--only') && process.argv[process.argv.indexOf('--only') + 1] === 'webhooks';
const BIN = fileURLToPath(new URL('../bin/mediaplane.js', import.meta.url));
const BARE = fileURLToPath(new URL('./bare-server.ts', import.meta.url));
const SELF = fileURLToPath(import.meta.url);

// As a child, this file serves and never goes on to the parent's code below (killed by it).
const CHILD = process.argv.includes('--child') ? process.argv[process.argv.indexOf('--child') + 1] : undefined;
if (CHILD) {
  process.once('disconnect', () => process.exit(1)); // the parent is gone
  await (CHILD === 'api' ? serveApi() : serveReceiver());
  await new Promise(() => {});
}

/**
 * The API role alone, as `mediaplane api` starts it (no worker competes for the CPU), with its
 * webhook dispatcher stopped and started again on the parent's 'hold' and 'deliver' (IPC), so
 * the webhook leg can time the POSTs with delivery held back. Prints its URL.
 */
async function serveApi(): Promise<void> {
  const { loadConfig } = await import('../src/config/index.ts');
  const { startRoles, stopOnSignals } = await import('../src/main.ts');
  const running = await startRoles(loadConfig(), { api: true, worker: false });
  process.on('message', async (m) => {
    if (m === 'hold') await running.webhookDispatcher.stop();
    else running.webhookDispatcher.start();
    process.send?.(m);
  });
  void stopOnSignals(running, running.core.log).then(() => process.exit(0));
  console.log(JSON.stringify({ url: running.url }));
}

/**
 * The webhook receiver, in a process of its own so autocannon's does not also serve the
 * deliveries: answers a POST 204 and counts it; any other request gets the count.
 */
async function serveReceiver(): Promise<void> {
  let received = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method !== 'POST') return void res.end(String(received));
      received++;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  console.log(JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
}

async function run(
  title: string,
  opts: autocannon.Options,
): Promise<{ rps: number; p99: number; non2xx: number; ok: number }> {
  const r = await autocannon({ connections: CONNECTIONS, duration: SECONDS, ...opts });
  const res = { rps: r.requests.average, p99: r.latency.p99, non2xx: r.non2xx, ok: r['2xx'] };
  console.log(
    `${title.padEnd(36)} ${res.rps.toFixed(0).padStart(7)} req/s   p99 ${String(res.p99).padStart(4)} ms   non-2xx ${res.non2xx}`,
  );
  return res;
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
// The webhook leg's owners: as many again with no webhook, and as many with two each, so
// neither leg meets the queue limit nor the other leg's tasks in its count.
const quietKeys: string[] = [];
const hookedKeys: string[] = [];
{
  const db = await openDb({ databaseUrl: process.env.DATABASE_URL, dataDir });
  const accounts = new Accounts(db);
  for (let i = 0; i < OWNERS; i++) {
    keys.push((await accounts.createKey(`bench${i}`)).key);
    quietKeys.push((await accounts.createKey(`quiet${i}`)).key);
    hookedKeys.push((await accounts.createKey(`hooked${i}`)).key);
  }
  await db.close();
}
const key = keys[0] ?? '';
/** Each request with the next key of `list`, as many clients would send them. */
function rotating(list: string[]): autocannon.Request {
  let next = 0;
  return {
    setupRequest: (req) => ({
      ...req,
      headers: { ...req.headers, authorization: `Bearer ${list[next++ % list.length]}` },
    }),
  };
}
const rotate = rotating(keys);
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

/**
 * POST /api/transcode by owners with two webhooks on every event, against owners with none
 * before and after (the ratios are to the mean of the two). Twice: (a) with the dispatcher
 * held back during the timed run, so the POSTs pay only what they write (the event, the
 * outbox row), then let go and timed until every delivery has arrived (drain); (b) with the
 * deliveries going out during the run, sent by the API process and received in another.
 * The none runs have the dispatcher running, as a service has: one more none run with it held
 * back shows what its passes (woken by every event, webhook or not) cost the POSTs.
 */
async function webhookLeg(api: ChildProcess, apiUrl: string): Promise<void> {
  const receiver = await startChild([SELF, '--child', 'receiver'], {}, /"url":"([^"]+)"/);
  const received = async () => Number(await (await fetch(receiver.url)).text());
  /** Seconds until the receiver has counted `n` (two minutes at most). */
  const drain = async (n: number) => {
    const t0 = Date.now();
    while ((await received()) < n && Date.now() - t0 < 120_000) await new Promise((r) => setTimeout(r, 50));
    return (Date.now() - t0) / 1000;
  };
  const tell = (m: 'hold' | 'deliver') =>
    new Promise<void>((resolve) => {
      api.once('message', () => resolve());
      api.send(m);
    });
  try {
    const events = ['task.spawned', 'task.updated', 'task.completed', 'task.failed'];
    for (const k of hookedKeys)
      for (const name of ['bench-a', 'bench-b']) {
        const res = await fetch(`${apiUrl}/api/webhook`, {
          method: 'POST',
          headers: { authorization: `Bearer ${k}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name, url: `${receiver.url}/hook`, events, sharedSecret: 'bench-secret' }),
        });
        if (!res.ok) throw new Error(`POST /api/webhook: ${res.status} ${await res.text()}`);
      }
    const posts = (list: string[]): autocannon.Options => ({
      url: `${apiUrl}/api/transcode`,
      method: 'POST',
      headers,
      body,
      requests: [rotating(list)],
    });
    console.log(`\n${hookedKeys.length} owners with two webhooks each against ${quietKeys.length} with none`);
    const none1 = await run('POST /api/transcode, no webhook', posts(quietKeys));
    await tell('hold');
    const noneHeld = await run('no webhook, dispatcher held back', posts(quietKeys));
    const held = await run('two webhooks, delivery held back', posts(hookedKeys));
    const heldDuring = await received();
    await tell('deliver');
    // One event (task.spawned) per task created, one delivery per webhook: two per 2xx. The
    // POSTs in flight when autocannon stops (up to one per connection) are served but not
    // counted in its 2xx, so a few more than that arrive.
    const heldDrain = await drain(2 * held.ok);
    const heldCount = await received();
    console.log(
      `  deliveries: ${heldDuring} during the run, ${heldCount} of ${2 * held.ok} ${heldDrain.toFixed(1)} s after delivery started`,
    );
    const live = await run('two webhooks, delivering', posts(hookedKeys));
    const liveDuring = (await received()) - heldCount;
    const liveDrain = await drain(heldCount + 2 * live.ok);
    console.log(
      `  deliveries: ${liveDuring} during the run, ${(await received()) - heldCount} of ${2 * live.ok} ${liveDrain.toFixed(1)} s after it`,
    );
    const none2 = await run('POST /api/transcode, no webhook again', posts(quietKeys));
    const rps = (none1.rps + none2.rps) / 2;
    const p99 = Math.max(1, (none1.p99 + none2.p99) / 2);
    console.log(
      `outboxRatio (held back / none): ${(held.rps / rps).toFixed(3)} (target >= 0.9)   p99 ratio ${(held.p99 / p99).toFixed(2)}   drain ${heldDrain.toFixed(1)} s`,
    );
    console.log(
      `  against no webhook with the dispatcher held back too: ${(held.rps / noneHeld.rps).toFixed(3)}; that one against none: ${(noneHeld.rps / rps).toFixed(3)}`,
    );
    console.log(
      `liveRatio (delivering / none):  ${(live.rps / rps).toFixed(3)}   p99 ratio ${(live.p99 / p99).toFixed(2)}   deliveries counted ${await received()} of ${2 * (held.ok + live.ok)}`,
    );
  } finally {
    receiver.child.kill();
  }
}

// Idle RSS of the whole service (API, worker, gateway, local orchestrator) after start-up.
async function idleRssKiB(): Promise<number> {
  const whole = await startChild([BIN, 'start'], { ...env, MEDIAPLANE_LOG_LEVEL: 'info' }, /"url":"(http:\/\/[^"]+)"/);
  await new Promise((r) => setTimeout(r, 3000));
  const rss = rssKiB(whole.child.pid ?? 0);
  whole.child.kill('SIGTERM');
  await new Promise((r) => whole.child.once('exit', r));
  return rss;
}
const idleRss = ONLY_WEBHOOKS ? 0 : await idleRssKiB();

const bare = ONLY_WEBHOOKS ? undefined : await startChild([BARE], {}, /"url":"([^"]+)"/);
// `api` alone: no worker competes for the CPU, so this measures the HTTP path.
const api = await startChild([SELF, '--child', 'api'], env, /"url":"([^"]+)"/);
try {
  console.log(`autocannon: ${CONNECTIONS} connections, ${SECONDS} s per run, embedded database\n`);
  if (bare) {
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
  }
  await webhookLeg(api.child, api.url);
} finally {
  bare?.child.kill();
  api.child.kill('SIGTERM');
  await new Promise((r) => api.child.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
}
