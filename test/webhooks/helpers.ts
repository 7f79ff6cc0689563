import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { LookupAddress } from 'node:dns';
import http, { type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterEach, before } from 'node:test';
import { Accounts } from '../../src/accounts/index.ts';
import type { Db } from '../../src/db/index.ts';
import { createLogger, type Logger } from '../../src/lib/log.ts';
import type { Resolve } from '../../src/lib/net-guard.ts';
import { Queue, TaskStore, type TaskEventRow } from '../../src/tasks/index.ts';
import { WebhookDispatcher, type WebhookDispatcherOptions, WebhookStore } from '../../src/webhooks/index.ts';
import { type DatabaseKind, LogCapture, openTestDb } from '../helpers/server.ts';

// What the webhook tests share: a receiver (a real HTTP server on port 0), the signature
// check of docs/webhooks.md, and a database with the stores a test drives.

/**
 * The receiver's check, taken from docs/webhooks.md as written (the block between its
 * `verify:begin` and `verify:end` markers), so the tests verify with the documented code.
 */
async function documentedVerify(): Promise<
  (rawBody: string, header: string, secret: string, toleranceMs?: number) => boolean
> {
  const doc = readFileSync(new URL('../../docs/webhooks.md', import.meta.url), 'utf8');
  const code = /<!-- verify:begin -->\n```js\n([\s\S]*?)```\n<!-- verify:end -->/.exec(doc)?.[1];
  if (!code) throw new Error('docs/webhooks.md has no verify block');
  const dir = mkdtempSync(join(tmpdir(), 'mediaplane-verify-'));
  const file = join(dir, 'verify.mjs');
  writeFileSync(file, code);
  const mod = (await import(pathToFileURL(file).href)) as {
    verifyWebhook: Awaited<ReturnType<typeof documentedVerify>>;
  };
  rmSync(dir, { recursive: true, force: true });
  return mod.verifyWebhook;
}

export const verifyWebhook = await documentedVerify();

export interface Envelope {
  id: string;
  webhookId: string;
  createdAt: number;
  timestamp: number;
  event: string;
  payload: { task: { id: string; phase: string } };
}

export interface Received {
  raw: string;
  headers: IncomingHttpHeaders;
  body: Envelope;
  path: string;
}

/** How the receiver answers request number `n` (0-based): a status, or 'hang' for no answer. */
export type Answer = (
  n: number,
  r: Received,
) => number | 'hang' | { status: number; body?: string; location?: string; statusText?: string };

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  answer: Answer;
  /** Received envelopes' ids, counted. */
  counts(): Map<string, number>;
  /** Requests open now (received, not yet answered or given up by the sender). */
  open: number;
  /** The most requests open at once since the start or the last `resetPeak`. */
  peak: number;
  resetPeak(): void;
  close(): Promise<void>;
}

