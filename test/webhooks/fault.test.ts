import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Accounts } from '../../src/accounts/index.ts';
import { type Db, openDb } from '../../src/db/index.ts';
import { Queue, TaskStore } from '../../src/tasks/index.ts';
import { WebhookStore } from '../../src/webhooks/index.ts';
import { databaseFor, databaseKinds, transcodeBody, waitFor } from '../helpers/server.ts';
import { type Receiver, startReceiver, verifyWebhook } from './helpers.ts';

// The fault acceptance: the service (a process with the API and worker roles) is
// SIGKILLed while the receiver is down, with deliveries in flight; after a restart and the
// receiver's recovery, every event of 50 tasks arrives, counted by event id: none lost
// (at least once: an event may arrive twice, and the id tells the receiver so).

const CHILD = fileURLToPath(new URL('./service-child.ts', import.meta.url));
const SECRET = 'fault-test-secret-9b1e';
const TASKS = 50;

function spawnService(env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, [CHILD], {
    env: {
      ...process.env,
      MEDIAPLANE_PORT: '0',
      MEDIAPLANE_LOG_LEVEL: 'silent',
      MEDIAPLANE_ALLOW_PRIVATE_URLS: 'true',
      MEDIAPLANE_WEBHOOK_TIMEOUT_MS: '1500',
      MEDIAPLANE_WEBHOOK_RETRY_MS: '50',
      MEDIAPLANE_WEBHOOK_RETRY_MAX_MS: '300',
      MEDIAPLANE_WEBHOOK_POLL_MS: '50',
      MEDIAPLANE_POLL_MS: '50',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (b: Buffer) => b.toString().includes('ready') && resolve(child));
    child.once('exit', (code) => reject(new Error(`the service exited with ${code} before it was ready`)));
  });
}

const exited = (c: ChildProcess) => new Promise((r) => (c.exitCode !== null ? r(null) : c.once('exit', r)));

/** 50 tasks of `owner` driven through their lives (half completed, half failed): ~200 events in the outbox. */
async function runTasks(db: Db, owner: string, projectId: string): Promise<void> {
  const tasks = new TaskStore(db);
  const queue = new Queue(db, { leaseMs: 60_000, maxRetries: 0 });
  for (let i = 0; i < TASKS; i++)
    await tasks.create({
      owner,
      projectId,
      type: 'transcode-file',
      params: transcodeBody(),
      requesterId: null,
      maxQueuedPerOwner: 1000,
    });
  const claimed = await queue.claim('fault-test', TASKS);
  assert.equal(claimed.length, TASKS);
  for (const [i, t] of claimed.entries()) {
    await queue.progress(t.id, 'fault-test', 0.5);
    if (i % 2 === 0) await queue.complete(t.id, 'fault-test', { input_video: { duration: 1, size: 1 } });
    else await queue.fail(t.id, 'fault-test', { message: 'input not found', retryable: false, backoffMs: 0 });
  }
}

const eventIds = async (db: Db, owner: string) =>
  (await db.query<{ id: string }>('SELECT id FROM task_events WHERE owner = $1', [owner])).map((r) => r.id).sort();

for (const { kind, skip } of await databaseKinds()) {
  describe(`webhook delivery survives a SIGKILL of the service (${kind} database)`, { skip }, () => {
    const children: ChildProcess[] = [];
    let receiver: Receiver | undefined;
    const dataDir = mkdtempSync(join(tmpdir(), 'mediaplane-webhook-fault-'));
    after(async () => {
      for (const c of children) c.kill('SIGKILL');
      await receiver?.close();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it(`every event of ${TASKS} tasks arrives after a kill while the receiver was down, none lost`, async () => {
      let up = false;
      receiver = await startReceiver(() => (up ? 204 : 'hang'));
      const r = receiver;
      // The embedded database is one process's: the test writes the tasks, closes it, and
      // the service opens the same data dir; a server is shared by all.
      const databaseUrl = await databaseFor(kind);
      const settings = { MEDIAPLANE_DATA_DIR: dataDir, ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}) };
      let db = await openDb({ databaseUrl, dataDir });
      const owner = 'fault-owner';
      const projectId = await new Accounts(db).ensureOwner(owner);
      await new WebhookStore(db).create(owner, projectId, {
        name: 'receiver',
        url: r.url,
        events: ['task.spawned', 'task.updated', 'task.completed', 'task.failed'],
        sharedSecret: SECRET,
      });
      await runTasks(db, owner, projectId);
      const expected = await eventIds(db, owner);
      assert.ok(expected.length >= TASKS * 3, `${expected.length} events`);
      if (kind === 'embedded') await db.close();

      const first = await spawnService(settings);
      children.push(first);
      // Deliveries in flight to a receiver that does not answer: killed mid-send.
      await waitFor(async () => r.received.length >= 8, 20_000, 'deliveries in flight');
      first.kill('SIGKILL');
      await exited(first);
      const beforeRestart = new Set(r.received.map((x) => x.body.id));

      up = true;
      const second = await spawnService(settings);
      children.push(second);
      // Every event, and again each one that was in flight or failing when the service died.
      await waitFor(
        async () => {
          const counts = r.counts();
          return expected.every((id) => counts.has(id)) && [...beforeRestart].every((id) => (counts.get(id) ?? 0) >= 2);
        },
        60_000,
        'every event delivered',
      );

      const counts = r.counts();
      assert.deepEqual([...counts.keys()].sort(), expected, 'every event arrived, and nothing else');
      for (const x of r.received) {
        assert.ok(verifyWebhook(x.raw, String(x.headers['livepeer-signature']), SECRET, 600_000), 'signed');
        assert.ok(!x.raw.includes('sEcReT/do-not-leak+123'), 'no credential in a payload');
      }
      // The ones in flight at the kill came again after the restart (at least once).
      for (const id of beforeRestart) assert.ok((counts.get(id) ?? 0) >= 2, `event ${id} sent again after the kill`);
      const perTask = new Map<string, string[]>();
      for (const x of r.received)
        perTask.set(x.body.payload.task.id, [...(perTask.get(x.body.payload.task.id) ?? []), x.body.event]);
      assert.equal(perTask.size, TASKS);
      for (const events of perTask.values()) {
        assert.ok(events.includes('task.spawned'));
        assert.ok(events.includes('task.completed') || events.includes('task.failed'));
      }

      second.kill('SIGTERM');
      await exited(second);
      if (kind === 'embedded') db = await openDb({ dataDir });
      const states = await db.query<{ status: string; n: number }>(
        'SELECT status, count(*)::int AS n FROM webhook_deliveries GROUP BY status',
      );
      assert.deepEqual(states, [{ status: 'delivered', n: expected.length }]);
      await db.close();
    });
  });
}
