// The gateway authenticates through Accounts, whose key cache (MEDIAPLANE_AUTH_CACHE_MS)
// keeps a revoked key working in another process for at most its TTL.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify from 'fastify';
import { Accounts } from '../../../src/accounts/index.ts';
import { openDb } from '../../../src/db/index.ts';
import { registerTestGateway, testConfig } from '../../helpers/llm.ts';

test('a revoked key gets 401 from the gateway once the cache TTL has passed', async () => {
  const db = await openDb({});
  // Revoked through another Accounts, as `mediaplane keys revoke` would from another process.
  const admin = new Accounts(db);
  const accounts = new Accounts(db, { authCacheMs: 100 });
  const app = Fastify();
  const gw = await registerTestGateway(app, { config: testConfig({ gatewayPollMs: 60_000 }), db, accounts });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  try {
    const { id, key } = await admin.createKey('dora');
    const ledger = (): Promise<Response> => fetch(`${url}/api/ledger`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal((await ledger()).status, 200);
    assert.equal(await admin.revokeKey(id), true);
    await sleep(150);
    const res = await ledger();
    assert.equal(res.status, 401);
    assert.match(JSON.stringify(await res.json()), /invalid API key/);
  } finally {
    await gw.close();
    await app.close();
    await db.close();
  }
});
