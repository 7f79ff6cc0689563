// Pieces (issue #30): a task whose handler splits it runs as child jobs of the same queue,
// each with its own lease, retries and crash budget, and still looks like one task to its
// owner. A dummy handler splits "long" inputs into audio + chunks + stitch; what is asserted
// is what the owner and the workers see: order, the parent's phase, progress, output and
// error, the pieces view, cancels reaching running pieces, and no event from a piece.

import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { Task$inboundSchema } from 'livepeer/models/components/task.js';
import { createLogger } from '../../src/lib/log.ts';
import { UnsupportedMediaError, UpstreamUnavailableError } from '../../src/lib/errors.ts';
import { type JobContext, type JobHandler, type PieceSpec, Queue, Worker } from '../../src/tasks/index.ts';
import { piecesPrefix, removeEndedPieces } from '../../src/transcode/index.ts';
import { databaseKinds, startTestServer, transcodeBody, waitFor, type TestServer } from '../helpers/server.ts';
import { sleep } from '../helpers/sleep.ts';

const LONG = 'http://127.0.0.1:9/long.mp4';
const SECRET = 'sEcReT/do-not-leak+123';

/** What one test makes the dummy handlers do; reset before each test. */
interface Script {
  /** Labels (and plain task ids) in the order their runs started. */
  ran: string[];
  splits: number;
  chunks: number;
  /** Runs before a piece returns; may throw, wait, report progress. */
  piece?: ((label: string, ctx: JobContext) => Promise<void>) | undefined;
  stitchSaw?: { parentId: string | undefined; siblings: Awaited<ReturnType<NonNullable<JobContext['siblings']>>> };
}

/** The pieces of the dummy split; their params keep secrets where a task's are (model.ts PARAMS_WITHOUT_SECRETS). */
function pieceSpecs(chunks: number): PieceSpec[] {
  const storage = { type: 's3', credentials: { accessKeyId: 'AKIATESTKEY', secretAccessKey: SECRET } };
  return [
    { type: 'test-piece', params: { kind: 'audio', storage }, label: 'audio', weight: 1 },
    ...Array.from({ length: chunks }, (_, i) => ({
      type: 'test-piece',
      params: { kind: 'video', i, storage },
      label: `chunk ${i + 1} of ${chunks}`,
      weight: 2,
    })),
    { type: 'test-stitch', params: { storage }, label: 'stitch', weight: 1, last: true },
  ];
}

function handlers(s: Script): Record<string, JobHandler> {
  return {
    'transcode-file': async (params, ctx) => {
      const url = (params as { input: { url: string } }).input.url;
      if (!url.startsWith(LONG)) {
        s.ran.push(`plain ${ctx.taskId}`);
        return { input_video: { duration: 1, size: 1 } };
      }
      s.ran.push('split');
      s.splits++;
      ctx.progress(0.1);
      assert.ok(ctx.split, 'a task (not a piece) can split');
      assert.equal(ctx.parentId, undefined);
      return ctx.split(pieceSpecs(s.chunks));
    },
    'test-piece': async (params, ctx) => {
      const label =
        (params as { kind: string; i?: number }).kind === 'audio'
          ? 'audio'
          : `chunk ${((params as { i: number }).i ?? 0) + 1} of ${s.chunks}`;
      s.ran.push(label);
      assert.equal(ctx.split, undefined, 'a piece does not split');
      await s.piece?.(label, ctx);
      return { piece: label };
    },
    'test-stitch': async (_params, ctx) => {
      s.ran.push('stitch');
      s.stitchSaw = { parentId: ctx.parentId, siblings: (await ctx.siblings?.()) ?? [] };
      await s.piece?.('stitch', ctx);
      return { input_video: { duration: 180, size: 42 }, stitched: s.chunks };
    },
  };
}

