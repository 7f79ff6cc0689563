// The live streams' store on both databases: keys found by their hash and compared whole,
// one publish at a time (the session store's claim), the stream events written into the
// outbox with the change and without the key, and another owner's stream out of reach.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Db } from '../../src/db/index.ts';
import { NotFoundError } from '../../src/lib/errors.ts';
import { createLogger } from '../../src/lib/log.ts';
import { LiveSessionStore, NodeRegistry } from '../../src/live/index.ts';
import { StreamStore } from '../../src/live/store.ts';
import { databaseKinds, openTestDb } from '../helpers/server.ts';

const PROJECT = '00000000-0000-4000-8000-000000000000';
const COUNTERS = {
  isHealthy: false,
  issues: ['the ladder fell behind real time: 720p0 dropped'],
  ingestRate: 125_000,
  outgoingRate: 300_000,
  sourceSegments: 4,
  transcodedSegments: 8,
  sourceSegmentsDuration: 4,
  transcodedSegmentsDuration: 8,
  sourceBytes: 500_000,
  transcodedBytes: 1_200_000,
};

for (const { kind, skip } of await databaseKinds()) {
  describe(`streams store (${kind} database)`, { skip }, () => {
    let db: Db;
    let streams: StreamStore;
    let sessions: LiveSessionStore;
    let node: NodeRegistry;
    const events = (id: string) =>
      db.query<{ event: string; owner: string; task: Record<string, unknown> }>(
        'SELECT event, owner, task FROM task_events WHERE task_id = $1 ORDER BY created_at',
        [id],
      );

    before(async () => {
      db = await openTestDb(kind);
      for (const owner of ['alice', 'bob'])
        await db.query('INSERT INTO owners (name, project_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
          owner,
          PROJECT,
        ]);
      streams = new StreamStore(db);
      sessions = new LiveSessionStore(db);
      node = new NodeRegistry({ db, log: createLogger({ level: 'silent' }) });
      await node.register(undefined);
    });
    after(async () => {
      await node.unregister();
      await db.close();
    });

    it('makes a long random key and finds the stream by it, and by nothing shorter or longer', async () => {
      const s = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'cam' });
      assert.match(s.streamKey, /^[a-z0-9]{6}(-[a-z0-9]{6}){3}$/);
      assert.match(s.playbackId, /^[a-z0-9]{16}$/);
      assert.equal(s.profiles, null);
      assert.deepEqual(s.multistream, { targets: [] });
      assert.equal((await streams.findByKey(s.streamKey))?.id, s.id);
      assert.equal(await streams.findByKey(s.streamKey.slice(0, -1)), undefined);
      assert.equal(await streams.findByKey(`${s.streamKey}x`), undefined);
      assert.equal(await streams.findByKey(''), undefined);
      const other = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'cam' });
      assert.notEqual(other.streamKey, s.streamKey);
    });

    it("keeps another owner's stream out of reach, and a deleted one's key publishes no more", async () => {
      const s = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'mine' });
      await assert.rejects(streams.get('bob', s.id), NotFoundError);
      await assert.rejects(streams.update('bob', s.id, { suspended: true }), NotFoundError);
      await assert.rejects(streams.remove('bob', s.id), NotFoundError);
      await assert.rejects(streams.get('alice', 'not-a-uuid'), NotFoundError);
      await streams.remove('alice', s.id);
      await assert.rejects(streams.get('alice', s.id), NotFoundError);
      assert.equal(await streams.findByKey(s.streamKey), undefined);
      assert.equal(await streams.byPlaybackId(s.playbackId), undefined);
    });

    it('changes only the fields a patch names; null clears profiles and the playback policy', async () => {
      const profiles = [{ name: 'low', width: 320, height: 240, bitrate: 300_000, fps: 0 }];
      const s = await streams.create({
        owner: 'alice',
        projectId: PROJECT,
        name: 'p',
        profiles,
        playbackPolicy: { type: 'jwt' },
        userTags: { a: 1 },
      });
      assert.deepEqual(s.profiles, profiles);
      const suspended = await streams.update('alice', s.id, { suspended: true });
      assert.equal(suspended.suspended, true);
      assert.deepEqual(suspended.profiles, profiles);
      assert.deepEqual(suspended.userTags, { a: 1 });
      const cleared = await streams.update('alice', s.id, { profiles: null, playbackPolicy: null, name: 'q' });
      assert.equal(cleared.profiles, null);
      assert.equal(cleared.playbackPolicy, undefined);
      assert.equal(cleared.name, 'q');
      assert.equal((await streams.update('alice', s.id, { profiles: [] })).profiles?.length, 0);
    });

    it('lets one publish start at a time, keeps its counters, and writes started and idle without the key', async () => {
      const target = { profile: 'source', spec: { name: 'yt', url: 'rtmp://a.example/live2/their-key-123' } };
      const s = await streams.create({
        owner: 'alice',
        projectId: PROJECT,
        name: 'live',
        multistream: { targets: [target] },
      });
      const k = { streamId: s.id, sessionId: randomUUID(), nodeId: node.id };
      assert.equal((await sessions.claim({ ...k, protocol: 'rtmp', windowSecs: 0 })).claimed, true);
      const second = { ...k, sessionId: randomUUID() };
      assert.deepEqual(await sessions.claim({ ...second, protocol: 'srt', windowSecs: 0 }), {
        claimed: false,
        why: 'live',
      });
      await sessions.report(k, COUNTERS);
      const live = await streams.get('alice', s.id);
      assert.equal(live.isActive, true);
      assert.equal(live.isHealthy, false);
      assert.deepEqual(live.issues, COUNTERS.issues);
      assert.equal(live.transcodedBytes, 1_200_000);
      assert.equal(live.sourceSegments, 4);
      assert.ok(live.lastSeen);
      await sessions.idle(second); // another session's end changes nothing
      assert.equal((await streams.get('alice', s.id)).isActive, true);
      await sessions.idle(k);
      const idle = await streams.get('alice', s.id);
      assert.equal(idle.isActive, false);
      assert.equal(idle.ingestRate, 0);
      const written = await events(s.id);
      assert.deepEqual(
        written.map((e) => e.event),
        ['stream.started', 'stream.idle'],
      );
      assert.equal(written[0]?.task.is_active, true);
      assert.equal(written[1]?.task.is_active, false);
      assert.equal(written[0]?.owner, 'alice');
      for (const e of written) {
        assert.ok(!JSON.stringify(e.task).includes(s.streamKey), 'no key in the outbox');
        assert.ok(!JSON.stringify(e.task).includes('their-key-123'), "no target's URL in the outbox");
        assert.deepEqual(e.task.multistream, { targets: [{ profile: 'source', spec: { name: 'yt' } }] });
      }
    });

    it('reads a stream whose node stopped beating as not live, and lets a new publish take it over', async () => {
      const s = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'orphaned' });
      const dead = new NodeRegistry({ db, log: createLogger({ level: 'silent' }) });
      await dead.register(undefined);
      const k = { streamId: s.id, sessionId: randomUUID(), nodeId: dead.id };
      assert.equal((await sessions.claim({ ...k, protocol: 'rtmp', windowSecs: 0 })).claimed, true);
      assert.equal((await streams.get('alice', s.id)).isActive, true);
      // Its node died: its last heartbeat is older than the lease.
      await db.query("UPDATE live_nodes SET heartbeat_at = now() - interval '5 seconds' WHERE id = $1", [dead.id]);
      assert.equal((await streams.get('alice', s.id)).isActive, false);
      const next = randomUUID();
      const claim = await sessions.claim({ ...k, sessionId: next, nodeId: node.id, protocol: 'srt', windowSecs: 0 });
      assert.equal(claim.claimed && claim.continued, false);
      const live = await streams.get('alice', s.id);
      assert.equal(live.isActive, true);
      assert.equal(live.sessionId, next);
    });

    it('refuses a suspended stream its start', async () => {
      const s = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'off' });
      await streams.update('alice', s.id, { suspended: true });
      const k = { streamId: s.id, sessionId: randomUUID(), nodeId: node.id };
      assert.deepEqual(await sessions.claim({ ...k, protocol: 'rtmp', windowSecs: 0 }), {
        claimed: false,
        why: 'gone',
      });
      assert.equal((await events(s.id)).length, 0);
    });

    it('lists newest first in pages', async () => {
      const made = [];
      for (let i = 0; i < 3; i++) made.push(await streams.create({ owner: 'bob', projectId: PROJECT, name: `s${i}` }));
      const first = await streams.list('bob', { limit: 2 });
      assert.deepEqual(
        first.streams.map((s) => s.name),
        ['s2', 's1'],
      );
      assert.ok(first.next);
      const second = await streams.list('bob', { limit: 2, cursor: first.next });
      assert.deepEqual(
        second.streams.map((s) => s.name),
        ['s0'],
      );
      assert.equal(second.next, null);
    });
  });
}