export async function startReceiver(answer: Answer = () => 204, port = 0): Promise<Receiver> {
  const hanging = new Set<ServerResponse>();
  const r: Receiver = {
    url: '',
    port: 0,
    received: [],
    answer,
    counts() {
      const m = new Map<string, number>();
      for (const x of r.received) m.set(x.body.id, (m.get(x.body.id) ?? 0) + 1);
      return m;
    },
    open: 0,
    peak: 0,
    resetPeak() {
      r.peak = r.open;
    },
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  const server = http.createServer((req, res) => {
    r.open++;
    r.peak = Math.max(r.peak, r.open);
    res.on('close', () => r.open--);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const got: Received = { raw, headers: req.headers, body: JSON.parse(raw) as Envelope, path: req.url ?? '' };
      const n = r.received.length;
      r.received.push(got);
      const a = r.answer(n, got);
      if (a === 'hang') {
        hanging.add(res);
        return;
      }
      const { status, body, location, statusText } = typeof a === 'number' ? { status: a } : a;
      res.writeHead(status, statusText ?? http.STATUS_CODES[status] ?? '', location ? { location } : {});
      res.end(body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  r.port = (server.address() as AddressInfo).port;
  r.url = `http://127.0.0.1:${r.port}/hooks`;
  return r;
}

/** A resolver that answers `answers` in turn (the last one again once they run out), recording each name asked. */
export function rebinding(...answers: string[]): Resolve & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (hostname: string): Promise<LookupAddress[]> => {
    const address = answers[Math.min(asked.length, answers.length - 1)] ?? '';
    asked.push(hostname);
    return [{ address, family: net.isIP(address) }];
  };
  return Object.assign(resolve, { asked });
}

/** The payload tests render: the task's id and phase (the service renders the API's Task). */
export const testRender = (e: TaskEventRow) => ({ task: { id: e.task_id, phase: e.task.phase } });

export interface Bench {
  db: Db;
  store: WebhookStore;
  tasks: TaskStore;
  queue: Queue;
  accounts: Accounts;
  logs: LogCapture;
  log: Logger;
  /** A new owner (tests do not see each other's webhooks) and its project id. */
  owner(): Promise<{ owner: string; projectId: string }>;
  /** A task of `owner` (its task.spawned event is in the outbox). */
  createTask(owner: string, projectId: string): Promise<string>;
  /** A dispatcher with test timings; stopped by `stopDispatchers`. */
  dispatcher(over?: Partial<WebhookDispatcherOptions>): WebhookDispatcher;
  stopDispatchers(): Promise<void>;
  close(): Promise<void>;
}

export async function openBench(kind: DatabaseKind): Promise<Bench> {
  const db = await openTestDb(kind);
  const logs = new LogCapture();
  const log = createLogger({ level: 'debug', destination: logs });
  const dispatchers: WebhookDispatcher[] = [];
  const tasks = new TaskStore(db);
  const accounts = new Accounts(db);
  async function stopDispatchers(): Promise<void> {
    await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
    // What a test left undelivered must not be sent by the next test's dispatchers.
    await db.query(`UPDATE webhook_deliveries SET status = 'failed' WHERE status = 'pending'`);
    await db.query('UPDATE task_events SET dispatched_at = now() WHERE dispatched_at IS NULL');
    // Nor claim its tasks.
    await db.query(`UPDATE tasks SET phase = 'cancelled' WHERE phase IN ('waiting', 'running')`);
  }
  return {
    db,
    store: new WebhookStore(db),
    tasks,
    queue: new Queue(db, { leaseMs: 60_000, maxRetries: 0 }),
    accounts,
    logs,
    log,
    async owner() {
      const owner = `owner-${randomUUID().slice(0, 8)}`;
      return { owner, projectId: await accounts.ensureOwner(owner) };
    },
    async createTask(owner, projectId) {
      const row = await tasks.create({
        owner,
        projectId,
        type: 'transcode-file',
        params: { input: { url: 'http://127.0.0.1:9/in.mp4' } },
        requesterId: null,
        maxQueuedPerOwner: 10_000,
      });
      return row.id;
    },
    dispatcher(over = {}) {
      const d = new WebhookDispatcher({
        db,
        log,
        render: testRender,
        allowPrivateUrls: true,
        timeoutMs: 2000,
        leaseMarginMs: 500,
        retryMs: 20,
        retryMaxMs: 100,
        pollMs: 20,
        stopGraceMs: 200,
        ...over,
      });
      dispatchers.push(d);
      d.start();
      return d;
    },
    stopDispatchers,
    async close() {
      await stopDispatchers();
      await db.close();
    },
  };
}

/**
 * The hooks of a describe block that drives one bench: it is opened before the tests (and
 * handed to `opened`), and after each test its dispatchers stop and the receivers it started
 * close, so nothing of one test reaches the next. Returns the receiver starter to use. The
 * block closes the bench itself (`after`), with whatever it checks at the end.
 */
export function benchHooks(
  kind: DatabaseKind,
  opened: (b: Bench) => void,
): (...args: Parameters<typeof startReceiver>) => Promise<Receiver> {
  let bench: Bench | undefined;
  const receivers: Receiver[] = [];
  before(async () => {
    bench = await openBench(kind);
    opened(bench);
  });
  afterEach(async () => {
    await bench?.stopDispatchers();
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  return async (...args) => {
    const r = await startReceiver(...args);
    receivers.push(r);
    return r;
  };
}

/** The delivery states of a webhook's deliveries, from the database. */
export async function deliveryStates(db: Db, webhookId: string): Promise<string[]> {
  const rows = await db.query<{ status: string }>(
    'SELECT status FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY created_at',
    [webhookId],
  );
  return rows.map((r) => r.status);
}
