// Where a playbackId is live in the cluster (live/cluster LiveHolders), on both databases: the
// internal URL of the node holding the stream's current session while it is live or waiting
// and the node's lease holds; nothing for an ended session, a stale heartbeat or a stream
// never live; and one read per playbackId per period however often viewers ask.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Db } from '../../src/db/index.ts';
import { LiveHolders, type StreamRecord, StreamStore } from '../../src/live/index.ts';
import { databaseKinds, openTestDb } from '../helpers/server.ts';

const PROJECT = '00000000-0000-4000-8000-000000000000';

for (const { kind, skip } of await databaseKinds()) {
  describe(`the holder of a live playbackId (${kind})`, { skip }, () => {
    let db: Db;
    let stream: StreamRecord;
    const nodeId = randomUUID();
    const sessionId = randomUUID();

    before(async () => {
      db = await openTestDb(kind);
      await db.query('INSERT INTO owners (name, project_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
        'alice',
        PROJECT,
      ]);
      stream = await new StreamStore(db).create({ owner: 'alice', projectId: PROJECT, name: 'held' });
      await db.query(
        `INSERT INTO live_nodes (id, internal_url, heartbeat_at) VALUES ($1, 'http://10.0.0.5:8080', now())`,
        [nodeId],
      );
      await db.query(
        `INSERT INTO stream_sessions (id, stream_id, owner, project_id, name, playback_id, state, node_id)
         VALUES ($1, $2, 'alice', $3, 'held', $4, 'live', $5)`,
        [sessionId, stream.id, PROJECT, stream.playbackId, nodeId],
      );
      await db.query('UPDATE streams SET session_id = $1 WHERE id = $2', [sessionId, stream.id]);
    });
    after(() => db.close());

    /** A lookup that reads afresh on every call. */
    const fresh = () => new LiveHolders({ db, readEveryMs: 0 });

    it("answers the holder's internal URL while the session is live or waiting and the lease holds", async () => {
      assert.equal(await fresh().holder(stream.playbackId), 'http://10.0.0.5:8080');
      await db.query(`UPDATE stream_sessions SET state = 'waiting' WHERE id = $1`, [sessionId]);
      assert.equal(await fresh().holder(stream.playbackId), 'http://10.0.0.5:8080');
      assert.equal(await fresh().holder('nosuchplayback00'), undefined);
    });

    it('answers nothing once the lease is gone or the session ended', async () => {
      await db.query(`UPDATE live_nodes SET heartbeat_at = now() - interval '10 seconds' WHERE id = $1`, [nodeId]);
      assert.equal(await fresh().holder(stream.playbackId), undefined, 'a node that stopped beating');
      await db.query('UPDATE live_nodes SET heartbeat_at = now() WHERE id = $1', [nodeId]);
      await db.query(`UPDATE stream_sessions SET state = 'ended' WHERE id = $1`, [sessionId]);
      assert.equal(await fresh().holder(stream.playbackId), undefined, 'an ended session');
      await db.query(`UPDATE stream_sessions SET state = 'live' WHERE id = $1`, [sessionId]);
    });

    it('reads a playbackId once per period however many viewers ask', async () => {
      let reads = 0;
      let now = 0;
      const counting = {
        query: <T extends object>(sql: string, params?: readonly unknown[]) => {
          reads++;
          return db.query<T>(sql, params);
        },
      };
      const holders = new LiveHolders({ db: counting, readEveryMs: 1000, now: () => now });
      const answers = await Promise.all(Array.from({ length: 50 }, () => holders.holder(stream.playbackId)));
      assert.ok(answers.every((a) => a === 'http://10.0.0.5:8080'));
      assert.equal(reads, 1);
      now = 999;
      await holders.holder(stream.playbackId);
      assert.equal(reads, 1);
      now = 1000;
      await holders.holder(stream.playbackId);
      assert.equal(reads, 2);
    });
  });
}
