import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { databaseKinds, waitFor } from '../helpers/server.ts';
import { type Bench, openBench, startReceiver, verifyWebhook } from './helpers.ts';

// The webhook store (issue #18): owner-scoped like tasks, newest first with a cursor, and a
// shared secret that goes in and never comes out of any method.

const SECRET = 'store-secret-Never-Shown-42';
const EVENTS = ['task.completed', 'task.failed'] as const;

for (const { kind, skip } of await databaseKinds()) {
  describe(`webhook store (${kind} database)`, { skip }, () => {
    let b: Bench;
    before(async () => {
      b = await openBench(kind);
    });
    after(() => b.close());

    it('creates, gets, lists newest first with a cursor, updates and deletes, owner by owner', async () => {
      const alice = await b.owner();
      const bob = await b.owner();
      const made = [];
      for (let i = 0; i < 5; i++) {
        // The embedded database's clock ticks in milliseconds: hooks made in the same one tie
        // on created_at, and "newest first" has no order to show between them.
        if (i > 0) await new Promise((r) => setTimeout(r, 3));
        made.push(
          await b.store.create(alice.owner, alice.projectId, {
            name: `hook ${i}`,
            url: `https://hooks.example.com/${i}`,
            events: [...EVENTS],
            sharedSecret: SECRET,
          }),
        );
      }
      const first = made[0];
      assert.ok(first);
      assert.equal(first.owner, alice.owner);
      assert.equal(first.projectId, alice.projectId);
      assert.deepEqual(first.events, EVENTS);
      assert.equal(first.lastTriggeredAt, null);
      assert.equal(first.lastFailure, null);
      assert.ok(first.createdAt instanceof Date);

      assert.deepEqual(await b.store.get(alice.owner, first.id), first);
      await assert.rejects(b.store.get(bob.owner, first.id), { statusCode: 404 });
      await assert.rejects(b.store.get(alice.owner, 'not-a-uuid'), { statusCode: 404 });

      const page1 = await b.store.list(alice.owner, { limit: 2 });
      const page2 = await b.store.list(alice.owner, { limit: 2, cursor: page1.next ?? '' });
      const page3 = await b.store.list(alice.owner, { limit: 2, cursor: page2.next ?? '' });
      assert.deepEqual(
        [...page1.webhooks, ...page2.webhooks, ...page3.webhooks].map((w) => w.name),
        ['hook 4', 'hook 3', 'hook 2', 'hook 1', 'hook 0'],
      );
      assert.equal(page3.next, null);
      assert.deepEqual((await b.store.list(bob.owner, { limit: 10 })).webhooks, []);
      assert.deepEqual(await b.store.list(alice.owner, { limit: 10, cursor: 'junk' }), { webhooks: [], next: null });

      await assert.rejects(
        b.store.update(bob.owner, first.id, { name: 'stolen', url: 'https://x.example', events: ['task.failed'] }),
        { statusCode: 404 },
      );
      const updated = await b.store.update(alice.owner, first.id, {
        name: 'renamed',
        url: 'https://hooks.example.com/new',
        events: ['task.spawned'],
      });
      assert.equal(updated.name, 'renamed');
      assert.equal(updated.url, 'https://hooks.example.com/new');
      assert.deepEqual(updated.events, ['task.spawned']);
      assert.ok(updated.updatedAt >= first.updatedAt);
      assert.deepEqual(updated.createdAt, first.createdAt);

      await assert.rejects(b.store.delete(bob.owner, first.id), { statusCode: 404 });
      const gone = await b.store.delete(alice.owner, first.id);
      assert.equal(gone.id, first.id);
      await assert.rejects(b.store.get(alice.owner, first.id), { statusCode: 404 });
      await assert.rejects(b.store.delete(alice.owner, first.id), { statusCode: 404 });
      assert.equal((await b.store.list(alice.owner, { limit: 10 })).webhooks.length, 4);

      // No method returned the secret.
      const everything = JSON.stringify([made, page1, page2, page3, updated, gone]);
      assert.ok(!everything.includes(SECRET));
      assert.ok(!everything.toLowerCase().includes('secret'));
    });

    it('keeps the secret out of the logs when a database write fails', async () => {
      const err = await b.store
        .create('no-such-owner', '00000000-0000-4000-8000-000000000000', {
          name: 'h',
          url: 'https://hooks.example.com/',
          events: ['task.failed'],
          sharedSecret: SECRET,
        })
        .then(
          () => assert.fail('an owner that does not exist'),
          (e: unknown) => e,
        );
      // What the API's error handler does with an unexpected error: log it.
      b.log.error({ err }, 'could not create the webhook');
      assert.ok(b.logs.text.includes('could not create the webhook'));
      assert.ok(!b.logs.text.includes(SECRET));
    });

    it('a secret left out of an update is removed (PUT replaces, as on Livepeer): deliveries are unsigned', async () => {
      const r = await startReceiver();
      try {
        const { owner, projectId } = await b.owner();
        const hook = await b.store.create(owner, projectId, {
          name: 'h',
          url: r.url,
          events: ['task.spawned'],
          sharedSecret: SECRET,
        });
        b.dispatcher();
        await b.createTask(owner, projectId);
        await waitFor(async () => r.received[0], 10_000, 'a signed delivery');
        assert.ok(
          verifyWebhook(r.received[0]?.raw ?? '', String(r.received[0]?.headers['livepeer-signature']), SECRET),
        );
        await b.store.update(owner, hook.id, { name: 'h', url: r.url, events: ['task.spawned'] });
        await b.createTask(owner, projectId);
        await waitFor(async () => r.received[1], 10_000, 'an unsigned delivery');
        assert.equal(r.received[1]?.headers['livepeer-signature'], undefined);
      } finally {
        await b.stopDispatchers();
        await r.close();
      }
    });

    it("lists a webhook's delivery log newest first with a cursor; another owner's log is not found", async () => {
      const r = await startReceiver((n) => (n % 2 === 0 ? 500 : 200));
      try {
        const { owner, projectId } = await b.owner();
        const hook = await b.store.create(owner, projectId, { name: 'h', url: r.url, events: ['task.spawned'] });
        b.dispatcher();
        for (let i = 0; i < 3; i++) await b.createTask(owner, projectId);
        const all = await waitFor(async () => {
          const page = await b.store.logs(owner, hook.id, { limit: 100 });
          return page.logs.length >= 6 ? page.logs : null;
        });
        const seen = [];
        let cursor: string | undefined;
        for (;;) {
          const page = await b.store.logs(owner, hook.id, { limit: 4, ...(cursor ? { cursor } : {}) });
          seen.push(...page.logs);
          if (!page.next) break;
          cursor = page.next;
        }
        assert.deepEqual(
          seen.map((l) => l.id),
          all.map((l) => l.id),
        );
        for (let i = 1; i < seen.length; i++)
          assert.ok((seen[i - 1]?.createdAt.getTime() ?? 0) >= (seen[i]?.createdAt.getTime() ?? 0), 'newest first');
        const one = seen[0];
        assert.ok(one);
        assert.deepEqual(await b.store.log(owner, hook.id, one.id), one);
        const stranger = await b.owner();
        await assert.rejects(b.store.logs(stranger.owner, hook.id, { limit: 10 }), { statusCode: 404 });
        await assert.rejects(b.store.log(stranger.owner, hook.id, one.id), { statusCode: 404 });
        await assert.rejects(b.store.log(owner, hook.id, 'bad'), { statusCode: 404 });
        const otherHook = await b.store.create(owner, projectId, { name: 'o', url: r.url, events: ['task.failed'] });
        await assert.rejects(b.store.log(owner, otherHook.id, one.id), { statusCode: 404 });
      } finally {
        await b.stopDispatchers();
        await r.close();
      }
    });
  });
}
