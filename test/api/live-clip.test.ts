// POST /api/clip with a live stream's playbackId (spec/API.md section D): `startTime`/`endTime`
// in Unix milliseconds within the last MEDIAPLANE_LIVE_CLIP_SECS make an asset through a
// `clip` task that reads the session's archive; 422s naming the field and the rule; a stream
// never live is a 422; another owner's stream a 404. GET /api/stream/{id}/clips and GET
// /api/session/{id}/clips list the clips.
//
// The end to end part (embedded database only: the PostgreSQL run checks the routes without
// media) publishes 10 s of a frame-numbered 320x240 source over RTMP and clips seconds 3-6 of
// it by the wall clock: the clip lasts 3 s and starts at the frame sent then, made although
// the caller's key has no concurrent transcode left (the system makes it for the owner).

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { readFrameNumbers } from '../helpers/frame-numbers.ts';
import { publishTestSource, type TestPublish } from '../helpers/live.ts';
import { freePort } from '../helpers/ports.ts';
import { databaseKinds, startTestServer, type TestServer, waitFor } from '../helpers/server.ts';
import { SMALL_RUNG } from '../live/live-e2e.ts';

/** The database whose run also publishes and clips. */
const PUBLISHES_ON = 'embedded';
const CLIP_SECS = 60;
const FPS = 30;

interface Asset {
  id: string;
  name: string;
  source: { type: string; sourceId?: string; playbackId?: string; sessionId?: string };
  status: { phase: string; errorMessage?: string };
  videoSpec?: { duration?: number };
  downloadUrl?: string;
}

/** The frame number drawn into the first frame of the file at `url`. */
async function firstFrameNumber(url: string, dir: string): Promise<number | undefined> {
  const file = path.join(dir, 'clip.mp4');
  const res = await fetch(url);
  assert.equal(res.status, 200);
  await writeFile(file, Buffer.from(await res.arrayBuffer()));
  return (await readFrameNumbers(file, { frames: 1 }))[0];
}

