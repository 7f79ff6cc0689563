// Livepeer's signing-key routes (issue #28, spec/API.md section C) through the real `livepeer`
// SDK: accessControl.create/getAll/get/update/delete, whose zod models are strict, so every
// answer is checked against Livepeer's shapes. The SDK's model drops the private key, so it
// is read over plain HTTP at creation: an ES256 (P-256) pair as base64 of its PEMs, the
// private half in that answer only, never in the database, a later answer or a log line.

import assert from 'node:assert/strict';
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import { SigningKey$inboundSchema } from 'livepeer/models/components/signingkey.js';
import { refused } from '../helpers/sdk.ts';
import { databaseKinds, startTestServer, type TestServer } from '../helpers/server.ts';

const PATH = '/api/access-control/signing-key';

/** The status of an SDK call that fails, or a failure when it succeeds. */
async function refusedStatus(p: Promise<unknown>): Promise<number> {
  return (await refused(p)).statusCode;
}

const pem = (b64: string): string => Buffer.from(b64, 'base64').toString('utf8');

for (const { kind, skip } of await databaseKinds()) {
  describe(`signing keys (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let alice: string;
    let bob: string;
    let sdk: Livepeer;
    /** Every private key the server gave out, to look for where it must not be. */
    const privateKeys: string[] = [];
    /** Every answer after creation, as text. */
    const later: string[] = [];
    let first: { id: string; publicKey: string };
    let second: { id: string; publicKey: string; privateKey: string };

    before(async () => {
      server = await startTestServer({ database: kind });
      alice = await server.key('alice');
      bob = await server.key('bob');
      sdk = new Livepeer({ apiKey: alice, serverURL: `${server.url}/api` });
    });
    after(() => server.stop());

    it("accessControl.create makes a key (the SDK sends no body): Livepeer's default name, its public key", async () => {
      const res = await sdk.accessControl.create();
      assert.equal(res.statusCode, 200);
      const key = res.signingKey;
      assert.ok(key?.id, 'the SDK parsed the key');
      assert.equal(key.name, 'Signing Key 1');
      assert.equal(key.disabled, false);
      assert.ok(key.projectId);
      assert.ok(Math.abs((key.createdAt ?? 0) - Date.now()) < 60_000);
      const pub = createPublicKey(pem(key.publicKey));
      assert.equal(pub.asymmetricKeyType, 'ec');
      assert.equal(pub.asymmetricKeyDetails?.namedCurve, 'prime256v1');
      assert.match(pem(key.publicKey), /^-----BEGIN PUBLIC KEY-----\n/);
      first = { id: key.id, publicKey: key.publicKey };
    });

    it('over plain HTTP the create answer holds the private key, once: base64 of a PKCS#8 PEM that matches', async () => {
      const res = await server.call('POST', PATH, { key: alice, body: { name: 'web player' } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(Object.keys(res.body).sort(), [
        'createdAt',
        'disabled',
        'id',
        'name',
        'privateKey',
        'projectId',
        'publicKey',
      ]);
      assert.equal(res.body.name, 'web player');
      assert.match(pem(res.body.privateKey), /^-----BEGIN PRIVATE KEY-----\n/);
      const priv = createPrivateKey(pem(res.body.privateKey));
      assert.equal(priv.asymmetricKeyDetails?.namedCurve, 'prime256v1');
      assert.equal(createPublicKey(priv).export({ type: 'spki', format: 'pem' }), pem(res.body.publicKey));
      assert.ok(SigningKey$inboundSchema.safeParse(res.body).success, 'the SDK model parses it (dropping privateKey)');
      second = { id: res.body.id, publicKey: res.body.publicKey, privateKey: res.body.privateKey };
      privateKeys.push(res.body.privateKey);
    });

    it('accessControl.getAll lists them newest first, accessControl.get answers one: no private key in either', async () => {
      const list = await sdk.accessControl.getAll();
      assert.equal(list.statusCode, 200);
      assert.deepEqual(
        list.data?.map((k) => k.id),
        [second.id, first.id],
      );
      later.push(JSON.stringify(list.data));
      const one = await sdk.accessControl.get(second.id);
      assert.equal(one.signingKey?.name, 'web player');
      assert.equal(one.signingKey?.publicKey, second.publicKey);
      const raw = await server.call('GET', `${PATH}/${second.id}`, { key: alice });
      assert.equal(raw.body.privateKey, undefined);
      later.push(JSON.stringify(raw.body));
      const paged = await server.call('GET', `${PATH}?limit=1`, { key: alice });
      assert.equal(paged.body.length, 1);
      assert.match(paged.headers.get('link') ?? '', /rel="next"/);
      later.push(JSON.stringify(paged.body));
    });

    it('accessControl.update renames and disables (204, as on Livepeer); enabling again works', async () => {
      const res = await sdk.accessControl.update({ name: 'rotated', disabled: true }, second.id);
      assert.equal(res.statusCode, 204);
      const got = (await sdk.accessControl.get(second.id)).signingKey;
      assert.equal(got?.name, 'rotated');
      assert.equal(got?.disabled, true);
      await sdk.accessControl.update({ disabled: false }, second.id);
      const again = (await sdk.accessControl.get(second.id)).signingKey;
      assert.equal(again?.disabled, false);
      assert.equal(again?.name, 'rotated', 'a field left out is kept');
      const bad = await server.call('PATCH', `${PATH}/${second.id}`, { key: alice, body: { disabled: 'yes' } });
      assert.equal(bad.status, 422);
      assert.ok(
        bad.body.errors.some((e: string) => e.startsWith('disabled: ')),
        JSON.stringify(bad.body),
      );
      const unknown = await server.call('PATCH', `${PATH}/${second.id}`, { key: alice, body: { publicKey: 'x' } });
      assert.equal(unknown.status, 422);
    });

    it("another owner's key is a 404 for every route, and their list is empty; no API key is a 401", async () => {
      const other = new Livepeer({ apiKey: bob, serverURL: `${server.url}/api` });
      assert.equal(await refusedStatus(other.accessControl.get(second.id)), 404);
      assert.equal(await refusedStatus(other.accessControl.update({ disabled: true }, second.id)), 404);
      assert.equal(await refusedStatus(other.accessControl.delete(second.id)), 404);
      assert.deepEqual((await other.accessControl.getAll()).data, []);
      assert.equal((await sdk.accessControl.get(second.id)).signingKey?.disabled, false, 'unchanged');
      assert.equal((await server.call('GET', `${PATH}/not-a-uuid`, { key: alice })).status, 404);
      assert.equal((await server.call('GET', PATH)).status, 401);
      assert.equal((await server.call('POST', PATH)).status, 401);
    });

    it('accessControl.delete answers 204: the key leaves the list and is a 404 after', async () => {
      const res = await sdk.accessControl.delete(first.id);
      assert.equal(res.statusCode, 204);
      assert.equal(await refusedStatus(sdk.accessControl.get(first.id)), 404);
      assert.equal(await refusedStatus(sdk.accessControl.delete(first.id)), 404);
      assert.deepEqual(
        (await sdk.accessControl.getAll()).data?.map((k) => k.id),
        [second.id],
      );
    });

    it('an owner keeps at most 10 keys (a 422 that says so); deleting one makes room', async () => {
      for (let i = 0; i < 9; i++) {
        const res = await server.call('POST', PATH, { key: bob });
        assert.equal(res.status, 200);
        privateKeys.push(res.body.privateKey);
        if (i === 0) assert.equal(res.body.name, 'Signing Key 1');
      }
      const tenth = await server.call('POST', PATH, { key: bob, body: {} });
      assert.equal(tenth.status, 200);
      privateKeys.push(tenth.body.privateKey);
      const over = await server.call('POST', PATH, { key: bob, body: { name: 'one too many' } });
      assert.equal(over.status, 422);
      assert.deepEqual(over.body, {
        errors: ['an owner may have at most 10 signing keys; delete one before creating another'],
      });
      assert.equal((await server.call('DELETE', `${PATH}/${tenth.body.id}`, { key: bob })).status, 204);
      const room = await server.call('POST', PATH, { key: bob });
      assert.equal(room.status, 200);
      privateKeys.push(room.body.privateKey);
    });

    it('a body that breaks the rules is a 422 naming the field', async () => {
      const res = await server.call('POST', PATH, { key: alice, body: { name: '' } });
      assert.equal(res.status, 422);
      assert.ok(
        res.body.errors.some((e: string) => e.startsWith('name')),
        JSON.stringify(res.body),
      );
    });

    it('no private key is in the database, a later answer or a log line', async () => {
      assert.ok(privateKeys.length >= 12, `${privateKeys.length} keys made`);
      const rows = await server.running.core.db.query('SELECT * FROM signing_keys');
      const stored = JSON.stringify(rows);
      const events = JSON.stringify(await server.running.core.db.query('SELECT * FROM idempotency_keys'));
      for (const priv of privateKeys) {
        // The base64 and the PEM's own body (a line of it), whichever form a leak took.
        const body = pem(priv).split('\n')[1] ?? '';
        for (const [where, text] of [
          ['the database', stored + events],
          ['later answers', later.join('\n')],
          ['the logs', server.logs.text],
        ] as const) {
          assert.ok(!text.includes(priv), `the private key is in ${where}`);
          assert.ok(!text.includes(body), `a line of the private key's PEM is in ${where}`);
        }
      }
      assert.match(server.logs.text, /signing key created/);
    });

    it('the routes are in the OpenAPI document with their schemas', async () => {
      const doc = (await server.call('GET', '/api/openapi.json')).body;
      const coll = doc.paths['/api/access-control/signing-key'];
      const one = doc.paths['/api/access-control/signing-key/{keyId}'];
      assert.ok(coll?.post && coll.get, 'POST and GET of the collection');
      assert.ok(one?.get && one.patch && one.delete, 'GET, PATCH and DELETE of one key');
      const created = coll.post.responses['200'].content['application/json'].schema;
      assert.ok(created.properties.privateKey, 'the create answer documents privateKey');
      assert.equal(one.get.responses['200'].content['application/json'].schema.properties.privateKey, undefined);
      assert.ok(one.patch.requestBody.content['application/json'].schema.properties.disabled);
    });
  });
}
