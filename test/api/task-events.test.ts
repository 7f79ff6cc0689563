// GET /api/task/{id}/events (issue #18): the task now, then each change of phase or progress
// as Server-Sent Events, ending when the task ends. The task is driven through the queue
// as a worker would drive it; each step waits for its event, so nothing here is timed.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
import { taskEventsRoute } from '../../src/api/task-events-route.ts';
import { parseSse, type SseEvent } from '../../src/lib/sse.ts';
import { databaseKinds, startTestServer, transcodeBody, waitFor, type TestServer } from '../helpers/server.ts';

interface WireTask {
  id: string;
  status: { phase: string; progress?: number; updatedAt: number; errorMessage?: string };
  output?: Record<string, unknown>;
}

/** An open event stream: its response, and its events one at a time. */
interface Stream {
  res: Response;
  next(): Promise<SseEvent | undefined>;
  abort(): void;
}

for (const { kind, skip } of await databaseKinds()) {
  describe(`task event stream (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let alice: string;
    let bob: string;

    before(async () => {
      server = await startTestServer({ database: kind, roles: { api: true, worker: false } });
      alice = await server.key('alice');
      bob = await server.key('bob');
    });
    after(() => server.stop());

    async function open(id: string, key = alice): Promise<Stream> {
      const abort = new AbortController();
      const res = await fetch(`${server.url}/api/task/${id}/events`, {
        headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
        signal: abort.signal,
      });
      assert.equal(res.status, 200, await (res.ok ? '' : res.clone().text()));
      assert.ok(res.body);
      const events = parseSse(res.body)[Symbol.asyncIterator]();
      return {
        res,
        next: async () => (await events.next()).value ?? undefined,
        abort: () => abort.abort(),
      };
    }
    async function nextTask(s: Stream): Promise<WireTask> {
      const ev = await s.next();
      assert.ok(ev, 'an event came before the stream ended');
      assert.equal(ev.event, 'task');
      return JSON.parse(ev.data) as WireTask;
    }
    const create = async (): Promise<string> => {
      const res = await server.call('POST', '/api/transcode', { key: alice, body: transcodeBody() });
      assert.equal(res.status, 200);
      return res.body.id as string;
    };
    async function claim(id: string): Promise<void> {
      const rows = await server.running.core.queue.claim('w1', 1);
      assert.deepEqual(
        rows.map((r) => r.id),
        [id],
      );
    }

    it('sends the task now, then each change, and ends after completion', async () => {
      const id = await create();
      const s = await open(id);
      assert.match(s.res.headers.get('content-type') ?? '', /^text\/event-stream/);
      const now = await nextTask(s);
      assert.deepEqual(
        now,
        (await server.call('GET', `/api/task/${id}`, { key: alice })).body,
        'the Task as GET shows it',
      );
      assert.equal(now.status.phase, 'waiting');

      await claim(id);
      assert.equal((await nextTask(s)).status.phase, 'running');
      const { queue } = server.running.core;
      await queue.progress(id, 'w1', 0.25);
      assert.equal((await nextTask(s)).status.progress, 0.25);
      // Throttled as a webhook event, yet shown on the stream at once.
      await queue.progress(id, 'w1', 0.5);
      assert.equal((await nextTask(s)).status.progress, 0.5);
      await queue.complete(id, 'w1', { input_video: { duration: 1, size: 2 } });
      const done = await nextTask(s);
      assert.equal(done.status.phase, 'completed');
      assert.deepEqual(done, (await server.call('GET', `/api/task/${id}`, { key: alice })).body);
      assert.equal(await s.next(), undefined, 'the stream ends with the task');
      await waitFor(async () => server.running.core.tasks.following === 0, 5000, 'the stream to stop following');
    });

    it('ends with a failed task, showing its error', async () => {
      const id = await create();
      const s = await open(id);
      await nextTask(s);
      await claim(id);
      assert.equal((await nextTask(s)).status.phase, 'running');
      await server.running.core.queue.fail(id, 'w1', { message: 'not a video', retryable: false, backoffMs: 0 });
      const failed = await nextTask(s);
      assert.equal(failed.status.phase, 'failed');
      assert.equal(failed.status.errorMessage, 'not a video');
      assert.equal(await s.next(), undefined);
    });

    it('ends after a cancel through the API', async () => {
      const id = await create();
      const s = await open(id);
      await nextTask(s);
      assert.equal((await server.call('POST', `/api/task/${id}/cancel`, { key: alice })).status, 200);
      assert.equal((await nextTask(s)).status.phase, 'cancelled');
      assert.equal(await s.next(), undefined);
    });

    it('a task that already ended is sent once, and the stream ends', async () => {
      const id = await create();
      await server.call('POST', `/api/task/${id}/cancel`, { key: alice });
      const s = await open(id);
      assert.equal((await nextTask(s)).status.phase, 'cancelled');
      assert.equal(await s.next(), undefined);
    });

    it('sees a change whose NOTIFY was lost (it re-reads every few seconds)', async () => {
      const id = await create();
      const s = await open(id);
      await nextTask(s);
      await server.running.core.db.query(`UPDATE tasks SET progress = 0.125, updated_at = now() WHERE id = $1`, [id]);
      assert.equal((await nextTask(s)).status.progress, 0.125);
      s.abort();
    });

    it("answers 404 in the task API's shape for another owner's task and an unknown id, 401 without a key", async () => {
      const id = await create();
      for (const [path, key] of [
        [`/api/task/${id}/events`, bob],
        ['/api/task/00000000-0000-4000-8000-000000000000/events', alice],
        ['/api/task/not-a-uuid/events', alice],
      ] as const) {
        const res = await server.call('GET', path, { key });
        assert.equal(res.status, 404, path);
        assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
        assert.deepEqual(res.body, { errors: ['not found'] });
      }
      const anon = await server.call('GET', `/api/task/${id}/events`);
      assert.equal(anon.status, 401);
      assert.ok(Array.isArray(anon.body.errors));
      assert.equal(server.running.core.tasks.following, 0, 'a refused stream follows nothing');
    });

    it('stops following when the client goes away', async () => {
      const id = await create();
      const streams = [await open(id), await open(id)];
      for (const s of streams) await nextTask(s);
      assert.equal(server.running.core.tasks.following, 2);
      for (const s of streams) s.abort();
      await waitFor(async () => server.running.core.tasks.following === 0, 10_000, 'the streams to stop following');
    });

    it('is in the OpenAPI document as a text/event-stream answer', async () => {
      const doc = (await server.call('GET', '/api/openapi.json')).body;
      const op = doc.paths['/api/task/{id}/events']?.get;
      assert.ok(op, 'GET /api/task/{id}/events is listed');
      assert.ok(op.responses['200'].content['text/event-stream'], 'its 200 is an event stream');
      assert.match(op.responses['200'].description, /event-stream/);
      assert.deepEqual(Object.keys(op.responses['404'].content['application/json'].schema.properties), ['errors']);
    });

    it('sends a keep-alive comment while the task is quiet', async () => {
      // The route on an app of its own, with a short interval (15 s on the API).
      const app = Fastify();
      const auth = { hook: async () => {}, of: () => ({ owner: 'alice' }) };
      await taskEventsRoute(app, { tasks: server.running.core.tasks, auth, keepAliveMs: 10, publicBase: () => '' });
      const url = await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        const id = await create();
        const res = await fetch(`${url}/task/${id}/events`);
        assert.ok(res.body);
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let text = '';
        while (!text.includes(': keep-alive\n\n')) {
          const { value, done } = await reader.read();
          if (done) break;
          text += decoder.decode(value, { stream: true });
        }
        assert.match(text, /^event: task\ndata: \{.*\}\n\n(: keep-alive\n\n)+/);
        await reader.cancel();
      } finally {
        await app.close();
      }
    });

    it('an open stream ends when the server stops', async () => {
      const id = await create();
      const s = await open(id);
      await nextTask(s);
      await server.stop();
      assert.equal(await s.next(), undefined);
    });
  });
}
