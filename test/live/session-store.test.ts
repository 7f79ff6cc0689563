// The live sessions' store on both databases, as the nodes use it: the gate's claim (already
// live while the holder's lease holds, continued within the reconnect window, new otherwise,
// recording.started for a recorded stream's new session), the end as a compare-and-set of the
// holder, and the sweep of a holder that died (its heartbeat faked stale in SQL): the session
// ended, its stream idle, its recording queued once; the rows of nodes long dead deleted.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Db } from '../../src/db/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { LiveSessionStore, NodeRegistry, type SessionRecord, SessionSweep, StreamStore } from '../../src/live/index.ts';
import { databaseKinds, openTestDb } from '../helpers/server.ts';

const PROJECT = '00000000-0000-4000-8000-000000000000';
const log = createLogger({ level: 'silent' });

for (const { kind, skip } of await databaseKinds()) {
  describe(`live sessions store (${kind} database)`, { skip }, () => {
    let db: Db;
    let streams: StreamStore;
    let sessions: LiveSessionStore;
    let a: NodeRegistry;
    let b: NodeRegistry;

    before(async () => {
      db = await openTestDb(kind);
      await db.query('INSERT INTO owners (name, project_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
        'alice',
        PROJECT,
      ]);
      streams = new StreamStore(db);
      sessions = new LiveSessionStore(db);
      a = new NodeRegistry({ db, log });
      b = new NodeRegistry({ db, log });
      await a.register('http://10.0.0.1:8080');
      await b.register('http://10.0.0.2:8080');
    });
    after(async () => {
      await a.unregister();
      await b.unregister();
      await db.close();
    });

    // The events of a stream, sorted (those of one transaction share its time: their order is not kept).
    const events = async (streamId: string) =>
      (await db.query<{ event: string }>('SELECT event FROM task_events WHERE task_id = $1', [streamId]))
        .map((e) => e.event)
        .sort();
    const stale = (node: NodeRegistry) =>
      db.query("UPDATE live_nodes SET heartbeat_at = now() - interval '5 seconds' WHERE id = $1", [node.id]);
    const beat = (node: NodeRegistry) => node.beat();
    const claim = (streamId: string, node: NodeRegistry, windowSecs: number, publisherGone = false) =>
      sessions.claim({
        streamId,
        sessionId: randomUUID(),
        nodeId: node.id,
        protocol: 'rtmp',
        windowSecs,
        publisherGone,
      });

    it('continues a waiting session within the window, on this node or another', async () => {
      const s = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'cam', record: true });
      const first = await claim(s.id, a, 60);
      assert.ok(first.claimed && !first.continued);
      assert.equal(first.session.state, 'live');
      assert.equal(first.session.name, 'cam');
      assert.equal(first.session.nodeId, a.id);
      assert.deepEqual(await claim(s.id, b, 60), { claimed: false, why: 'live' }, 'live and leased: refused');
      const k = { streamId: s.id, sessionId: first.session.id, nodeId: a.id };
      // The node that holds it knows its publisher went before it wrote so.
      const here = await claim(s.id, a, 60, true);
      assert.ok(here.claimed && here.continued && here.session.id === first.session.id);
      await sessions.idle(k);
      assert.equal((await sessions.get('alice', first.session.id)).state, 'waiting');
      assert.equal((await streams.get('alice', s.id)).isActive, false);
      assert.deepEqual(await sessions.continuedElsewhere([first.session.id], a.id), [], 'still waiting on A');
      const there = await claim(s.id, b, 60);
      assert.ok(there.claimed && there.continued, 'continued on another node');
      assert.equal(there.session.id, first.session.id);
      assert.equal(there.session.nodeId, b.id);
      assert.equal((await streams.get('alice', s.id)).isActive, true);
      // A's sweep finds its waiting copy continued elsewhere; its window timer finds it no longer its own.
      assert.deepEqual(await sessions.continuedElsewhere([first.session.id], a.id), [first.session.id]);
      assert.equal(await sessions.end(k, ['waiting']), undefined);
      assert.equal((await sessions.get('alice', first.session.id)).state, 'live');
      assert.deepEqual(await events(s.id), [
        'recording.started',
        'stream.idle',
        'stream.started',
        'stream.started',
        'stream.started',
      ]);
    });

    it('continues a live session whose holder lost its lease; a window of 0 opens a new one', async () => {
      const s = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'cam' });
      const first = await claim(s.id, a, 60);
      assert.ok(first.claimed);
      await stale(a);
      assert.equal((await streams.get('alice', s.id)).isActive, false, "the holder's lease is gone");
      const next = await claim(s.id, b, 60);
      assert.ok(next.claimed && next.continued && next.session.id === first.session.id);
      await beat(a);
      const k = { streamId: s.id, sessionId: first.session.id, nodeId: b.id };
      await sessions.idle(k);
      const fresh = await claim(s.id, b, 0);
      assert.ok(fresh.claimed && !fresh.continued);
      assert.notEqual(fresh.session.id, first.session.id);
      assert.equal((await sessions.get('alice', first.session.id)).state, 'ended', 'the old session ended');
      assert.equal((await streams.get('alice', s.id)).sessionId, fresh.session.id);
    });

    it('ends a session only for its holder, once', async () => {
      const s = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'cam', record: true });
      const c = await claim(s.id, a, 60);
      assert.ok(c.claimed);
      const k = { streamId: s.id, sessionId: c.session.id, nodeId: a.id };
      assert.equal(await sessions.end({ ...k, nodeId: b.id }, ['live', 'waiting']), undefined, 'not its holder');
      const ended = await sessions.end(k, ['live', 'waiting']);
      assert.equal(ended?.state, 'ended');
      assert.ok(ended?.endedAt);
      assert.equal(await sessions.end(k, ['live', 'waiting']), undefined, 'once');
      assert.equal((await streams.get('alice', s.id)).isActive, false);
      assert.deepEqual(await events(s.id), ['recording.started', 'stream.idle', 'stream.started']);
    });

    it('sweeps the sessions of a dead holder past the window and queues their recordings once', async () => {
      const dead = new NodeRegistry({ db, log });
      await dead.register(undefined);
      const s = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'orphan', record: true });
      const c = await claim(s.id, dead, 1);
      assert.ok(c.claimed);
      const queued: SessionRecord[] = [];
      const longDead = new NodeRegistry({ db, log });
      await longDead.register(undefined);
      await db.query("UPDATE live_nodes SET heartbeat_at = now() - interval '11 minutes' WHERE id = $1", [longDead.id]);
      const sweep = new SessionSweep({
        nodes: a,
        store: sessions,
        recordings: { queue: async (x) => void queued.push(x) },
        windowSecs: 1,
        log,
      });
      await sweep.sweep();
      assert.equal((await sessions.get('alice', c.session.id)).state, 'live', 'its holder still beats');
      const nodeIds = async () => (await db.query<{ id: string }>('SELECT id FROM live_nodes')).map((r) => r.id);
      assert.ok(!(await nodeIds()).includes(longDead.id), 'a node long dead: its row is deleted');
      assert.ok((await nodeIds()).includes(dead.id), 'a node beating keeps its row');
      await stale(dead);
      await db.query("UPDATE stream_sessions SET last_seen = now() - interval '2 seconds' WHERE id = $1", [
        c.session.id,
      ]);
      await sweep.sweep();
      const swept = await sessions.get('alice', c.session.id);
      assert.equal(swept.state, 'ended');
      assert.ok(swept.recordingQueuedAt);
      const ofThis = () => queued.filter((x) => x.id === c.session.id);
      assert.equal(ofThis().length, 1);
      await sweep.sweep();
      assert.equal(ofThis().length, 1, 'queued once');
      assert.equal((await streams.get('alice', s.id)).isActive, false);
      assert.deepEqual(await events(s.id), ['recording.started', 'stream.idle', 'stream.started']);
      await dead.unregister();
    });
  });
}
