import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { Accounts } from '../../src/accounts/index.ts';
import { bearerToken } from '../../src/lib/bearer.ts';
import { openDb, type Db } from '../../src/db/index.ts';

let db: Db;
before(async () => {
  db = await openDb({});
});
after(() => db.close());

it('reads the bearer token whatever the case of the scheme word, and nothing else', () => {
  assert.equal(bearerToken('Bearer abc'), 'abc');
  assert.equal(bearerToken('bearer   abc '), 'abc');
  assert.equal(bearerToken('BEARER abc'), 'abc');
  assert.equal(bearerToken('Basic abc'), null);
  assert.equal(bearerToken('Bearer'), null);
  assert.equal(bearerToken(undefined), null);
});

it('stores keys only as hashes and refuses bad owner names', async () => {
  const accounts = new Accounts(db);
  const k = await accounts.createKey('alice@example.com');
  const rows = await db.query<{ key_hash: string; prefix: string }>('SELECT key_hash, prefix FROM api_keys');
  assert.ok(rows.every((r) => !r.key_hash.includes(k.key) && r.key_hash.length === 64));
  await assert.rejects(accounts.createKey('no spaces please'), /owner: must be/);
  assert.equal((await accounts.authenticate(`Bearer ${k.key}`))?.owner, 'alice@example.com');
  assert.equal(await accounts.authenticate(`Bearer ${k.key}x`), null);
});

it('a cached key revoked elsewhere stops working once the cache entry expires; here, at once', async () => {
  // A TTL that the lookup, the revoke and the second lookup fit in on a loaded host.
  const api = new Accounts(db, { authCacheMs: 3000 });
  const admin = new Accounts(db);
  const a = await admin.createKey('bob');
  assert.equal((await api.authenticate(`Bearer ${a.key}`))?.owner, 'bob');
  await admin.revokeKey(a.id);
  assert.equal((await api.authenticate(`Bearer ${a.key}`))?.owner, 'bob', 'served from the cache');
  await new Promise((r) => setTimeout(r, 3050));
  assert.equal(await api.authenticate(`Bearer ${a.key}`), null, 'revocation seen after the TTL');
  const b = await admin.createKey('bob');
  assert.ok(await api.authenticate(`Bearer ${b.key}`));
  await api.revokeKey(b.id);
  assert.equal(await api.authenticate(`Bearer ${b.key}`), null, 'revoked in this process: at once');
});
