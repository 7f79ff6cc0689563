// The session routes on both databases, sessions made as the live runtime makes them (the
// session store's claim, on a node that beats): GET /api/session (newest first, paged),
// GET /api/session/{id}, GET /api/stream/{id}/sessions (?record= as the SDK sends it), the
// Session's shape as the `livepeer` SDK parses it, and another owner's session and stream: 404.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import { createLogger } from '../../src/lib/log.ts';
import { LiveSessionStore, NodeRegistry } from '../../src/live/index.ts';
import { databaseKinds, startTestServer, type TestServer } from '../helpers/server.ts';

for (const { kind, skip } of await databaseKinds()) {
  describe(`session routes (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let alice: string;
    let bob: string;
    let sdk: Livepeer;
    let sessions: LiveSessionStore;
    let node: NodeRegistry;

    before(async () => {
      server = await startTestServer({ database: kind, roles: { api: true, worker: false } });
      alice = await server.key('alice');
      bob = await server.key('bob');
      sdk = new Livepeer({ apiKey: alice, serverURL: `${server.url}/api` });
      const db = server.running.core.db;
      sessions = new LiveSessionStore(db);
      node = new NodeRegistry({ db, log: createLogger({ level: 'silent' }) });
      await node.register(undefined);
    });
    after(async () => {
      await node.unregister();
      await server.stop();
    });

    /** A publish of `streamId` that starts and ends (window 0: each is a session of its own). */
    async function publish(streamId: string): Promise<string> {
      const k = { streamId, sessionId: randomUUID(), nodeId: node.id };
      const claim = await sessions.claim({ ...k, protocol: 'rtmp', windowSecs: 0 });
      assert.equal(claim.claimed, true);
      await sessions.idle(k);
      await sessions.end(k);
      return k.sessionId;
    }

    it('lists and reads the sessions of a stream as the SDK parses them', async () => {
      const made = await sdk.stream.create({ name: 'cam', record: true, profiles: [] });
      const stream = made.stream;
      assert.ok(stream?.id);
      const first = await publish(stream.id);
      await sdk.stream.update({ record: false }, stream.id);
      const second = await publish(stream.id);

      const all = await sdk.session.getRecorded(stream.id);
      assert.deepEqual(
        all.data?.map((s) => s.id),
        [second, first],
        'newest first',
      );
      const recorded = await sdk.session.getRecorded(stream.id, true);
      assert.deepEqual(
        recorded.data?.map((s) => s.id),
        [first],
      );
      for (const record of ['1', 'true', '0', 'false']) {
        const res = await server.call('GET', `/api/stream/${stream.id}/sessions?record=${record}`, { key: alice });
        const ids = (res.body as { id: string }[]).map((s) => s.id);
        assert.deepEqual(ids, record === '1' || record === 'true' ? [first] : [second], `record=${record}`);
      }

      const one = (await sdk.session.get(first)).session;
      assert.equal(one?.id, first);
      assert.equal(one?.name, 'cam');
      assert.equal(one?.parentId, stream.id);
      assert.equal(one?.playbackId, stream.playbackId);
      assert.equal(one?.record, true);
      assert.equal(one?.recordingStatus, 'waiting', 'recorded, no asset yet');
      assert.equal(typeof one?.createdAt, 'number');
      assert.equal(typeof one?.lastSeen, 'number');
      assert.deepEqual(one?.profiles, []);
      const other = (await sdk.session.get(second)).session;
      assert.equal(other?.recordingStatus, 'none');
      assert.equal(other?.record, false);
      const raw = await server.call('GET', `/api/session/${second}`, { key: alice });
      const body = raw.body as Record<string, unknown>;
      assert.equal('recordingUrl' in body, false, 'no recordingUrl before a recording is ready');
      assert.equal('mp4Url' in body, false);
    });

    it('GET /api/session pages every session of the owner, newest first', async () => {
      const s = (await sdk.stream.create({ name: 'paged' })).stream;
      assert.ok(s?.id);
      const ids = [await publish(s.id), await publish(s.id), await publish(s.id)];
      const all = (await sdk.session.getAll()).data ?? [];
      assert.deepEqual(
        all.slice(0, 3).map((x) => x.id),
        [...ids].reverse(),
      );
      const page = await server.call('GET', '/api/session?limit=2', { key: alice });
      assert.equal((page.body as unknown[]).length, 2);
      assert.match(String(page.headers.get('link')), /rel="next"/);
    });

    it("answers 404 for another owner's session and stream, and for ids that are none", async () => {
      const s = (await sdk.stream.create({ name: 'private' })).stream;
      assert.ok(s?.id);
      const id = await publish(s.id);
      for (const path of [`/api/session/${id}`, `/api/stream/${s.id}/sessions`]) {
        assert.equal((await server.call('GET', path, { key: bob })).status, 404, path);
        assert.equal((await server.call('GET', path, { key: alice })).status, 200, path);
      }
      assert.deepEqual((await server.call('GET', '/api/session', { key: bob })).body, []);
      assert.equal((await server.call('GET', '/api/session/not-a-uuid', { key: alice })).status, 404);
      assert.equal((await server.call('GET', `/api/session/${randomUUID()}`, { key: alice })).status, 404);
      assert.equal((await server.call('GET', `/api/stream/${randomUUID()}/sessions`, { key: alice })).status, 404);
      assert.equal(
        (await server.call('GET', `/api/stream/${s.id}/sessions?record=maybe`, { key: alice })).status,
        422,
        'a record filter that is neither a boolean nor 0/1',
      );
    });
  });
}
