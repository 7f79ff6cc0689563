// Issue #25, hole 8: task event streams are bounded. An owner may hold only so many open
// (MEDIAPLANE_MAX_EVENT_STREAMS_PER_OWNER, 429 beyond), and the streams of one task share
// one read of it per change or poll, however many there are.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Accounts } from '../../src/accounts/index.ts';
import type { Db } from '../../src/db/index.ts';
import { parseSse } from '../../src/lib/sse.ts';
import { TaskStore, type TaskRow } from '../../src/tasks/index.ts';
import {
  databaseKinds,
  openTestDb,
  startTestServer,
  transcodeBody,
  waitFor,
  type TestServer,
} from '../helpers/server.ts';

const READ_TASK = /^SELECT .* FROM tasks WHERE id = \$1 AND owner = \$2( AND parent_id IS NULL)?$/s;

/** The database, counting the reads of one task (TaskStore.get) that go through it. */
function counting(db: Db): { db: Db; reads: () => number; reset: () => void } {
  let n = 0;
  const query: Db['query'] = (sql, params) => {
    if (READ_TASK.test(sql)) n++;
    return db.query(sql, params);
  };
  return {
    db: { ...db, query, kind: db.kind },
    reads: () => n,
    reset: () => {
      n = 0;
    },
  };
}

for (const { kind, skip } of await databaseKinds()) {
  describe(`task event streams are bounded (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let alice: string;
    let bob: string;

    before(async () => {
      server = await startTestServer({
        database: kind,
        roles: { api: true, worker: false },
        settings: { maxEventStreamsPerOwner: 2 },
      });
      alice = await server.key('alice');
      bob = await server.key('bob');
    });
    after(() => server.stop());

    const create = async (key: string): Promise<string> => {
      const res = await server.call('POST', '/api/transcode', { key, body: transcodeBody() });
      assert.equal(res.status, 200);
      return res.body.id as string;
    };
    async function open(
      id: string,
      key: string,
    ): Promise<{ status: number; body: string; retryAfter?: string | null; close(): void }> {
      const abort = new AbortController();
      const res = await fetch(`${server.url}/api/task/${id}/events`, {
        headers: { authorization: `Bearer ${key}` },
        signal: abort.signal,
      });
      if (res.status !== 200)
        return {
          status: res.status,
          body: await res.text(),
          retryAfter: res.headers.get('retry-after'),
          close: () => {},
        };
      assert.ok(res.body);
      const events = parseSse(res.body)[Symbol.asyncIterator]();
      assert.equal((await events.next()).value?.event, 'task', 'the task came first');
      return { status: 200, body: '', close: () => abort.abort() };
    }

    it("past MEDIAPLANE_MAX_EVENT_STREAMS_PER_OWNER an owner's next stream is a 429 in the task API's shape", async () => {
      const id = await create(alice);
      const streams = [await open(id, alice), await open(await create(alice), alice)];
      assert.deepEqual(
        streams.map((s) => s.status),
        [200, 200],
      );
      const third = await open(id, alice);
      assert.equal(third.status, 429);
      assert.equal(third.retryAfter, '1', 'a 429 says when to try again (API.md)');
      assert.deepEqual(JSON.parse(third.body), {
        errors: [
          'too many open event streams: an owner may follow at most 2 tasks at once on one API process (GET /api/task/{id}/events); close one first',
        ],
      });
      const other = await open(await create(bob), bob);
      assert.equal(other.status, 200, "another owner's streams count apart");
      other.close();
      streams[0]?.close();
      await waitFor(async () => server.running.core.tasks.following === 1, 10_000, 'the closed stream to end');
      const again = await open(id, alice);
      assert.equal(again.status, 200, 'a closed stream frees its place');
      again.close();
      streams[1]?.close();
      await waitFor(async () => server.running.core.tasks.following === 0, 10_000, 'the streams to end');
    });
  });

  describe(`task event streams share one read per task (${kind} database)`, { skip }, () => {
    let db: Db;
    let tasks: TaskStore;
    let reads: ReturnType<typeof counting>;
    const N = 20;

    before(async () => {
      db = await openTestDb(kind);
      reads = counting(db);
      tasks = new TaskStore(reads.db);
      await new Accounts(db, { authCacheMs: 0 }).createKey('alice');
    });
    after(() => db.close());

    async function task(): Promise<string> {
      const [owner] = await db.query<{ project_id: string }>(`SELECT project_id FROM owners WHERE name = 'alice'`);
      assert.ok(owner);
      const row = await tasks.create({
        owner: 'alice',
        projectId: owner.project_id,
        type: 'transcode-file',
        params: {},
        requesterId: null,
        maxQueuedPerOwner: 1000,
      });
      return row.id;
    }
    /** N streams of one task, each past its first event; `seen` holds the rows each got since. */
    async function follow(id: string, pollMs: number) {
      const stop = new AbortController();
      const seen: TaskRow[][] = [];
      const streams = Array.from({ length: N }, () => tasks.follow('alice', id, { signal: stop.signal, pollMs }));
      for (const s of streams) assert.equal((await s.next()).done, false);
      const ended = Promise.all(
        streams.map(async (s, i) => {
          seen[i] = [];
          for await (const row of s) seen[i]?.push(row);
        }),
      );
      return { seen, stop: () => stop.abort(), ended };
    }

    it('a NOTIFY of a change is one read, not one per stream', async () => {
      const id = await task();
      const f = await follow(id, 600_000);
      reads.reset();
      await db.query(`UPDATE tasks SET progress = 0.5, updated_at = now() WHERE id = $1`, [id]);
      await db.notify('mediaplane_task_progress', id);
      await waitFor(async () => f.seen.every((rows) => rows.length === 1), 10_000, 'every stream to see the change');
      for (const rows of f.seen) assert.equal(rows[0]?.progress, 0.5);
      assert.equal(reads.reads(), 1, `${N} streams read the task ${reads.reads()} times`);
      await tasks.cancel('alice', id);
      await f.ended;
      assert.equal(tasks.following, 0);
    });

    it('a change whose NOTIFY was lost is found by one poll for all streams', async () => {
      const id = await task();
      const f = await follow(id, 200);
      reads.reset();
      await db.query(`UPDATE tasks SET progress = 0.25, updated_at = now() WHERE id = $1`, [id]);
      await waitFor(async () => f.seen.every((rows) => rows.length === 1), 10_000, 'every stream to see the change');
      // A poll or two may fall between the write and the last stream's turn; one per stream is N.
      assert.ok(reads.reads() <= 3, `${N} streams read the task ${reads.reads()} times`);
      f.stop();
      await f.ended;
      assert.equal(tasks.following, 0);
    });
  });
}
