// A limited key's request in ONE statement (issue #32, accounts/ KeyLimiter.hold, KeyTaskAdmission and
// migration 401): the LLM charge counts the request the auth step left to it (Accounts.admit's
// `defer`), with its tokens, budget and reservation; a request that never reached its charge
// is counted once answered; a failover's second charge does not count it again; POST
// /api/transcode's concurrent transcodes are exact with no transaction around the insert.
// On PostgreSQL with two pools (as two processes would hold), and on the embedded database.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Accounts, KeyLimiter, KeyTaskAdmission, type Principal } from '../../src/accounts/index.ts';
import { type Db, openDb } from '../../src/db/index.ts';
import { Billing } from '../../src/llm/gateway/index.ts';
import { Ledger } from '../../src/llm/ledger.ts';
import { RateLimitedError } from '../../src/lib/errors.ts';
import { TaskStore } from '../../src/tasks/index.ts';
import { testPostgres } from '../helpers/postgres.ts';
import { freshWindow } from '../helpers/rate-window.ts';

const WINDOW_MS = 60_000;

const pg = await testPostgres();

for (const kind of ['postgres', 'embedded'] as const) {
  describe(`a limited key's request in one statement (${kind})`, { skip: kind === 'postgres' && !pg }, () => {
    // Two handles on one database: two pools on PostgreSQL (two processes' worth), one PGlite.
    let dbs: Db[] = [];
    let limiters: KeyLimiter[] = [];
    let stores: TaskStore[] = [];
    before(async () => {
      if (kind === 'postgres' && pg) {
        const url = await pg.createDatabase();
        dbs = [await openDb({ databaseUrl: url }), await openDb({ databaseUrl: url, migrate: false })];
      } else dbs = [await openDb({})];
      limiters = dbs.map((db) => new KeyLimiter(db, { windowMs: WINDOW_MS, authFailuresPerWindow: 20 }));
      stores = dbs.map(
        (db) =>
          new TaskStore(db, {
            admission: new KeyTaskAdmission({ windowMs: WINDOW_MS, encoding: ['transcode-file'] }),
          }),
      );
    });
    after(async () => {
      for (const l of limiters) await l.close();
      for (const db of dbs) await db.close();
    });
    const side = (i: number) => {
      const db = dbs[i % dbs.length] as Db;
      const limiter = limiters[i % limiters.length] as KeyLimiter;
      return { db, limiter, accounts: new Accounts(db, { limiter }) };
    };
    const charge = (key: Principal, i: number) =>
      new Billing(new Ledger(side(i).db), { usageBased: true, limiter: side(i).limiter }).open({
        owner: key.owner,
        key,
        maxTokens: 10,
        pricePerToken: 0.001,
        model: 'a/b',
        orchestrator: 'o',
        requestId: `r${i}`,
      });
    const windowUsed = async (id: string, k: 'requests' | 'tokens') =>
      Number(
        (
          await side(0).db.query<{ used: string }>(
            'SELECT used::text FROM key_windows WHERE key_id = $1 AND kind = $2',
            [id, k],
          )
        )[0]?.used ?? 0,
      );

    it('counts a deferred request in its charge: exactly N of many concurrent, nothing refused charged', async () => {
      await freshWindow(WINDOW_MS, 8000);
      const made = await side(0).accounts.createKey('defer', { requestsPerMinute: 5, tokensPerMinute: 1000 });
      await new Ledger(side(0).db).credit({ owner: 'defer', usd: 10 });
      const answers = await Promise.all(
        Array.from({ length: 16 }, async (_, i) => {
          const key = await side(i).accounts.admit(`Bearer ${made.key}`, {
            address: '127.0.0.1',
            defer: { done: false },
          });
          assert.ok(key.deferred, 'the auth step left the count to the charge');
          return charge(key, i);
        }),
      );
      const ok = answers.filter((a) => !(a instanceof Error));
      assert.equal(ok.length, 5, answers.map((a) => (a instanceof Error ? a.message : 'ok')).join('\n'));
      for (const a of answers.filter((x) => x instanceof Error))
        assert.ok(a instanceof RateLimitedError && a.kind === 'requests', String(a));
      assert.equal(await windowUsed(made.id, 'requests'), 5);
      assert.equal(await windowUsed(made.id, 'tokens'), 50, 'refused requests took no tokens');
      const [day] = await side(0).db.query<{ requests: string }>(
        'SELECT requests::text FROM api_key_days WHERE key_id = $1',
        [made.id],
      );
      assert.equal(day?.requests, '5');
      const reserved = await side(0).db.query('SELECT 1 FROM llm_ledger WHERE key_id = $1', [made.id]);
      assert.equal(reserved.length, 5, 'nothing refused is in the ledger');
    });

    it('counts a request once: not again on a second charge (failover), and once answered when it never reached one', async () => {
      await freshWindow(WINDOW_MS, 8000);
      const made = await side(0).accounts.createKey('once', { requestsPerMinute: 100 });
      await new Ledger(side(0).db).credit({ owner: 'once', usd: 10 });
      const key = await side(0).accounts.admit(`Bearer ${made.key}`, { address: '127.0.0.1', defer: { done: false } });
      const first = await charge(key, 0);
      assert.ok(!(first instanceof Error));
      await first.release();
      const second = await charge(key, 1);
      assert.ok(!(second instanceof Error));
      await side(0).limiter.countDeferred(key);
      assert.equal(await windowUsed(made.id, 'requests'), 1);
      const refused = await side(1).accounts.admit(`Bearer ${made.key}`, {
        address: '127.0.0.1',
        defer: { done: false },
      });
      await side(1).limiter.countDeferred(refused);
      await side(1).limiter.countDeferred(refused);
      assert.equal(await windowUsed(made.id, 'requests'), 2);
    });

    it('holds concurrent transcodes exactly, with the request counted in the insert', async () => {
      await freshWindow(WINDOW_MS, 8000);
      const made = await side(0).accounts.createKey('slots', { concurrentTranscodes: 3, requestsPerMinute: 100 });
      const projectId = (
        await side(0).db.query<{ project_id: string }>('SELECT project_id FROM owners WHERE name = $1', ['slots'])
      )[0]?.project_id as string;
      const answers = await Promise.allSettled(
        Array.from({ length: 12 }, async (_, i) => {
          const { accounts } = side(i);
          const key = await accounts.admit(`Bearer ${made.key}`, { address: '127.0.0.1', defer: { done: false } });
          return stores[i % stores.length]?.create({
            owner: key.owner,
            projectId,
            type: 'transcode-file',
            params: {},
            requesterId: null,
            maxQueuedPerOwner: 100,
            key,
          });
        }),
      );
      const created = answers.filter((a) => a.status === 'fulfilled');
      assert.equal(created.length, 3);
      for (const a of answers)
        if (a.status === 'rejected') assert.match(String(a.reason), /too many concurrent transcodes/);
      assert.equal(await windowUsed(made.id, 'requests'), 12, 'each request counted in its insert');
    });
  });
}
