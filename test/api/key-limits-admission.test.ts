// One admission point for a key's task limits: every route and action that makes a task that
// encodes (a transcode, an upload from a URL, a direct upload's request, a clip, the retry of any
// of them) is refused 429 with Retry-After, naming the limit, once the key's concurrent
// transcodes are taken or its budget is spent. An export encodes nothing: it is one request of
// its key, whatever its slot or its budget. No worker runs: a queued task holds its slot.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LimitSettings } from '../../src/accounts/index.ts';
import { installRateClock, installRateClockOn, type TestRateClock } from '../helpers/rate-window.ts';
import { databaseFor, databaseKinds, startTestServer, type TestServer, transcodeBody } from '../helpers/server.ts';

const WINDOW_MS = 20_000;
const REFUSED = { transcode: 429, 'upload/url': 429, 'request-upload': 429, clip: 429, retry: 429 };

type Answer = Awaited<ReturnType<TestServer['call']>>;

/** Each request sent in turn, its answer under its name. */
async function answersOf(sends: Record<string, () => Promise<Answer>>): Promise<Record<string, Answer>> {
  const answers: Record<string, Answer> = {};
  for (const [name, send] of Object.entries(sends)) answers[name] = await send();
  return answers;
}
const statusesOf = (answers: Record<string, Answer>) =>
  Object.fromEntries(Object.entries(answers).map(([name, a]) => [name, a.status]));

/** What a finished upload task leaves on its asset: a 10 s video (the clip route reads its duration). */
const OUTPUT = {
  type: 'video',
  videoSpec: {
    format: 'mp4',
    duration: 10,
    tracks: [{ type: 'video', codec: 'h264', width: 320, height: 240, fps: 25 }],
  },
  size: 1000,
  hash: [{ hash: '00', algorithm: 'sha256' }],
  source: { key: 'asset/x/source' },
};

