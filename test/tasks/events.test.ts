// The outbox of task changes (issue #18): every statement that changes a task writes exactly
// its event (task_events) in the same statement, on both databases. The queue and the store
// are driven directly, as a worker and the API would; the rows are what a webhook
// dispatcher reads.

import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { toWireTask } from '../../src/api/contract/index.ts';
import {
  Queue,
  TASK_EVENTS_CHANNEL,
  taskOfEvent,
  type TaskEventRow,
  type TaskRow,
  type TaskStore,
} from '../../src/tasks/index.ts';
import { databaseKinds, startTestServer, transcodeBody, type TestServer } from '../helpers/server.ts';

const SECRET = 'sEcReT/do-not-leak+123';
const MAX_RETRIES = 1;

for (const { kind, skip } of await databaseKinds()) {
  describe(`task events, written with each change (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let key: string;
    let tasks: TaskStore;
    /** A queue whose progress events are far apart: the throttle is what is tested. */
    let queue: Queue;

    before(async () => {
      server = await startTestServer({ database: kind, roles: { api: true, worker: false } });
      key = await server.key('alice');
      tasks = server.running.core.tasks;
      queue = new Queue(server.running.core.db, {
        leaseMs: 60_000,
        maxRetries: MAX_RETRIES,
        maxCrashRetries: MAX_RETRIES,
        progressEventMs: 3_600_000,
      });
    });
    // A test's unfinished task must not be the next test's claim.
    afterEach(() =>
      server.running.core.db.query(`UPDATE tasks SET phase = 'cancelled' WHERE phase IN ('waiting', 'running')`),
    );
    after(() => server.stop());

    const create = async (): Promise<TaskRow> =>
      tasks.create({
        owner: 'alice',
        projectId: '00000000-0000-4000-8000-000000000000',
        type: 'transcode-file',
        params: transcodeBody({ input: { url: `https://videos.example.com/a.mp4?X-Amz-Signature=${SECRET}` } }),
        requesterId: null,
        maxQueuedPerOwner: 1000,
      });

    const events = (id: string) =>
      server.running.core.db.query<TaskEventRow>(
        'SELECT id, task_id, owner, event, task, created_at FROM task_events WHERE task_id = $1 ORDER BY created_at, id',
        [id],
      );
    /** Runs `step` and returns the events it wrote for task `id`, as [event, phase] pairs. */
    async function written(id: string, step: () => Promise<unknown>): Promise<Array<[string, string]>> {
      const before = (await events(id)).length;
      await step();
      return (await events(id)).slice(before).map((e) => [e.event, e.task.phase]);
    }
    async function claimed(id: string, worker = 'w1'): Promise<TaskRow> {
      const rows = await queue.claim(worker, 1);
      assert.deepEqual(
        rows.map((r) => r.id),
        [id],
        'the task under test is the one claimed',
      );
      return rows[0] as TaskRow;
    }
    const expireLease = (id: string) =>
      server.running.core.db.query(`UPDATE tasks SET lease_until = now() - interval '1 second' WHERE id = $1`, [id]);

    it('create writes task.spawned with the row as stored, its secrets left out', async () => {
      const row = await create();
      const [e, ...more] = await events(row.id);
      assert.ok(e);
      assert.equal(more.length, 0, 'exactly one event');
      assert.equal(e.event, 'task.spawned');
      assert.equal(e.owner, 'alice');
      assert.match(e.id, /^[0-9a-f-]{36}$/);
      assert.equal(e.task.id, row.id);
      assert.equal(e.task.phase, 'waiting');
      assert.deepEqual(Object.keys(e.task).sort(), Object.keys(row).sort(), "the task is TaskRow's columns");
      assert.ok(!JSON.stringify(e.task).includes(SECRET), 'no signature of the input URL');
      assert.ok(!JSON.stringify(e.task).includes('AKIATESTKEY'), 'no storage credential');
      // What a webhook shows of it is what GET /api/task/{id} shows.
      const got = await server.call('GET', `/api/task/${row.id}`, { key });
      assert.deepEqual(
        toWireTask(taskOfEvent(e), () => ''),
        got.body,
      );
    });

    it('a refused create (the queue limit) writes no event', async () => {
      const before = await server.running.core.db.query<{ n: number }>('SELECT count(*)::int AS n FROM task_events');
      await assert.rejects(
        tasks.create({
          owner: 'alice',
          projectId: '00000000-0000-4000-8000-000000000000',
          type: 'transcode-file',
          params: transcodeBody(),
          requesterId: null,
          maxQueuedPerOwner: 0,
        }),
        /too many queued tasks/,
      );
      const now = await server.running.core.db.query<{ n: number }>('SELECT count(*)::int AS n FROM task_events');
      assert.equal(now[0]?.n, before[0]?.n);
    });

    it('claim, throttled progress, heartbeat and complete write their events', async () => {
      const row = await create();
      assert.deepEqual(await written(row.id, () => claimed(row.id)), [['task.updated', 'running']]);
      assert.deepEqual(
        await written(row.id, () => queue.progress(row.id, 'w1', 0.25)),
        [['task.updated', 'running']],
        'the first progress of a run is an event',
      );
      assert.deepEqual(await written(row.id, () => queue.progress(row.id, 'w1', 0.5)), [], 'the next is throttled');
      assert.equal((await tasks.get('alice', row.id)).progress, 0.5, 'yet the progress is stored');
      assert.deepEqual(await written(row.id, () => queue.heartbeat(row.id, 'w1')), [], 'a heartbeat is no change');
      // The throttle's interval passed (set back in the row, rather than waited for).
      await server.running.core.db.query(
        `UPDATE tasks SET last_progress_event_at = now() - interval '2 hours' WHERE id = $1`,
        [row.id],
      );
      const progressed = await written(row.id, () => queue.progress(row.id, 'w1', 0.75));
      assert.deepEqual(progressed, [['task.updated', 'running']]);
      assert.equal((await events(row.id)).at(-1)?.task.progress, 0.75);
      assert.deepEqual(await written(row.id, () => queue.progress(row.id, 'w2', 0.8)), [], "another worker's write");
      assert.deepEqual(
        await written(row.id, () => queue.complete(row.id, 'w1', { input_video: { duration: 1, size: 2 } })),
        [['task.completed', 'completed']],
      );
      const done = (await events(row.id)).at(-1);
      assert.deepEqual(done?.task.output, { input_video: { duration: 1, size: 2 } });
      assert.equal(done?.task.progress, 1);
      assert.deepEqual(await written(row.id, () => queue.complete(row.id, 'w1', {})), [], 'no second completion');
      assert.deepEqual(
        (await events(row.id)).map((e) => e.event),
        ['task.spawned', 'task.updated', 'task.updated', 'task.updated', 'task.completed'],
      );
    });

    it('each run emits its first progress again; release is an update', async () => {
      const row = await create();
      await claimed(row.id);
      await queue.progress(row.id, 'w1', 0.3);
      assert.deepEqual(await written(row.id, () => queue.release(row.id, 'w1')), [['task.updated', 'waiting']]);
      await claimed(row.id, 'w2');
      assert.deepEqual(await written(row.id, () => queue.progress(row.id, 'w2', 0.1)), [['task.updated', 'running']]);
    });

    it('a failure back to waiting is an update; a final one is task.failed', async () => {
      const row = await create();
      await claimed(row.id);
      const retry = { message: 'the storage answered 503', retryable: true, backoffMs: 0 };
      assert.deepEqual(await written(row.id, () => queue.fail(row.id, 'w1', retry)), [['task.updated', 'waiting']]);
      await claimed(row.id);
      assert.deepEqual(await written(row.id, () => queue.fail(row.id, 'w1', retry)), [['task.failed', 'failed']]);
      const failed = (await events(row.id)).at(-1);
      assert.equal(failed?.task.error_message, 'the storage answered 503');
      assert.equal(failed?.task.retries, MAX_RETRIES);
    });

    it('a bad input fails at once: task.failed', async () => {
      const row = await create();
      await claimed(row.id);
      const bad = { message: 'the input is not a video', retryable: false, backoffMs: 0 };
      assert.deepEqual(await written(row.id, () => queue.fail(row.id, 'w1', bad)), [['task.failed', 'failed']]);
    });

    it('reaping an expired lease is an update, past the crash retry limit task.failed', async () => {
      const row = await create();
      await claimed(row.id);
      await expireLease(row.id);
      assert.deepEqual(await written(row.id, () => queue.reapExpired()), [['task.updated', 'waiting']]);
      await claimed(row.id);
      await expireLease(row.id);
      assert.deepEqual(await written(row.id, () => queue.reapExpired()), [['task.failed', 'failed']]);
      assert.match((await events(row.id)).at(-1)?.task.error_message ?? '', /stopped responding/);
    });

    it('cancel and retry are updates; a refused cancel writes nothing', async () => {
      const row = await create();
      assert.deepEqual(await written(row.id, () => tasks.cancel('alice', row.id)), [['task.updated', 'cancelled']]);
      assert.deepEqual(
        await written(row.id, () => assert.rejects(tasks.cancel('alice', row.id), /is cancelled/)),
        [],
        'cancelling a cancelled task',
      );
      assert.deepEqual(
        await written(row.id, () => assert.rejects(tasks.cancel('bob', row.id), /not found/)),
        [],
        "another owner's cancel",
      );
      assert.deepEqual(await written(row.id, () => tasks.retry('alice', row.id)), [['task.updated', 'waiting']]);
      await claimed(row.id);
      assert.deepEqual(await written(row.id, () => tasks.cancel('alice', row.id)), [['task.updated', 'cancelled']]);
    });

    it('the change and its event are one statement: when the event cannot be written, the task is unchanged', async () => {
      const row = await create();
      const db = server.running.core.db;
      await db.query('ALTER TABLE task_events ADD CONSTRAINT refuse_all CHECK (false) NOT VALID');
      try {
        await assert.rejects(tasks.cancel('alice', row.id), /refuse_all/);
      } finally {
        await db.query('ALTER TABLE task_events DROP CONSTRAINT refuse_all');
      }
      assert.equal((await tasks.get('alice', row.id)).phase, 'waiting');
      assert.deepEqual(
        (await events(row.id)).map((e) => e.event),
        ['task.spawned'],
      );
    });

    it('wakes listeners of the events channel with the task id', async () => {
      const heard: string[] = [];
      let wake = () => {};
      const stop = await server.running.core.db.listen(TASK_EVENTS_CHANNEL, (id) => {
        heard.push(id);
        wake();
      });
      try {
        const got = new Promise<void>((r) => (wake = r));
        const row = await create();
        await got;
        assert.ok(heard.includes(row.id));
      } finally {
        await stop();
      }
    });
  });
}
