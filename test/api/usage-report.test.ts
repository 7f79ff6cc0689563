// Usage's SQL and sums (issue #32, src/usage/) on both databases, over rows written as the
// limiter, the ledger and the worker write them, at chosen times: UTC day boundaries, released
// charges, another owner's rows, a chunked task's pieces, a creator's videos. The routes over
// real requests are in usage.test.ts.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Accounts } from '../../src/accounts/index.ts';
import type { Db } from '../../src/db/index.ts';
import { CLIENT_TASK_TYPES, ENCODING_TASK_TYPES } from '../../src/tasks/index.ts';
import { readUsage, UsageStore } from '../../src/usage/index.ts';
import { databaseKinds, openTestDb } from '../helpers/server.ts';

const DAY1 = '2026-03-01';
const DAY2 = '2026-03-02';

for (const { kind, skip } of await databaseKinds()) {
  describe(`usage sums (${kind} database)`, { skip }, () => {
    let db: Db;
    let store: UsageStore;
    let k1: string;
    let k2: string;
    let other: string;

    const task = async (o: {
      owner?: string;
      key: string | null;
      type?: string;
      phase?: string;
      created: string;
      updated?: string;
      output?: object;
      params?: object;
      parent?: string;
    }): Promise<string> => {
      const id = randomUUID();
      await db.query(
        `INSERT INTO tasks (id, owner, project_id, type, phase, params, created_at, updated_at, output, key_id, parent_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [
          id,
          o.owner ?? 'alice',
          randomUUID(),
          o.type ?? 'transcode-file',
          o.phase ?? 'completed',
          JSON.stringify(o.params ?? {}),
          o.created,
          o.updated ?? o.created,
          o.output ? JSON.stringify(o.output) : null,
          o.key,
          o.parent ?? null,
        ],
      );
      return id;
    };
    const charge = (o: {
      key: string | null;
      model: string;
      at: string;
      usd: string;
      tokens: number;
      status?: string;
    }) =>
      db.query(
        `INSERT INTO llm_ledger (id, owner, created_at, kind, status, amount_usd, model, max_tokens, completion_tokens, key_id)
         VALUES ($1, 'alice', $2, 'charge', $3, $4, $5, 100, $6, $7)`,
        [randomUUID(), o.at, o.status ?? 'settled', o.usd, o.model, o.tokens, o.key],
      );

    before(async () => {
      db = await openTestDb(kind);
      store = new UsageStore(db, { created: CLIENT_TASK_TYPES, transcoding: ENCODING_TASK_TYPES });
      const accounts = new Accounts(db);
      k1 = (await accounts.createKey('alice')).id;
      k2 = (await accounts.createKey('alice')).id;
      other = (await accounts.createKey('bob')).id;
      await db.query(
        `INSERT INTO api_key_days (key_id, owner, day, requests, tokens) VALUES
         ($1, 'alice', $3, 10, 300), ($1, 'alice', $4, 5, 50), ($2, 'alice', $4, 7, 0), ($5, 'bob', $4, 99, 999)`,
        [k1, k2, DAY1, DAY2, other],
      );
      // The last second of DAY1 and the first of DAY2, in UTC.
      await charge({ key: k1, model: 'org/a', at: `${DAY1}T23:59:59Z`, usd: '0.000100000001', tokens: 200 });
      await charge({ key: k1, model: 'org/b', at: `${DAY2}T00:00:00Z`, usd: '0.00002', tokens: 40 });
      await charge({ key: k1, model: 'org/a', at: `${DAY2}T00:00:01Z`, usd: '0.00001', tokens: 10 });
      // Refunded: no charge. Reserved: charged, no tokens yet.
      await charge({ key: k1, model: 'org/a', at: `${DAY2}T01:00:00Z`, usd: '5', tokens: 0, status: 'released' });
      await db.query(
        `INSERT INTO llm_ledger (id, owner, created_at, kind, status, amount_usd, model, max_tokens, key_id)
         VALUES ($1, 'alice', $2, 'charge', 'reserved', 0.00003, 'org/b', 30, $3)`,
        [randomUUID(), `${DAY2}T02:00:00Z`, k1],
      );
      // A credit is no charge.
      await db.query(
        `INSERT INTO llm_ledger (id, owner, created_at, kind, status, amount_usd) VALUES ($1, 'alice', $2, 'credit', 'settled', 10)`,
        [randomUUID(), `${DAY2}T03:00:00Z`],
      );
      // k2's transcode of a 90 s input, created on DAY1 and completed on DAY2; one still waiting;
      // one of a chunked task's pieces (issue #30), whose output holds the same duration again.
      const parent = await task({
        key: k2,
        created: `${DAY1}T23:00:00Z`,
        updated: `${DAY2}T00:10:00Z`,
        output: { input_video: { duration: 90, size: 1 } },
        params: { creatorId: 'carol' },
      });
      await task({ key: k2, phase: 'waiting', created: `${DAY2}T05:00:00Z` });
      await task({
        key: k2,
        type: 'transcode-stitch',
        parent,
        created: `${DAY2}T00:00:00Z`,
        output: { input_video: { duration: 90, size: 1 } },
      });
      // An upload made an asset of 30 s for creator dave (its task's duration is the asset's).
      const upload = await task({
        key: k1,
        type: 'upload',
        created: `${DAY2}T06:00:00Z`,
        output: { videoSpec: { duration: 30 } },
      });
      await db.query(
        `INSERT INTO assets (id, owner, project_id, playback_id, name, phase, task_id, source, creator_id, output, created_at)
         VALUES ($1, 'alice', $2, 'usagetest0000001', 'a', 'ready', $3, '{"type":"url"}', $4, $5, $6)`,
        [
          randomUUID(),
          randomUUID(),
          upload,
          JSON.stringify({ type: 'unverified', value: 'dave' }),
          JSON.stringify({ videoSpec: { duration: 30 } }),
          `${DAY2}T06:00:00Z`,
        ],
      );
      // Bob's, never alice's.
      await task({
        owner: 'bob',
        key: other,
        created: `${DAY2}T00:00:00Z`,
        output: { input_video: { duration: 600 } },
      });
    });
    after(() => db?.close());

    it("sums the owner's keys per UTC day, per model and per key", async () => {
      const u = await readUsage(store, { owner: 'alice', from: DAY1, to: DAY2 }, await store.keys('alice'));
      assert.deepEqual(
        u.days.map((d) => [d.day, d.requests, d.tokens, d.tasks, d.transcodedMinutes, d.usd]),
        [
          [DAY1, 10, 300, 1, 0, 0.000100000001],
          [DAY2, 12, 50, 2, 2, 0.00006],
        ],
      );
      assert.deepEqual(u.days[0]?.models, [{ model: 'org/a', requests: 1, tokens: 200, usd: 0.000100000001 }]);
      assert.deepEqual(u.days[1]?.models, [
        { model: 'org/b', requests: 2, tokens: 40, usd: 0.00005 },
        { model: 'org/a', requests: 1, tokens: 10, usd: 0.00001 },
      ]);
      assert.deepEqual(u.total, { requests: 22, tokens: 350, tasks: 3, transcodedMinutes: 2, usd: 0.000160000001 });
      assert.deepEqual(
        u.models.map((m) => [m.model, m.requests, m.tokens]),
        [
          ['org/a', 2, 210],
          ['org/b', 2, 40],
        ],
      );
      const byKey = Object.fromEntries(u.keys.map((k) => [k.id, [k.requests, k.tokens, k.tasks, k.transcodedMinutes]]));
      assert.deepEqual(byKey, { [k1]: [15, 350, 1, 0.5], [k2]: [7, 0, 2, 1.5] });
    });

    it("one key's usage is that key's alone", async () => {
      const key = await store.key('alice', k2);
      assert.ok(key);
      const u = await readUsage(store, { owner: 'alice', from: DAY1, to: DAY2, keyId: k2 }, [key]);
      assert.deepEqual(u.total, { requests: 7, tokens: 0, tasks: 2, transcodedMinutes: 1.5, usd: 0 });
      assert.deepEqual(u.models, []);
      assert.equal(await store.key('alice', other), null, "another owner's key is not alice's");
      assert.equal(await store.key('alice', 'not-a-uuid'), null);
    });

    it('a range of one day holds that day only', async () => {
      const u = await readUsage(store, { owner: 'alice', from: DAY2, to: DAY2 }, []);
      assert.deepEqual(
        u.days.map((d) => d.day),
        [DAY2],
      );
      assert.equal(u.total.requests, 12);
      assert.equal(u.total.usd, 0.00006);
    });

    it("Livepeer's metric: minutes transcoded in [from, to), minutes kept, by creator", async () => {
      const ms = (t: string) => Date.parse(t);
      const all = await store.livepeerUsage({
        owner: 'alice',
        fromMs: ms(`${DAY1}T00:00:00Z`),
        toMs: ms('2026-03-03'),
      });
      assert.deepEqual(all, { transcodedSeconds: 120, storedSeconds: 30 });
      const carol = await store.livepeerUsage({
        owner: 'alice',
        fromMs: 0,
        toMs: ms('2026-03-03'),
        creatorId: 'carol',
      });
      assert.deepEqual(carol, { transcodedSeconds: 90, storedSeconds: 0 });
      const dave = await store.livepeerUsage({ owner: 'alice', fromMs: 0, toMs: ms('2026-03-03'), creatorId: 'dave' });
      assert.deepEqual(dave, { transcodedSeconds: 30, storedSeconds: 30 });
      // `to` is exclusive: the transcode completed at 00:10 of DAY2.
      const before = await store.livepeerUsage({ owner: 'alice', fromMs: 0, toMs: ms(`${DAY2}T00:10:00Z`) });
      assert.deepEqual(before, { transcodedSeconds: 0, storedSeconds: 0 });
    });
  });
}
