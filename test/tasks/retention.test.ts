// Retention (issue #25, hole 11): webhook logs, finished deliveries, task events fanned out
// long ago and expired Idempotency-Keys are deleted by a periodic sweep, a batch at a time;
// work not yet done (an event not yet fanned out, a delivery not yet made) never is.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createRetentionSweep } from '../../src/main.ts';
import { databaseKinds, startTestServer, type TestServer } from '../helpers/server.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
/** Older than both retentions below. */
const OLD = 2 * HOUR;
/** Older than the events' retention (1 min), younger than the logs' (1 h). */
const MID = 10 * MIN;

for (const { kind, skip } of await databaseKinds()) {
  describe(`retention sweep (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let owner: string;
    let webhookId: string;

    before(async () => {
      // No role: nothing fans events out or sweeps behind the test's back.
      server = await startTestServer({
        database: kind,
        roles: { api: false, worker: false },
        settings: { taskEventsRetentionMs: MIN, webhookLogRetentionMs: HOUR },
      });
      owner = 'retention';
      const { projectId } = await server.running.core.accounts.createKey(owner);
      const hook = await server.running.core.webhooks.create(owner, projectId, {
        name: 'hook',
        url: 'https://hooks.example.com/',
        events: ['task.updated'],
      });
      webhookId = hook.id;
    });
    after(() => server.stop());

    const q = <T extends object>(sql: string, params: unknown[]) => server.running.core.db.query<T>(sql, params);
    async function event(ageMs: number, dispatched = true): Promise<string> {
      const [row] = await q<{ id: string }>(
        `INSERT INTO task_events (id, task_id, owner, event, task, created_at, dispatched_at)
         VALUES (gen_random_uuid(), gen_random_uuid(), $1, 'task.updated', '{}', now() - $2 * interval '1 millisecond',
           CASE WHEN $3::boolean THEN now() - $2 * interval '1 millisecond' END)
         RETURNING id::text`,
        [owner, ageMs, dispatched],
      );
      assert.ok(row);
      return row.id;
    }
    async function delivery(eventId: string, status: 'pending' | 'delivered' | 'failed', ageMs: number) {
      const [row] = await q<{ id: string }>(
        `INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, created_at, finished_at)
         VALUES (gen_random_uuid(), $1, $2, $3, now() - $4 * interval '1 millisecond',
           CASE WHEN $3 <> 'pending' THEN now() - $4 * interval '1 millisecond' END)
         RETURNING id::text`,
        [webhookId, eventId, status, ageMs],
      );
      assert.ok(row);
      return row.id;
    }
    async function log(deliveryId: string, eventId: string, ageMs: number): Promise<string> {
      const [row] = await q<{ id: string }>(
        `INSERT INTO webhook_logs (id, webhook_id, delivery_id, event_id, event, created_at, duration_ms, url,
           request_body, request_headers, success)
         VALUES (gen_random_uuid(), $1, $2, $3, 'task.updated', now() - $4 * interval '1 millisecond', 5,
           'https://hooks.example.com/', '{}', '{}', true)
         RETURNING id::text`,
        [webhookId, deliveryId, eventId, ageMs],
      );
      assert.ok(row);
      return row.id;
    }
    async function key(name: string, ageMs: number): Promise<void> {
      await q(
        `INSERT INTO idempotency_keys (owner, route, key, body_hash, claim, status, response, created_at)
         VALUES ($1, 'POST /api/transcode', $2, 'x', gen_random_uuid(), 200, '{}', now() - $3 * interval '1 millisecond')`,
        [owner, name, ageMs],
      );
    }
    const left = async (table: string, ids: string[]) =>
      (await q<{ id: string }>(`SELECT id::text FROM ${table} WHERE id = ANY($1::uuid[])`, [ids])).map((r) => r.id);

    it('deletes old history in batches, keeps what is not done, and two sweeps at once share the work', async () => {
      const gone = await event(OLD);
      const undispatched = await event(OLD, false);
      const recent = await event(0);
      const waiting = await event(OLD);
      const pending = await delivery(waiting, 'pending', OLD);
      const done = await event(OLD);
      const doneDelivery = await delivery(done, 'delivered', OLD);
      const doneLog = await log(doneDelivery, done, OLD);
      const shown = await event(OLD);
      const shownDelivery = await delivery(shown, 'failed', OLD);
      const shownLog = await log(shownDelivery, shown, MID);
      const bulk = await Promise.all(Array.from({ length: 250 }, () => event(OLD)));
      await key('expired', 25 * HOUR);
      await key('fresh', HOUR);

      const sweeps = [0, 1].map(() => createRetentionSweep(server.running.core, { batch: 40 }));
      const counts = await Promise.all(sweeps.map((s) => s.sweep()));
      const total = (name: string) => counts.reduce((n, c) => n + (c[name] ?? 0), 0);
      assert.deepEqual(
        ['task_events', 'webhook_deliveries', 'webhook_logs', 'idempotency_keys'].map(total),
        [252, 1, 1, 1],
        'each old row deleted once, by one sweep or the other',
      );

      assert.deepEqual(await left('task_events', [gone, done, ...bulk]), []);
      assert.deepEqual(
        (await left('task_events', [undispatched, recent, waiting, shown])).sort(),
        [undispatched, recent, waiting, shown].sort(),
        'not fanned out yet, recent, with a delivery pending, with a delivery whose log is still shown: kept',
      );
      assert.deepEqual((await left('webhook_deliveries', [pending, doneDelivery, shownDelivery])).sort(), [
        ...[pending, shownDelivery].sort(),
      ]);
      const logs = await server.running.core.webhooks.logs(owner, webhookId, { limit: 10 });
      assert.deepEqual(
        logs.logs.map((l) => l.id),
        [shownLog],
        'GET /api/webhook/{id}/log shows the attempt within its retention, not the older one',
      );
      assert.deepEqual(await left('webhook_logs', [doneLog]), []);
      const keys = await q<{ key: string }>('SELECT key FROM idempotency_keys WHERE owner = $1', [owner]);
      assert.deepEqual(
        keys.map((k) => k.key),
        ['fresh'],
      );

      // Nothing is left to delete: the next sweep deletes nothing.
      assert.deepEqual(await sweeps[0]?.sweep(), {
        webhook_logs: 0,
        webhook_deliveries: 0,
        task_events: 0,
        idempotency_keys: 0,
        asset_deletes: 0,
        split_pieces: 0,
        live_archive_sessions: 0,
      });
    });

    it('the worker role sweeps; a process without it does not', { skip: kind === 'postgres' }, async () => {
      assert.equal(server.running.retentionSweep, undefined);
      const worker = await startTestServer({ database: kind, roles: { api: false, worker: true } });
      try {
        assert.ok(worker.running.retentionSweep, 'a worker process has a retention sweep');
      } finally {
        await worker.stop();
      }
    });
  });
}
