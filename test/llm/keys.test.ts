// The gateway's cache of authenticated API keys: a valid key is looked up once per TTL, an
// unknown one every time, and a revoked key stops working within the TTL (2 s by default).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify from 'fastify';
import { Accounts } from '../../src/accounts/index.ts';
import { openDb } from '../../src/db/index.ts';
import { registerGateway } from '../../src/llm/gateway/index.ts';
import { KEY_CACHE_TTL_MS, KeyCache } from '../../src/llm/gateway/keys.ts';
import { quietLog, testConfig } from '../helpers/llm.ts';

test('KeyCache: valid keys are trusted for the TTL only; unknown keys are never cached', async () => {
  let now = 1_000;
  const live = new Set(['Bearer good']);
  const lookups: string[] = [];
  const cache = new KeyCache({
    authenticate: async (h) => {
      lookups.push(h ?? '');
      return h && live.has(h) ? { owner: 'alice' } : null;
    },
    now: () => now,
  });
  assert.equal(KEY_CACHE_TTL_MS, 2000);
  assert.deepEqual(await cache.authenticate('Bearer good'), { owner: 'alice' });
  assert.deepEqual(await cache.authenticate('Bearer good'), { owner: 'alice' });
  assert.equal(lookups.length, 1, 'the second request is answered from memory');
  assert.equal(await cache.authenticate('Bearer bad'), null);
  assert.equal(await cache.authenticate('Bearer bad'), null);
  assert.equal(lookups.length, 3, 'an unknown key is looked up every time');

  live.delete('Bearer good'); // revoked
  now += KEY_CACHE_TTL_MS - 1;
  assert.deepEqual(await cache.authenticate('Bearer good'), { owner: 'alice' }, 'still trusted inside the TTL');
  now += 1;
  assert.equal(await cache.authenticate('Bearer good'), null, 'revocation holds once the TTL is over');
  assert.equal(await cache.authenticate(undefined), null);
  assert.throws(() => new KeyCache({ authenticate: async () => null, ttlMs: -1 }), /ttlMs: must be from 0 to 60000/);
});

test('a revoked key gets 401 from the gateway once the cache TTL has passed', async () => {
  const db = await openDb({});
  const accounts = new Accounts(db);
  const app = Fastify();
  const gw = await registerGateway(app, { config: testConfig({ gatewayPollMs: 60_000 }), db, accounts, log: quietLog, keyCacheMs: 100 });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  try {
    const { id, key } = await accounts.createKey('dora');
    const ledger = (): Promise<Response> => fetch(`${url}/api/ledger`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal((await ledger()).status, 200);
    assert.equal(await accounts.revokeKey(id), true);
    await sleep(150);
    const res = await ledger();
    assert.equal(res.status, 401);
    assert.match(JSON.stringify(await res.json()), /missing or unknown API key/);
  } finally {
    await gw.close();
    await app.close();
    await db.close();
  }
});