for (const { kind, skip } of await databaseKinds()) {
  describe(`a key's task limits, admitted in one place (${kind})`, { skip }, () => {
    let server: TestServer;
    let clock: TestRateClock;
    before(async () => {
      // PostgreSQL's clock is installed before the server connects; the embedded one in its session.
      const databaseUrl = await databaseFor(kind);
      const onServer = databaseUrl ? await installRateClock(databaseUrl) : undefined;
      server = await startTestServer({
        databaseUrl,
        roles: { api: true, worker: false },
        settings: { rateWindowMs: WINDOW_MS, authCacheMs: 0 },
      });
      clock = onServer ?? (await installRateClockOn(server.running.core.db));
    });
    after(async () => {
      await server?.stop();
      await clock?.close();
    });

    const call = (key: string, method: string, path: string, body?: unknown) =>
      server.call(method, path, { key, ...(body === undefined ? {} : { body }) });
    const sql = (text: string, params: unknown[]) => server.running.core.db.query(text, params);

    /** A key of `owner` with `settings`, a ready asset of its own and a failed transcode of its own. */
    async function keyWithWork(owner: string, settings: LimitSettings) {
      const made = await server.running.core.accounts.createKey(owner, settings);
      const uploaded = await call(made.key, 'POST', '/api/asset/upload/url', {
        name: 'source',
        url: 'http://127.0.0.1:9/source.mp4',
      });
      assert.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
      // As a worker would finish it: the trigger makes the asset ready with the task's output.
      await sql(`UPDATE tasks SET phase = 'completed', output = $2 WHERE id = $1`, [
        uploaded.body.task.id,
        JSON.stringify(OUTPUT),
      ]);
      const failed = await call(made.key, 'POST', '/api/transcode', transcodeBody());
      assert.equal(failed.status, 200, JSON.stringify(failed.body));
      await sql(`UPDATE tasks SET phase = 'failed', error_message = 'input unreadable' WHERE id = $1`, [
        failed.body.id,
      ]);
      return { ...made, asset: uploaded.body.asset, failedTask: failed.body.id as string };
    }

    /** Every way a key makes a task that encodes, each answered. */
    const encodingRequests = (k: Awaited<ReturnType<typeof keyWithWork>>) => ({
      transcode: () => call(k.key, 'POST', '/api/transcode', transcodeBody()),
      'upload/url': () =>
        call(k.key, 'POST', '/api/asset/upload/url', { name: 'again', url: 'http://127.0.0.1:9/again.mp4' }),
      'request-upload': () => call(k.key, 'POST', '/api/asset/request-upload', { name: 'direct' }),
      clip: () => call(k.key, 'POST', '/api/clip', { playbackId: k.asset.playbackId, startTime: 0, endTime: 2000 }),
      retry: () => call(k.key, 'POST', `/api/task/${k.failedTask}/retry`),
    });
    const exportOf = (k: Awaited<ReturnType<typeof keyWithWork>>) =>
      call(k.key, 'POST', `/api/asset/${k.asset.id}/export`, { custom: { url: 'http://127.0.0.1:9/put' } });
    /** The key's requests window as the database holds it (one row, reset when a new window starts). */
    const requestsWindow = async (keyId: string) => {
      const [row] = await server.running.core.db.query<{ start: string; used: string }>(
        `SELECT window_start::text AS start, used::text FROM key_windows WHERE key_id = $1 AND kind = 'requests'`,
        [keyId],
      );
      return { start: Number(row?.start ?? 0), used: Number(row?.used ?? 0) };
    };
    /** Whether exactly one request was counted between two readings: one more in the same window, or the first of a new one. */
    const countedOnce = (before: { start: number; used: number }, after: { start: number; used: number }) =>
      after.start === before.start ? after.used === before.used + 1 : after.used === 1;
    const encodingLive = async (keyId: string) =>
      (
        await server.running.core.db.query(
          `SELECT 1 FROM tasks WHERE key_id = $1 AND phase IN ('pending', 'waiting', 'running') AND type <> 'export'`,
          [keyId],
        )
      ).length;

    it('refuses every route that encodes while the key holds its one concurrent transcode; an export goes through as a request', async () => {
      const k = await keyWithWork('ann', { concurrentTranscodes: 1, requestsPerMinute: 1000 });
      const held = await call(k.key, 'POST', '/api/transcode', transcodeBody());
      assert.equal(held.status, 200, 'the slot is free: the upload completed and the other transcode failed');
      const answers = await answersOf(encodingRequests(k));
      assert.deepEqual(statusesOf(answers), REFUSED);
      for (const [route, no] of Object.entries(answers)) {
        assert.deepEqual(
          no.body,
          {
            errors: [
              'too many concurrent transcodes: this key may have at most 1 waiting or running (its transcode-file, upload and clip tasks together)',
            ],
          },
          route,
        );
        assert.equal(no.headers.get('retry-after'), '10', route);
      }
      assert.equal(await encodingLive(k.id), 1, 'nothing but the held transcode is live');
      const assets = await call(k.key, 'GET', '/api/asset');
      assert.equal(assets.body.length, 1, 'no asset was made by a refused upload or clip');
      // An export encodes nothing: it takes no slot, and counts once in the key's requests window.
      const before = await requestsWindow(k.id);
      const exported = await exportOf(k);
      assert.equal(exported.status, 200, JSON.stringify(exported.body));
      assert.ok(countedOnce(before, await requestsWindow(k.id)), 'the export counted as one request');
      // The held transcode cancelled: the failed one's retry takes the slot, and holds it.
      assert.equal((await call(k.key, 'POST', `/api/task/${held.body.id}/cancel`)).status, 200);
      const retried = await call(k.key, 'POST', `/api/task/${k.failedTask}/retry`);
      assert.equal(retried.status, 200, JSON.stringify(retried.body));
      assert.equal(retried.body.status.phase, 'waiting');
      assert.equal((await call(k.key, 'POST', '/api/transcode', transcodeBody())).status, 429);
    });

    it('counts a task requeued by another key of the owner against that key', async () => {
      const k = await keyWithWork('bea', {});
      const limited = await server.running.core.accounts.createKey('bea', { concurrentTranscodes: 1 });
      const held = await call(limited.key, 'POST', '/api/transcode', transcodeBody());
      assert.equal(held.status, 200);
      // The other key's failed task is no way past this key's slot.
      const no = await call(limited.key, 'POST', `/api/task/${k.failedTask}/retry`);
      assert.equal(no.status, 429, JSON.stringify(no.body));
      assert.equal((await call(limited.key, 'POST', `/api/task/${held.body.id}/cancel`)).status, 200);
      assert.equal((await call(limited.key, 'POST', `/api/task/${k.failedTask}/retry`)).status, 200);
      assert.equal(await encodingLive(limited.id), 1, 'the requeued task is the limited key’s now');
      assert.equal((await call(limited.key, 'POST', '/api/transcode', transcodeBody())).status, 429);
    });

    it('refuses every route that encodes once the key’s budget is spent, naming it; an export goes through', async () => {
      const k = await keyWithWork('cid', { budgetUsd: '0.01', budgetPeriod: 'day', requestsPerMinute: 1000 });
      // Spent, as LLM charges leave it.
      await sql(
        `INSERT INTO key_spend (key_id, period_start, spent_usd) VALUES ($1, (now() AT TIME ZONE 'UTC')::date, 0.01)`,
        [k.id],
      );
      const answers = await answersOf(encodingRequests(k));
      assert.deepEqual(statusesOf(answers), REFUSED);
      for (const [route, no] of Object.entries(answers)) {
        assert.match(no.body.errors[0], /^budget exceeded: this key's budget of 0.01 USD per day is used up/, route);
        const retryAfter = Number(no.headers.get('retry-after'));
        assert.ok(retryAfter >= 1 && retryAfter <= 86_400, `${route}: until the day ends: ${retryAfter}`);
      }
      assert.equal(await encodingLive(k.id), 0);
      const before = await requestsWindow(k.id);
      const exported = await exportOf(k);
      assert.equal(exported.status, 200, JSON.stringify(exported.body));
      assert.ok(countedOnce(before, await requestsWindow(k.id)), 'the export counted as one request');
    });

    it('refuses the deferred request of a transcode past the key’s requests window, in the same shape', async () => {
      await clock.freshWindow(WINDOW_MS, 8000);
      const k = await keyWithWork('dee', { requestsPerMinute: 4 });
      // keyWithWork made 2 requests in this window; two more fit, the next is past it.
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await call(k.key, 'POST', '/api/transcode', transcodeBody()));
      assert.deepEqual(
        answers.map((a) => a.status),
        [200, 200, 429],
      );
      const no = answers[2];
      assert.match(no?.body.errors[0], /^rate limit reached: this key may make 4 requests per 20 s/);
      const retryAfter = Number(no?.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= WINDOW_MS / 1000, `retry-after ${retryAfter}`);
      // Until the window that refused it ends, by the database's clock (the refusal's statement's).
      const [left] = (await sql(
        `SELECT (window_start + $2::bigint - extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms
         FROM key_windows WHERE key_id = $1::uuid AND kind = 'requests'`,
        [k.id, WINDOW_MS],
      )) as { ms: number }[];
      assert.ok(
        left && Math.abs(retryAfter - left.ms / 1000) <= 2,
        `retry-after ${retryAfter}, window ends in ${left?.ms} ms`,
      );
    });
  });
}