for (const { kind, skip } of await databaseKinds()) {
  describe(`pieces of a split task (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let key: string;
    let script: Script;
    const workers: Worker[] = [];

    function startWorker(opts: { concurrency?: number; id?: string } = {}): Promise<void> {
      const w = new Worker({
        db: server.running.core.db,
        queue: server.running.core.queue,
        handlers: handlers(script),
        log: createLogger({ level: 'silent' }),
        scratchRoot: join(server.dataDir, 'scratch'),
        concurrency: opts.concurrency ?? 1,
        pollMs: 50,
        heartbeatMs: 200,
        retryBackoffMs: 20,
        progressEveryMs: 30,
        workerId: opts.id ?? `w${workers.length + 1}`,
      });
      workers.push(w);
      return w.start();
    }
    const create = async (url = LONG) => {
      const res = await server.call('POST', '/api/transcode', { key, body: transcodeBody({ input: { url } }) });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.id as string;
    };
    const get = async (id: string) => (await server.call('GET', `/api/task/${id}`, { key })).body;
    const phase = (id: string, want: string) =>
      waitFor(async () => ((await get(id)).status.phase === want ? get(id) : null), 15_000, `phase ${want}`);
    const pieceRows = (parent: string) =>
      server.running.core.db.query<{ id: string; phase: string; piece_label: string; params: string; crashes: number }>(
        'SELECT id::text AS id, phase, piece_label, params::text AS params, crashes FROM tasks WHERE parent_id = $1 ORDER BY created_at',
        [parent],
      );
    const eventsOf = (ids: readonly string[]) =>
      server.running.core.db.query<{ task_id: string; event: string; phase: string }>(
        `SELECT task_id::text AS task_id, event, task ->> 'phase' AS phase FROM task_events
         WHERE task_id = ANY($1::uuid[]) ORDER BY created_at, id`,
        [ids],
      );
    /** Resolves `n` gates in order: each piece that awaits `gate()` waits for its release. */
    function gates() {
      const waiting: Array<() => void> = [];
      return {
        gate: () => new Promise<void>((r) => waiting.push(r)),
        waiting: () => waiting.length,
        releaseAll: () => {
          for (const r of waiting.splice(0)) r();
        },
      };
    }

    before(async () => {
      server = await startTestServer({
        database: kind,
        roles: { api: true, worker: false },
        settings: { maxRetries: 1, maxCrashRetries: 1, leaseMs: 1000, maxQueuedPerOwner: 3 },
      });
      key = await server.key('alice');
    });
    afterEach(async () => {
      await Promise.all(workers.splice(0).map((w) => w.stop(500)));
      // A test's unfinished tasks must not be the next test's claims.
      await server.running.core.db.query(
        `UPDATE tasks SET phase = 'cancelled', lease_owner = NULL WHERE phase IN ('pending', 'waiting', 'running')`,
      );
    });
    after(() => server.stop());

    it('one worker slot runs the pieces in order, before later tasks; the parent completes with the stitch output', async () => {
      script = { ran: [], splits: 0, chunks: 3 };
      const g = gates();
      script.piece = async (label) => {
        if (label === 'audio') await g.gate();
      };
      const id = await create();
      await startWorker({ concurrency: 1 });
      await waitFor(async () => g.waiting() === 1, 10_000, 'the audio piece running');
      // The parent holds no slot and counts once against the owner's queued tasks (3 here);
      // its 5 pieces do not count.
      const later = await create('http://127.0.0.1:9/short.mp4');
      await create('http://127.0.0.1:9/short2.mp4');
      const refused = await server.call('POST', '/api/transcode', { key, body: transcodeBody() });
      assert.equal(refused.status, 429);
      // Pieces are no tasks to the owner: not listed, not readable, not cancellable.
      const listed = (await server.call('GET', '/api/task', { key })).body as Array<{ id: string }>;
      const pieces = await pieceRows(id);
      assert.equal(pieces.length, 5);
      assert.ok(!listed.some((t) => pieces.some((p) => p.id === t.id)), 'no piece listed');
      assert.equal((await server.call('GET', `/api/task/${pieces[0]?.id}`, { key })).status, 404);
      assert.equal((await server.call('POST', `/api/task/${pieces[0]?.id}/cancel`, { key })).status, 404);
      const running = await get(id);
      assert.equal(running.status.phase, 'running');
      assert.equal(running.pieces.total, 5);
      assert.equal(running.pieces.running, 1);
      assert.deepEqual(
        running.pieces.items.map((p: { label: string; phase: string }) => [p.label, p.phase]),
        [
          ['audio', 'running'],
          ['chunk 1 of 3', 'waiting'],
          ['chunk 2 of 3', 'waiting'],
          ['chunk 3 of 3', 'waiting'],
          ['stitch', 'pending'],
        ],
      );
      g.releaseAll();
      const done = await phase(id, 'completed');
      await phase(later, 'completed');
      assert.deepEqual(script.ran.slice(0, 6), [
        'split',
        'audio',
        'chunk 1 of 3',
        'chunk 2 of 3',
        'chunk 3 of 3',
        'stitch',
      ]);
      assert.equal(script.ran[6], `plain ${later}`, 'the tasks queued after the parent ran after its pieces');
      assert.deepEqual(done.output, { transcodeFile: { input_video: { duration: 180, size: 42 }, stitched: 3 } });
      assert.equal(done.status.progress, 1);
      assert.equal(done.status.retries, undefined);
      assert.deepEqual(
        {
          ...done.pieces,
          items: done.pieces.items.map((p: { runs: number; worker: string; progress: number }) => [
            p.runs,
            p.worker,
            p.progress,
          ]),
        },
        { total: 5, completed: 5, running: 0, failed: 0, items: Array(5).fill([1, 'w1', 1]) },
      );
      // The stitch saw its parent and every sibling's output.
      assert.equal(script.stitchSaw?.parentId, id);
      assert.deepEqual(
        script.stitchSaw?.siblings.map((s) => [s.label, s.phase, s.output]),
        [
          ['audio', 'completed', { piece: 'audio' }],
          ['chunk 1 of 3', 'completed', { piece: 'chunk 1 of 3' }],
          ['chunk 2 of 3', 'completed', { piece: 'chunk 2 of 3' }],
          ['chunk 3 of 3', 'completed', { piece: 'chunk 3 of 3' }],
          ['stitch', 'running', null],
        ],
      );
      // Secrets gone from the parent and every piece once they completed.
      const [parentRow] = await server.running.core.db.query<{ params: string }>(
        'SELECT params::text AS params FROM tasks WHERE id = $1',
        [id],
      );
      for (const row of [parentRow, ...(await pieceRows(id))])
        assert.ok(row && !row.params.includes(SECRET), row?.params);
      // The owner's events are the parent's; pieces wrote none.
      assert.deepEqual(await eventsOf(pieces.map((p) => p.id)), []);
      const own = (await eventsOf([id])).map((e) => e.event);
      assert.equal(own[0], 'task.spawned');
      assert.deepEqual(
        own.filter((e) => e !== 'task.updated'),
        ['task.spawned', 'task.completed'],
      );
    });

    it("the parent's progress is its split's plus the weighted sum of its pieces'", async () => {
      script = { ran: [], splits: 0, chunks: 2 };
      const g = gates();
      script.piece = async (label, ctx) => {
        if (label === 'stitch') return;
        ctx.progress(0.5);
        await g.gate();
      };
      const id = await create();
      await startWorker({ concurrency: 1 });
      // Weights: audio 1, chunks 2 + 2, stitch 1 (6); the split reported 0.1.
      const at = async (want: number, what: string) =>
        waitFor(
          async () => {
            const p = (await get(id)).status.progress;
            return typeof p === 'number' && Math.abs(p - want) < 1e-9 ? p : null;
          },
          10_000,
          what,
        );
      await at(0.1 + 0.9 * (0.5 / 6), 'audio half done');
      g.releaseAll();
      await at(0.1 + 0.9 * ((1 + 1) / 6), 'audio done, chunk 1 half done');
      g.releaseAll();
      await at(0.1 + 0.9 * ((1 + 2 + 1) / 6), 'chunk 2 half done');
      g.releaseAll();
      const done = await phase(id, 'completed');
      assert.equal(done.status.progress, 1);
    });

    it('a piece failing for good fails the parent naming it and cancels the others, running ones included', async () => {
      script = { ran: [], splits: 0, chunks: 2 };
      let aborted = false;
      script.piece = async (label, ctx) => {
        if (label === 'audio') {
          try {
            await sleep(30_000, ctx.signal);
          } catch (err) {
            aborted = true;
            throw err;
          }
        }
        if (label !== 'chunk 2 of 2') return;
        // Fails once chunk 1 is in: a completed piece stays completed.
        await waitFor(async () => (await ctx.siblings?.())?.[1]?.phase === 'completed', 5_000, 'chunk 1 done');
        throw new UnsupportedMediaError('undecodable frame at 41.2 s');
      };
      const id = await create();
      await startWorker({ concurrency: 3 });
      const failed = await phase(id, 'failed');
      assert.equal(failed.status.errorMessage, 'piece chunk 2 of 2 failed: undecodable frame at 41.2 s');
      await waitFor(async () => aborted, 5_000, 'the running audio piece aborted');
      const rows = await pieceRows(id);
      assert.deepEqual(
        rows.map((r) => [r.piece_label, r.phase]),
        [
          ['audio', 'cancelled'],
          ['chunk 1 of 2', 'completed'],
          ['chunk 2 of 2', 'failed'],
          ['stitch', 'cancelled'],
        ],
      );
      assert.ok(!script.ran.includes('stitch'));
      assert.deepEqual(
        (await eventsOf([id])).map((e) => e.event).filter((e) => e !== 'task.updated'),
        ['task.spawned', 'task.failed'],
      );
      assert.equal((await get(id)).pieces.failed, 1);

      // Its pieces' files (the chunks' MP4 parts) go with the retention sweep's job.
      const { tasks, builtinStore } = server.running.core;
      const part = join(server.dataDir, 'part.mp4');
      await writeFile(part, 'a chunk part');
      await builtinStore.putFile(`${piecesPrefix(id)}0/360p0.mp4`, part, {
        contentType: 'video/mp4',
        signal: AbortSignal.timeout(5000),
      });
      const sweep = () => removeEndedPieces({ tasks, store: builtinStore }, { limit: 10, olderThanMs: 0 });
      assert.equal(await sweep(), 1);
      assert.equal(await builtinStore.stat(`${piecesPrefix(id)}0/360p0.mp4`), undefined, 'the pieces are gone');
      assert.equal(await sweep(), 0, 'once');
      assert.equal((await get(id)).status.phase, 'failed');
    });

    it('a retryable piece failure retries that piece alone; then retrying a failed parent splits it again', async () => {
      script = { ran: [], splits: 0, chunks: 2 };
      let chunk1Runs = 0;
      script.piece = async (label) => {
        if (label === 'chunk 1 of 2') {
          chunk1Runs++;
          throw new UpstreamUnavailableError('storage answered 503');
        }
      };
      const id = await create();
      await startWorker({ concurrency: 2 });
      // maxRetries 1: two runs of chunk 1, then the parent fails.
      const failed = await phase(id, 'failed');
      assert.equal(failed.status.errorMessage, 'piece chunk 1 of 2 failed: storage answered 503');
      assert.equal(chunk1Runs, 2);
      assert.deepEqual(
        failed.pieces.items.map((p: { label: string; runs: number }) => [p.label, p.runs]),
        [
          ['audio', 1],
          ['chunk 1 of 2', 2],
          ['chunk 2 of 2', 1],
          ['stitch', 0],
        ],
      );
      const oldPieces = (await pieceRows(id)).map((r) => r.id);
      script.piece = undefined;
      const retried = await server.call('POST', `/api/task/${id}/retry`, { key });
      assert.equal(retried.body.status.phase, 'waiting');
      const done = await phase(id, 'completed');
      assert.equal(script.splits, 2, 'the split ran again');
      const newPieces = (await pieceRows(id)).map((r) => r.id);
      assert.equal(newPieces.length, 4, 'the old pieces are gone');
      assert.ok(!newPieces.some((p) => oldPieces.includes(p)));
      assert.deepEqual(
        done.pieces.items.map((p: { runs: number }) => p.runs),
        [1, 1, 1, 1],
      );
    });

    it('cancelling the parent cancels every piece; running ones are stopped', async () => {
      script = { ran: [], splits: 0, chunks: 3 };
      let aborted = 0;
      script.piece = async (_label, ctx) => {
        try {
          await sleep(30_000, ctx.signal);
        } catch (err) {
          aborted++;
          throw err;
        }
      };
      const id = await create();
      await startWorker({ concurrency: 2 });
      await waitFor(async () => (await get(id)).pieces?.running === 2, 10_000, 'two pieces running');
      const cancelled = await server.call('POST', `/api/task/${id}/cancel`, { key });
      assert.equal(cancelled.body.status.phase, 'cancelled');
      await waitFor(async () => aborted === 2, 5_000, 'both running pieces aborted');
      assert.deepEqual(
        (await pieceRows(id)).map((r) => r.phase),
        ['cancelled', 'cancelled', 'cancelled', 'cancelled', 'cancelled'],
      );
      // Nothing more runs: the workers go idle.
      await sleep(300);
      assert.deepEqual(script.ran, ['split', 'audio', 'chunk 1 of 3']);
      assert.equal((await get(id)).status.phase, 'cancelled');
    });

    it("a crashed piece's worker costs that piece one crash and one more run, nothing else", async () => {
      script = { ran: [], splits: 0, chunks: 2 };
      const g = gates();
      script.piece = async (label) => {
        if (label === 'audio') await g.gate();
      };
      const id = await create();
      await startWorker({ concurrency: 1 });
      await waitFor(async () => g.waiting() === 1, 10_000, 'the audio piece running');
      // A worker that claims the next piece and dies (it never heartbeats).
      const [ghost] = await server.running.core.queue.claim('ghost', 1);
      assert.equal(ghost?.parent_id, id);
      await sleep(1200); // the ghost's lease (1 s) runs out
      g.releaseAll();
      const done = await phase(id, 'completed');
      assert.equal(done.status.retries, undefined, "the parent's budgets are untouched");
      assert.deepEqual(
        done.pieces.items.map((p: { label: string; runs: number; worker: string }) => [p.label, p.runs, p.worker]),
        [
          ['audio', 1, 'w1'],
          ['chunk 1 of 2', 2, 'w1'],
          ['chunk 2 of 2', 1, 'w1'],
          ['stitch', 1, 'w1'],
        ],
      );
      assert.deepEqual(
        (await pieceRows(id)).map((r) => r.crashes),
        [0, 1, 0, 0],
      );
    });

    it("a piece past its crash budget fails the parent (the reaper's path), and no piece writes an event", async () => {
      // Driven through the queue alone, as workers that die would: no Worker runs.
      const queue = new Queue(server.running.core.db, { leaseMs: 100, maxRetries: 1, maxCrashRetries: 1 });
      const id = await create();
      const [parent] = await queue.claim('splitter', 1);
      assert.equal(parent?.id, id);
      assert.equal(
        await queue.split(id, 'someone-else', { pieces: pieceSpecs(1), progress: 0 }),
        false,
        'fenced by the lease',
      );
      assert.equal(await queue.split(id, 'splitter', { pieces: pieceSpecs(1), progress: 0.2 }), true);
      assert.equal(await queue.split(id, 'splitter', { pieces: pieceSpecs(1), progress: 0.2 }), false, 'once');
      assert.equal(await queue.heartbeat(id, 'splitter'), false, 'the parent holds no lease');
      for (let crash = 0; crash < 2; crash++) {
        const [piece] = await queue.claim('doomed', 1);
        assert.equal(piece?.parent_id, id);
        await sleep(150);
        await queue.reapExpired();
      }
      const failed = await get(id);
      assert.equal(failed.status.phase, 'failed');
      assert.equal(
        failed.status.errorMessage,
        'piece audio failed: the worker running this task stopped responding 2 times; it is not retried again',
      );
      const pieces = (await pieceRows(id)).map((r) => r.id);
      assert.deepEqual(await eventsOf(pieces), []);
      assert.deepEqual(
        (await eventsOf([id])).map((e) => [e.event, e.phase]).filter(([e]) => e !== 'task.updated'),
        [
          ['task.spawned', 'waiting'],
          ['task.failed', 'failed'],
        ],
      );
    });

    it('a piece marks its parent playable once: playableAt while running, kept at the end, cleared by a retry', async () => {
      script = { ran: [], splits: 0, chunks: 2 };
      const g = gates();
      let fail = true;
      script.piece = async (label, ctx) => {
        if (label === 'chunk 1 of 2') {
          await ctx.playable?.();
          await sleep(20);
          await ctx.playable?.();
        }
        if (label === 'chunk 2 of 2') await g.gate();
        if (label === 'stitch' && fail) throw new UnsupportedMediaError('the stitch failed');
      };
      const id = await create();
      await startWorker({ concurrency: 1 });
      await waitFor(async () => g.waiting() === 1, 10_000, 'the last chunk running');
      const running = await get(id);
      assert.equal(running.status.phase, 'running');
      assert.equal(typeof running.playableAt, 'number', JSON.stringify(running));
      assert.ok(Math.abs(running.playableAt - Date.now()) < 60_000, 'a time in ms');
      assert.doesNotThrow(() => Task$inboundSchema.parse(running), "the SDK's Task parses it");
      g.releaseAll();
      const failed = await phase(id, 'failed');
      assert.equal(failed.playableAt, running.playableAt, 'the first mark is kept');
      fail = false;
      script.piece = async () => {};
      assert.equal((await server.call('POST', `/api/task/${id}/retry`, { key })).status, 200);
      const again = await get(id);
      assert.equal(again.playableAt, undefined, 'a retry splits again: not playable until its pieces say so');
      const done = await phase(id, 'completed');
      assert.equal(done.playableAt, undefined, 'no piece marked it this time');
    });

    it('refuses a split whose pieces would keep a secret past their end, and one without a single last piece', async () => {
      const queue = new Queue(server.running.core.db, { leaseMs: 10_000, maxRetries: 0 });
      const id = await create();
      await queue.claim('splitter', 1);
      const deep = pieceSpecs(1).map((p) =>
        p.last ? p : { ...p, params: { source: { input: { url: 'https://in.example/a.mp4?X-Amz-Signature=x' } } } },
      );
      await assert.rejects(queue.split(id, 'splitter', { pieces: deep, progress: 0 }), {
        message:
          'piece audio: a secret at params.source.input.url would outlive the piece; keep credentials and signed URLs one level down (params.<member>.credentials, params.<member>.url)',
      });
      const noLast = pieceSpecs(1).map((p) => ({ ...p, last: false }));
      await assert.rejects(queue.split(id, 'splitter', { pieces: noLast, progress: 0 }), /exactly one last piece/);
      assert.deepEqual(await pieceRows(id), [], 'nothing split');
    });
  });
}
