import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { TASK_EVENTS_CHANNEL } from '../../src/tasks/index.ts';
import { databaseKinds, waitFor } from '../helpers/server.ts';
import { type Bench, benchHooks, deliveryStates, openBench, rebinding, verifyWebhook } from './helpers.ts';

// Webhook delivery end to end (issue #18): task changes write the outbox (TaskStore, Queue),
// a dispatcher fans them out and POSTs them to real receivers on port 0, and what a receiver
// gets, what the delivery log says and what the database keeps is checked.

const SECRET = 'whsec-Do-Not-Leak-7f3a9c';

for (const { kind, skip } of await databaseKinds()) {
  describe(`webhook delivery (${kind} database)`, { skip }, () => {
    let b: Bench;
    const receiver = benchHooks(kind, (opened) => {
      b = opened;
    });
    after(async () => {
      await b.close();
      // The secret went into the store and out in signatures; it never reaches a log line.
      assert.ok(b.logs.lines.length > 0);
      assert.ok(!b.logs.text.includes(SECRET), 'the shared secret appears in the logs');
    });

    async function subscribed(url: string, over: { sharedSecret?: string; events?: string[] } = {}) {
      const { owner, projectId } = await b.owner();
      const hook = await b.store.create(owner, projectId, {
        name: 'hook',
        url,
        events: (over.events ?? ['task.spawned', 'task.updated', 'task.completed', 'task.failed']) as never,
        sharedSecret: over.sharedSecret,
      });
      return { owner, projectId, hook };
    }

    it('signs a delivery as Livepeer does: the documented HMAC of the raw body verifies, the envelope names the event', async () => {
      const r = await receiver();
      const { owner, projectId, hook } = await subscribed(r.url, { sharedSecret: SECRET });
      const taskId = await b.createTask(owner, projectId);
      b.dispatcher();
      const got = await waitFor(async () => r.received[0], 10_000, 'the delivery');
      const header = String(got.headers['livepeer-signature']);
      assert.match(header, /^t=\d+,v1=[0-9a-f]{64}$/);
      assert.ok(verifyWebhook(got.raw, header, SECRET), 'the documented check accepts the signature');
      assert.ok(!verifyWebhook(got.raw, header, 'another secret'), 'and refuses another secret');
      assert.ok(!verifyWebhook(got.raw.replace('task.spawned', 'task.failed'), header, SECRET), 'and a changed body');
      assert.equal(got.headers['user-agent'], 'mediaplane-webhooks');
      assert.equal(got.headers['content-type'], 'application/json');
      const [event] = await b.db.query<{ id: string; created_at: Date }>(
        'SELECT id, created_at FROM task_events WHERE task_id = $1',
        [taskId],
      );
      assert.ok(event);
      assert.deepEqual(Object.keys(got.body), ['id', 'webhookId', 'createdAt', 'timestamp', 'event', 'payload']);
      assert.equal(got.body.id, event.id);
      assert.equal(got.body.webhookId, hook.id);
      assert.equal(got.body.createdAt, event.created_at.getTime());
      assert.equal(`t=${got.body.timestamp}`, header.split(',')[0]);
      assert.equal(got.body.event, 'task.spawned');
      assert.deepEqual(got.body.payload, { task: { id: taskId, phase: 'waiting' } });

      const { logs } = await waitFor(async () => {
        const page = await b.store.logs(owner, hook.id, { limit: 10 });
        return page.logs.length ? page : null;
      });
      const [log] = logs;
      assert.ok(log);
      assert.equal(log.success, true);
      assert.equal(log.statusCode, 204);
      assert.equal(log.eventId, event.id);
      assert.equal(log.event, 'task.spawned');
      assert.equal(log.url, r.url);
      assert.equal(log.requestBody, got.raw);
      assert.equal(log.requestHeaders['Livepeer-Signature'], header);
      assert.ok(!JSON.stringify(log).includes(SECRET));
      const after = await b.store.get(owner, hook.id);
      assert.ok(after.lastTriggeredAt instanceof Date);
      assert.equal(after.lastFailure, null);
      assert.deepEqual(await deliveryStates(b.db, hook.id), ['delivered']);
    });

    it('sends no signature header to a webhook without a shared secret', async () => {
      const r = await receiver();
      const { owner, projectId } = await subscribed(r.url);
      await b.createTask(owner, projectId);
      b.dispatcher();
      const got = await waitFor(async () => r.received[0], 10_000, 'the delivery');
      assert.equal(got.headers['livepeer-signature'], undefined);
      assert.equal(got.body.event, 'task.spawned');
    });

    it('delivers every event of a task to the webhooks subscribed to it, and only those', async () => {
      const all = await receiver();
      const finals = await receiver();
      const { owner, projectId, hook } = await subscribed(all.url);
      const onlyFinal = await b.store.create(owner, projectId, {
        name: 'finals',
        url: finals.url,
        events: ['task.completed', 'task.failed'],
      });
      const other = await b.owner();
      await b.store.create(other.owner, other.projectId, { name: 'x', url: finals.url, events: ['task.spawned'] });
      b.dispatcher();
      const taskId = await b.createTask(owner, projectId);
      const [claimed] = await b.queue.claim('test-worker', 1);
      assert.equal(claimed?.id, taskId);
      assert.ok(await b.queue.complete(taskId, 'test-worker', { ok: true }));
      await waitFor(async () => all.received.length >= 3 && finals.received.length >= 1, 10_000, 'the deliveries');
      assert.deepEqual(all.received.map((x) => x.body.event).sort(), [
        'task.completed',
        'task.spawned',
        'task.updated',
      ]);
      const completed = all.received.find((x) => x.body.event === 'task.completed');
      assert.deepEqual(completed?.body.payload, { task: { id: taskId, phase: 'completed' } });
      assert.deepEqual(
        finals.received.map((x) => [x.body.event, x.body.webhookId]),
        [['task.completed', onlyFinal.id]],
      );
      await waitFor(async () => (await deliveryStates(b.db, hook.id)).join() === 'delivered,delivered,delivered');
    });

    it('retries a 500: answered 500 twice then 200, the third attempt delivers and the log shows all three', async () => {
      const r = await receiver((n) => (n < 2 ? { status: 500, body: `boom ${n}` } : 200));
      const { owner, projectId, hook } = await subscribed(r.url, { sharedSecret: SECRET });
      const metrics = new Registry();
      await b.createTask(owner, projectId);
      b.dispatcher({ metrics });
      await waitFor(async () => (await deliveryStates(b.db, hook.id))[0] === 'delivered', 10_000, 'delivered');
      assert.equal(r.received.length, 3);
      assert.equal(new Set(r.received.map((x) => x.body.id)).size, 1, 'one event, three attempts');
      for (const x of r.received) assert.ok(verifyWebhook(x.raw, String(x.headers['livepeer-signature']), SECRET));
      const { logs } = await b.store.logs(owner, hook.id, { limit: 10 });
      assert.deepEqual(
        logs.map((l) => [l.statusCode, l.success, l.responseBody]),
        [
          [200, true, ''],
          [500, false, 'boom 1'],
          [500, false, 'boom 0'],
        ],
      );
      assert.equal(logs[1]?.statusText, 'Internal Server Error');
      const text = await metrics.metrics();
      assert.match(text, /mediaplane_webhook_deliveries_total\{outcome="retried"\} 2/);
      assert.match(text, /mediaplane_webhook_deliveries_total\{outcome="delivered"\} 1/);
      assert.match(text, /mediaplane_webhook_delivery_seconds_count 1/);
      assert.match(text, /mediaplane_webhook_pending 0/);
      // The last failure stays on the webhook after a later success (Livepeer's status).
      const after = await b.store.get(owner, hook.id);
      assert.equal(after.lastFailure?.statusCode, 500);
    });

    it('gives up on a 400 at once: one attempt, the delivery failed, lastFailure set', async () => {
      const r = await receiver(() => ({ status: 400, body: 'bad hook' }));
      const { owner, projectId, hook } = await subscribed(r.url);
      const metrics = new Registry();
      await b.createTask(owner, projectId);
      b.dispatcher({ metrics });
      await waitFor(async () => (await deliveryStates(b.db, hook.id))[0] === 'failed', 10_000, 'failed');
      assert.equal(r.received.length, 1);
      const { logs } = await b.store.logs(owner, hook.id, { limit: 10 });
      assert.deepEqual(
        logs.map((l) => [l.statusCode, l.success]),
        [[400, false]],
      );
      const after = await b.store.get(owner, hook.id);
      assert.equal(after.lastFailure?.statusCode, 400);
      assert.equal(after.lastFailure?.response, 'bad hook');
      assert.ok(after.lastFailure?.timestamp instanceof Date);
      assert.match(await metrics.metrics(), /mediaplane_webhook_deliveries_total\{outcome="failed"\} 1/);
    });

    it('retries 408 and 429 like a 5xx', async () => {
      const r = await receiver((n) => [408, 429, 202][n] ?? 202);
      const { owner, projectId, hook } = await subscribed(r.url);
      await b.createTask(owner, projectId);
      b.dispatcher();
      await waitFor(async () => (await deliveryStates(b.db, hook.id))[0] === 'delivered', 10_000, 'delivered');
      const { logs } = await b.store.logs(owner, hook.id, { limit: 10 });
      assert.deepEqual(
        logs.map((l) => l.statusCode),
        [202, 429, 408],
      );
    });

    it('retries a receiver that does not answer in time, and one that refuses the connection', async () => {
      const r = await receiver((n) => (n === 0 ? 'hang' : 200));
      const { owner, projectId, hook } = await subscribed(r.url);
      await b.createTask(owner, projectId);
      // The first attempt hangs for good: the timeout only has to leave a loaded host time to answer the second.
      b.dispatcher({ timeoutMs: 2000 });
      await waitFor(async () => (await deliveryStates(b.db, hook.id))[0] === 'delivered', 10_000, 'delivered');
      const { logs } = await b.store.logs(owner, hook.id, { limit: 10 });
      assert.deepEqual(
        logs.map((l) => [l.statusCode, l.error]),
        [
          [200, null],
          [null, 'no answer within 2000 ms'],
        ],
      );

      const closed = await receiver();
      await closed.close();
      const second = await subscribed(closed.url);
      await b.createTask(second.owner, second.projectId);
      const refused = await waitFor(async () => {
        const page = await b.store.logs(second.owner, second.hook.id, { limit: 10 });
        return page.logs.length >= 2 ? page.logs : null;
      });
      assert.match(refused[0]?.error ?? '', /ECONNREFUSED/);
      assert.deepEqual(await deliveryStates(b.db, second.hook.id), ['pending']);
    });

    it('gives up retrying once the event is older than the retry window', async () => {
      const r = await receiver(() => 503);
      const { owner, projectId, hook } = await subscribed(r.url);
      await b.createTask(owner, projectId);
      b.dispatcher({ maxAgeMs: 0 });
      await waitFor(async () => (await deliveryStates(b.db, hook.id))[0] === 'failed', 10_000, 'failed');
      assert.equal(r.received.length, 1);
    });

    it('does not follow a redirect: the 3xx is the answer, a failed attempt, and the target gets nothing', async () => {
      const target = await receiver();
      const r = await receiver(() => ({ status: 307, location: target.url }));
      const { owner, projectId, hook } = await subscribed(r.url);
      await b.createTask(owner, projectId);
      b.dispatcher();
      await waitFor(async () => (await deliveryStates(b.db, hook.id))[0] === 'failed', 10_000, 'failed');
      assert.equal(r.received.length, 1);
      assert.equal(target.received.length, 0);
      const { logs } = await b.store.logs(owner, hook.id, { limit: 10 });
      assert.deepEqual(
        logs.map((l) => [l.statusCode, l.success]),
        [[307, false]],
      );
    });

    it('refuses private and metadata addresses when private URLs are off, also a name that rebinds at connect time', async () => {
      const r = await receiver();
      const loopback = await subscribed(r.url);
      const metadata = await subscribed('http://169.254.169.254/latest/meta-data/');
      const rebind = await subscribed(`http://hooks.rebind.test:${r.port}/hooks`);
      // The first answer (a public address) passes the check before the request; the socket's
      // own lookup gets the second, loopback, and refuses it where it would connect.
      const resolve = rebinding('93.184.216.34', '127.0.0.1');
      for (const s of [loopback, metadata, rebind]) await b.createTask(s.owner, s.projectId);
      b.dispatcher({ allowPrivateUrls: false, resolve });
      for (const s of [loopback, metadata, rebind])
        await waitFor(async () => (await deliveryStates(b.db, s.hook.id))[0] === 'failed', 10_000, 'refused');
      const errors = async (s: typeof loopback) =>
        (await b.store.logs(s.owner, s.hook.id, { limit: 10 })).logs.map((l) => l.error);
      assert.deepEqual(await errors(loopback), [
        `http://127.0.0.1:${r.port} is not allowed: 127.0.0.1 is a loopback address (the operator can allow it with MEDIAPLANE_ALLOW_PRIVATE_URLS=true)`,
      ]);
      assert.match(
        (await errors(metadata))[0] ?? '',
        /169\.254\.169\.254 is a link-local address \(the cloud metadata/,
      );
      assert.match(
        (await errors(rebind))[0] ?? '',
        /^http:\/\/hooks\.rebind\.test:\d+ is not allowed: hooks\.rebind\.test resolves to a private or reserved address/,
      );
      assert.ok(!(await errors(rebind))[0]?.includes('127.0.0.1'), 'the log does not say where the name points');
      assert.deepEqual(resolve.asked, ['hooks.rebind.test', 'hooks.rebind.test'], 'checked, then refused at connect');
      assert.equal(r.received.length, 0);
    });

    it('two dispatchers on one database deliver each event exactly once when nothing fails', async () => {
      const r = await receiver();
      const { owner, projectId, hook } = await subscribed(r.url);
      const other = kind === 'postgres' ? await openBench(kind) : undefined;
      try {
        // On a server, two processes' worth of connections; the embedded database has one.
        // A generous timeout: an answer late on a busy test host would be a failed attempt.
        const timings = { concurrency: 4, timeoutMs: 60_000 };
        b.dispatcher(timings);
        (other ?? b).dispatcher(timings);
        for (let i = 0; i < 20; i++) await b.createTask(owner, projectId);
        for (const t of await b.queue.claim('test-worker', 10)) await b.queue.complete(t.id, 'test-worker', {});
        const events = await b.db.query<{ id: string }>('SELECT id FROM task_events WHERE owner = $1', [owner]);
        assert.ok(events.length >= 40);
        await waitFor(
          async () => (await deliveryStates(b.db, hook.id)).filter((s) => s === 'delivered').length === events.length,
          20_000,
          'every event delivered',
        );
        const failed = await b.db.query('SELECT error FROM webhook_logs WHERE webhook_id = $1 AND NOT success', [
          hook.id,
        ]);
        assert.deepEqual(failed, [], 'nothing failed');
        const counts = r.counts();
        assert.deepEqual([...counts.keys()].sort(), events.map((e) => e.id).sort());
        assert.deepEqual(
          [...counts.values()].filter((n) => n !== 1),
          [],
          'an event went out twice',
        );
      } finally {
        await other?.close();
      }
    });

    it('a delivery leased by a process that died is delivered by another once the lease runs out', async () => {
      const r = await receiver();
      const { owner, projectId, hook } = await subscribed(r.url);
      const taskId = await b.createTask(owner, projectId);
      // What a process killed mid-send leaves: the event fanned out, its delivery claimed
      // (one attempt, a lease), and no outcome written.
      const [left] = await b.db.query<{ lease_until: Date }>(
        `WITH ev AS (UPDATE task_events SET dispatched_at = now() WHERE task_id = $1 RETURNING id)
         INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, attempts, lease_until)
         SELECT gen_random_uuid(), $2, ev.id, 'pending', 1, now() + interval '800 milliseconds' FROM ev
         RETURNING lease_until`,
        [taskId, hook.id],
      );
      assert.ok(left);
      b.dispatcher();
      await waitFor(async () => (await deliveryStates(b.db, hook.id))[0] === 'delivered', 10_000, 'delivered');
      assert.equal(r.received.length, 1);
      const { logs } = await b.store.logs(owner, hook.id, { limit: 10 });
      assert.equal(logs.length, 1);
      assert.ok((logs[0]?.createdAt.getTime() ?? 0) >= left.lease_until.getTime(), 'not before the lease ran out');
    });

    it('a dispatcher stopped mid-send abandons the attempt within its grace, and another delivers the event', async () => {
      const r = await receiver((n) => (n === 0 ? 'hang' : 200));
      const { owner, projectId, hook } = await subscribed(r.url);
      await b.createTask(owner, projectId);
      const first = b.dispatcher({ timeoutMs: 60_000, stopGraceMs: 100 });
      await waitFor(async () => r.received.length === 1, 10_000, 'the first attempt');
      await first.stop();
      const { logs } = await b.store.logs(owner, hook.id, { limit: 10 });
      assert.deepEqual(
        logs.map((l) => l.error),
        ['abandoned: the service stopped before an answer came'],
      );
      assert.deepEqual(await deliveryStates(b.db, hook.id), ['pending']);
      b.dispatcher();
      await waitFor(async () => (await deliveryStates(b.db, hook.id))[0] === 'delivered', 10_000, 'delivered');
      assert.equal(r.received.length, 2);
      assert.equal(
        r.received[0]?.body.id,
        r.received[1]?.body.id,
        'the same event id, for the receiver to de-duplicate',
      );
    });

    it('wakes on NOTIFY: a dispatcher that polls rarely delivers a new event at once', async () => {
      const r = await receiver();
      const { owner, projectId } = await subscribed(r.url);
      b.dispatcher({ pollMs: 600_000 });
      // Its first pass has run once the listener is up; a notify then must wake it.
      await new Promise((resolve) => setTimeout(resolve, 200));
      await b.createTask(owner, projectId);
      await b.db.notify(TASK_EVENTS_CHANNEL, 'x');
      await waitFor(async () => r.received[0], 10_000, 'the delivery');
    });

    it('resends a logged attempt now: the same event, a new timestamp and signature, a new log entry', async () => {
      const r = await receiver((n) => (n === 0 ? 400 : 200));
      const { owner, projectId, hook } = await subscribed(r.url, { sharedSecret: SECRET });
      await b.createTask(owner, projectId);
      const d = b.dispatcher();
      await waitFor(async () => (await deliveryStates(b.db, hook.id))[0] === 'failed', 10_000, 'failed');
      const [first] = (await b.store.logs(owner, hook.id, { limit: 10 })).logs;
      assert.ok(first);
      const again = await d.resend(owner, hook.id, first.id);
      assert.equal(again.success, true);
      assert.equal(again.statusCode, 200);
      assert.equal(again.eventId, first.eventId);
      assert.notEqual(again.id, first.id);
      assert.equal(r.received.length, 2);
      const [a, c] = r.received;
      assert.equal(c?.body.id, a?.body.id);
      assert.deepEqual(c?.body.payload, a?.body.payload);
      assert.ok((c?.body.timestamp ?? 0) >= (a?.body.timestamp ?? 0));
      assert.ok(c && verifyWebhook(c.raw, String(c.headers['livepeer-signature']), SECRET));
      const { logs } = await b.store.logs(owner, hook.id, { limit: 10 });
      assert.deepEqual(
        logs.map((l) => l.id),
        [again.id, first.id],
      );
      // Another owner's webhook or log is not found.
      const stranger = await b.owner();
      await assert.rejects(d.resend(stranger.owner, hook.id, first.id), { statusCode: 404 });
      await assert.rejects(d.resend(owner, hook.id, '00000000-0000-4000-8000-000000000000'), { statusCode: 404 });
      await assert.rejects(d.resend(owner, hook.id, 'nope'), { statusCode: 404 });
    });

    it('keeps only the first KB of an answer, and an answer with NUL bytes is stored', async () => {
      const r = await receiver((n) => ({ status: n === 0 ? 500 : 200, body: n === 0 ? 'x'.repeat(5000) : 'a\u0000b' }));
      const { owner, projectId, hook } = await subscribed(r.url);
      await b.createTask(owner, projectId);
      b.dispatcher();
      await waitFor(async () => (await deliveryStates(b.db, hook.id))[0] === 'delivered', 10_000, 'delivered');
      const { logs } = await b.store.logs(owner, hook.id, { limit: 10 });
      assert.equal(logs[1]?.responseBody, 'x'.repeat(1024));
      assert.equal(logs[0]?.responseBody, 'a\uFFFDb');
    });

    it('gives up the pending deliveries of a deleted webhook', async () => {
      const r = await receiver(() => 503);
      const { owner, projectId, hook } = await subscribed(r.url);
      await b.createTask(owner, projectId);
      b.dispatcher({ retryMs: 200, retryMaxMs: 200 });
      await waitFor(async () => r.received.length >= 1, 10_000, 'a first attempt');
      await b.store.delete(owner, hook.id);
      await waitFor(async () => (await deliveryStates(b.db, hook.id))[0] === 'failed', 10_000, 'given up');
      await b.createTask(owner, projectId);
      const undispatched = async () =>
        (await b.db.query('SELECT 1 FROM task_events WHERE owner = $1 AND dispatched_at IS NULL', [owner])).length;
      await waitFor(async () => (await undispatched()) === 0, 10_000, 'the new event fanned out');
      assert.deepEqual(await deliveryStates(b.db, hook.id), ['failed'], 'no delivery for a deleted webhook');
    });
  });
}
