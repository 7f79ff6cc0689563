import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { fairShare } from '../../src/webhooks/index.ts';
import { databaseKinds, waitFor } from '../helpers/server.ts';
import { type Bench, benchHooks } from './helpers.ts';

// One owner must not slow the others' webhooks (issue #25, hole 4): delivery slots shared
// fairly between owners, a webhook that keeps timing out held to one delivery in flight, and
// what a receiver answers kept within bounds (hole 11: the status text).

for (const { kind, skip } of await databaseKinds()) {
  describe(`webhook delivery under a hostile owner (${kind} database)`, { skip }, () => {
    let b: Bench;
    const receiver = benchHooks(kind, (opened) => {
      b = opened;
    });
    after(() => b.close());

    async function hooked(url: string, count: number) {
      const { owner, projectId } = await b.owner();
      for (let i = 0; i < count; i++)
        await b.store.create(owner, projectId, { name: `h${i}`, url, events: ['task.spawned'] });
      return { owner, projectId };
    }

    it("another owner's delivery arrives promptly while one owner's many webhooks hang at a receiver that never answers", async () => {
      const tarpit = await receiver(() => 'hang');
      const good = await receiver(() => 204);
      const a = await hooked(tarpit.url, 16);
      const bob = await hooked(good.url, 1);
      // Four slots and 3 s to answer: first come, first served, the 16 hanging attempts of
      // A's one task took four rounds (12 s) before B's delivery went out.
      b.dispatcher({ concurrency: 4, timeoutMs: 3000 });
      await b.createTask(a.owner, a.projectId);
      await waitFor(async () => tarpit.received.length >= 2, 10_000, "A's deliveries to go out");
      const started = performance.now();
      await b.createTask(bob.owner, bob.projectId);
      await waitFor(async () => good.received.length >= 1, 15_000, "B's delivery");
      const waited = performance.now() - started;
      // Well under one timeout: B did not wait for one of A's slots to come free.
      assert.ok(waited < 2500, `B's delivery took ${Math.round(waited)} ms, against 12 s before (issue #25)`);
      assert.ok(tarpit.peak < 4, `A held ${tarpit.peak} of the 4 slots`);
    });

    it('a webhook that keeps timing out gets one delivery in flight at a time', async () => {
      const tarpit = await receiver(() => 'hang');
      const c = await hooked(tarpit.url, 1);
      for (let i = 0; i < 4; i++) await b.createTask(c.owner, c.projectId);
      b.dispatcher({ concurrency: 8, timeoutMs: 300, retryMs: 200, retryMaxMs: 400 });
      // The first four attempts go out together: nothing timed out yet.
      await waitFor(async () => tarpit.received.length >= 4, 10_000, 'the first attempts');
      await waitFor(async () => tarpit.open === 0, 10_000, 'the first attempts to time out');
      tarpit.resetPeak();
      await waitFor(async () => tarpit.received.length >= 10, 15_000, 'six more attempts');
      assert.equal(tarpit.peak, 1, 'after two timeouts in a row, one attempt at a time');
    });

    it('keeps a bounded status text, as it keeps the first KB of the body', async () => {
      const long = `Accepted${' and then some'.repeat(1100)}`;
      assert.ok(long.length > 15_000);
      const r = await receiver(() => ({ status: 202, statusText: long, body: 'x'.repeat(5000) }));
      const { owner, projectId } = await hooked(r.url, 1);
      b.dispatcher();
      await b.createTask(owner, projectId);
      const [hook] = (await b.store.list(owner, { limit: 1 })).webhooks;
      assert.ok(hook);
      const log = await waitFor(async () => (await b.store.logs(owner, hook.id, { limit: 1 })).logs[0]);
      assert.equal(log.statusCode, 202);
      assert.equal(log.statusText, long.slice(0, 128));
      assert.equal(log.responseBody?.length, 1024);
    });
  });
}

describe('fair share of the delivery slots', () => {
  it('leaves one share free for an owner that comes next, and never goes below one', () => {
    assert.equal(fairShare(16, 1), 8);
    assert.equal(fairShare(16, 3), 4);
    assert.equal(fairShare(16, 40), 1);
    assert.equal(fairShare(1, 1), 1);
  });
});