for (const { kind, skip } of await databaseKinds()) {
  describe(`clips of a live stream (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let alice = '';
    let bob = '';
    let rtmpPort = 0;
    let stream: { id: string; streamKey: string; playbackId: string };

    const clip = (body: Record<string, unknown>, key = alice) => server.call('POST', '/api/clip', { key, body });
    const errorsOf = (res: { body: unknown }) => (res.body as { errors: string[] }).errors;

    before(async () => {
      rtmpPort = kind === PUBLISHES_ON ? await freePort() : 0;
      server = await startTestServer({
        database: kind,
        settings: { rtmpPort, srtPort: 0, liveClipSecs: CLIP_SECS },
        roles: { api: true, worker: true, ingest: kind === PUBLISHES_ON },
      });
      // One concurrent transcode for alice's key: a live clip is the system's, never refused by it.
      alice = (await server.running.core.accounts.createKey('alice', { concurrentTranscodes: 1 })).key;
      bob = await server.key('bob');
      const made = await server.call('POST', '/api/stream', {
        key: alice,
        body: { name: 'match', profiles: [SMALL_RUNG] },
      });
      assert.equal(made.status, 201);
      stream = made.body as typeof stream;
    });
    after(() => server.stop());

    it('a stream never live: 422 naming playbackId; no asset is made', async () => {
      const now = Date.now();
      const res = await clip({ playbackId: stream.playbackId, startTime: now - 5000, endTime: now - 2000 });
      assert.equal(res.status, 422);
      assert.deepEqual(errorsOf(res), ['playbackId: the stream has never been live, so nothing of it can be clipped']);
      const assets = await server.call('GET', '/api/asset', { key: alice });
      assert.deepEqual(assets.body, []);
    });

    it('a range outside the clip window, backwards or too long: 422 naming the field and the rule', async () => {
      const now = Date.now();
      const cases: [Record<string, number>, RegExp][] = [
        [
          { startTime: now - (CLIP_SECS + 5) * 1000, endTime: now - CLIP_SECS * 1000 },
          /^startTime: must be within the last 60 s/,
        ],
        [{ startTime: now - 1000, endTime: now + 30_000 }, /^endTime: must be at most 15 s from now/],
        [{ startTime: now - 2000, endTime: now - 3000 }, /^endTime: must be greater than startTime$/],
        [{ startTime: now - 50_000, endTime: now + 12_000 }, /^endTime: a live clip is at most 60 s long$/],
      ];
      for (const [range, rule] of cases) {
        const res = await clip({ playbackId: stream.playbackId, ...range });
        assert.equal(res.status, 422, JSON.stringify(range));
        assert.equal(errorsOf(res).length, 1, errorsOf(res).join());
        assert.match(errorsOf(res)[0] ?? '', rule);
      }
    });

    it("another owner's stream: 404 for the clip and the lists, and no task for them", async () => {
      const now = Date.now();
      const res = await clip({ playbackId: stream.playbackId, startTime: now - 5000, endTime: now - 2000 }, bob);
      assert.equal(res.status, 404);
      assert.deepEqual(errorsOf(res), ['playbackId: no asset or stream of yours has this playbackId']);
      assert.equal((await server.call('GET', `/api/stream/${stream.id}/clips`, { key: bob })).status, 404);
      const unknown = '6a1e0a55-0000-4000-8000-000000000000';
      assert.equal((await server.call('GET', `/api/session/${unknown}/clips`, { key: alice })).status, 404);
      assert.deepEqual((await server.call('GET', '/api/task', { key: bob })).body, []);
    });

    it("a stream's clips before any: an empty list", async () => {
      const res = await server.call('GET', `/api/stream/${stream.id}/clips`, { key: alice });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, []);
    });

    describe('publish, clip seconds 3-6 by the wall clock', {
      skip: kind === PUBLISHES_ON ? false : 'publishes on one database',
    }, () => {
      let publish: TestPublish | undefined;
      let dir = '';
      let made: Asset;

      before(async () => {
        dir = await mkdtemp(path.join(os.tmpdir(), 'mp-live-clip-api-'));
      });
      after(async () => {
        await publish?.stop();
        await rm(dir, { recursive: true, force: true });
      });

      it('the clip is an asset of the session, ~3 s long, from the frame sent at second 3', async (t) => {
        publish = await publishTestSource({
          url: `rtmp://127.0.0.1:${rtmpPort}/live/${stream.streamKey}`,
          protocol: 'rtmp',
          seconds: 10,
          width: 320,
          height: 240,
          fps: FPS,
        });
        const start = await waitFor(() => Promise.resolve(publish?.firstFrameAt()), 15_000, 'the first frame');
        await waitFor(() => Promise.resolve(Date.now() >= start + 7000), 20_000, 'second 7 of the publish');
        // The key's one transcode taken by an upload that waits for its bytes: another is refused.
        const upload = () => server.call('POST', '/api/asset/request-upload', { key: alice, body: { name: 'u' } });
        assert.equal((await upload()).status, 200);
        assert.equal((await upload()).status, 429);
        const res = await clip({ playbackId: stream.playbackId, startTime: start + 3000, endTime: start + 6000 });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const answer = res.body as { asset: Asset; task: { id: string } };
        made = answer.asset;
        assert.equal(made.name, 'match (clip)');
        assert.equal(made.source.type, 'clip');
        assert.equal(made.source.sourceId, stream.id);
        assert.equal(made.source.playbackId, stream.playbackId);
        assert.ok(made.source.sessionId, 'the asset names the session');
        const ready = await waitFor(
          async () => {
            const a = (await server.call('GET', `/api/asset/${made.id}`, { key: alice })).body as Asset;
            if (a.status.phase === 'failed')
              assert.fail(
                `the clip failed: ${a.status.errorMessage}\n${server.logs.lines.filter((l) => l.includes('"error"') || l.includes('"err"')).join('\n')}`,
              );
            return a.status.phase === 'ready' ? a : undefined;
          },
          120_000,
          'the live clip to be ready',
        );
        const duration = ready.videoSpec?.duration ?? 0;
        assert.ok(Math.abs(duration - 3) < 2 / FPS, `the clip lasts ${duration} s`);
        // The publisher's clock (ffmpeg's first report) and the archive's part dates differ
        // by a little: the first frame is the one sent at second 3 within half a second.
        const first = await firstFrameNumber(ready.downloadUrl ?? '', dir);
        t.diagnostic(`the clip: ${duration} s from frame ${first} (asked: from frame ${3 * FPS})`);
        assert.ok(first !== undefined && Math.abs(first - 3 * FPS) <= FPS / 2, `the clip starts at frame ${first}`);
        // Its task, as Livepeer shows a clip's: the stream's playbackId, the range, the session.
        const task = (await server.call('GET', `/api/task/${answer.task.id}`, { key: alice })).body as {
          type: string;
          params: { clip: { clipStrategy: Record<string, unknown>; sessionId?: string } };
        };
        assert.equal(task.type, 'clip');
        // The publisher's clock gives fractions of a millisecond: whole ones are kept.
        assert.deepEqual(task.params.clip.clipStrategy, {
          startTime: Math.round(start + 3000),
          endTime: Math.round(start + 6000),
          playbackId: stream.playbackId,
        });
        assert.equal(task.params.clip.sessionId, made.source.sessionId);
      });

      it('the stream and the session list it; a session of another stream is refused', async () => {
        const byStream = await server.call('GET', `/api/stream/${stream.id}/clips`, { key: alice });
        assert.deepEqual(
          (byStream.body as Asset[]).map((a) => a.id),
          [made.id],
        );
        const bySession = await server.call('GET', `/api/session/${made.source.sessionId}/clips`, { key: alice });
        assert.deepEqual(
          (bySession.body as Asset[]).map((a) => a.id),
          [made.id],
        );
        assert.equal(
          (await server.call('GET', `/api/session/${made.source.sessionId}/clips`, { key: bob })).status,
          404,
        );
        const other = await server.call('POST', '/api/stream', { key: alice, body: { name: 'other' } });
        const now = Date.now();
        const res = await clip({
          playbackId: (other.body as { playbackId: string }).playbackId,
          startTime: now - 3000,
          endTime: now - 1000,
          sessionId: made.source.sessionId,
        });
        assert.equal(res.status, 422);
        assert.deepEqual(errorsOf(res), ["sessionId: not one of this stream's sessions"]);
      });
    });
  });
}
