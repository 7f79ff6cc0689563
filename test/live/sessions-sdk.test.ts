// Sessions, restream targets and live clips through the real `livepeer` SDK (spec/API.md
// section D): multistream.create/getAll/get/update/delete, stream.addMultistreamTarget and
// removeMultistreamTarget (by id and with an inline spec), session.getRecorded/get/getAll/
// getClips, stream.getClips and stream.createClip with a live stream's playbackId. The SDK's
// zod schemas hold every answer it parses to Livepeer's shapes and status codes (201 for
// creates, 204 for PATCH and DELETE). A target's url is a secret: never in an answer or a
// log line. Another owner's session or target is a 404.
//
// The publish (10 s of a 320x240 source, one small rung, `record: true`) runs on the embedded
// database only: the PostgreSQL run checks the routes without media, as the clip test does.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import type { Session } from 'livepeer/models/components/session.js';
import { publishTestSource, type TestPublish } from '../helpers/live.ts';
import { freePort } from '../helpers/ports.ts';
import { refused } from '../helpers/sdk.ts';
import { databaseKinds, startTestServer, type TestServer, waitFor } from '../helpers/server.ts';
import { SMALL_RUNG } from './live-e2e.ts';

/** The database whose run also publishes, clips and records. */
const PUBLISHES_ON = 'embedded';
/** A restream target's url: it carries the other service's stream key. */
const TARGET_URL = 'rtmp://127.0.0.1:9/live/target-secret-key-1';
const OTHER_URL = 'rtmp://127.0.0.1:9/live/target-secret-key-2';
const INLINE_URL = 'rtmp://127.0.0.1:9/live/inline-secret-key-3';
const SECRETS = ['target-secret-key-1', 'target-secret-key-2', 'inline-secret-key-3'];

/** The status of an SDK call the server refused. */
const statusOf = async (p: Promise<unknown>): Promise<number> => (await refused(p)).statusCode;

for (const { kind, skip } of await databaseKinds()) {
  describe(`sessions, multistream targets and live clips through the SDK (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let sdk: Livepeer;
    let bob: Livepeer;
    let key = '';
    let rtmpPort = 0;
    let stream: { id: string; streamKey: string; playbackId: string };

    before(async () => {
      rtmpPort = await freePort();
      server = await startTestServer({
        database: kind,
        // A short reconnect window: the session ends (and its recording starts) 1 s after the publish.
        settings: { rtmpPort, srtPort: 0, liveReconnectSecs: 1 },
        roles: { api: true, worker: true, ingest: true },
      });
      key = await server.key('alice');
      sdk = new Livepeer({ apiKey: key, serverURL: `${server.url}/api` });
      bob = new Livepeer({ apiKey: await server.key('bob'), serverURL: `${server.url}/api` });
      const made = await sdk.stream.create({
        name: 'recorded show',
        profiles: [{ name: SMALL_RUNG.name, width: 284, height: 160, bitrate: 200_000, fps: 0 }],
        record: true,
        recordingSpec: { profiles: [{ name: '160p', width: 284, height: 160, bitrate: 200_000 }] },
      });
      assert.equal(made.statusCode, 201);
      const s = made.stream;
      assert.ok(s?.id && s.streamKey && s.playbackId);
      stream = { id: s.id, streamKey: s.streamKey, playbackId: s.playbackId };
    });
    after(() => server.stop());

    describe('multistream targets', () => {
      let targetId = '';

      it('multistream.create answers 201 without the url; getAll and get list it, never with the url', async () => {
        const res = await sdk.multistream.create({ name: 'twitch', url: TARGET_URL });
        assert.equal(res.statusCode, 201);
        const t = res.multistreamTarget;
        assert.ok(t?.id);
        assert.equal(t.name, 'twitch');
        assert.equal(t.disabled ?? false, false);
        assert.equal(typeof t.createdAt, 'number');
        targetId = t.id;
        const all = await sdk.multistream.getAll();
        assert.equal(all.statusCode, 200);
        assert.deepEqual(
          all.data?.map((x) => x.id),
          [targetId],
        );
        const one = await sdk.multistream.get(targetId);
        assert.equal(one.multistreamTarget?.name, 'twitch');
        // The SDK drops fields it does not know: read the raw answers too.
        for (const path of ['/api/multistream/target', `/api/multistream/target/${targetId}`]) {
          const raw = await server.call('GET', path, { key });
          assert.equal(raw.status, 200);
          assert.doesNotMatch(JSON.stringify(raw.body), /secret-key|rtmp:/, path);
        }
      });

      it('multistream.update answers 204 and changes the name, the url and disabled', async () => {
        const res = await sdk.multistream.update({ name: 'twitch 2', url: OTHER_URL, disabled: true }, targetId);
        assert.equal(res.statusCode, 204);
        const t = (await sdk.multistream.get(targetId)).multistreamTarget;
        assert.equal(t?.name, 'twitch 2');
        assert.equal(t?.disabled, true);
        await sdk.multistream.update({ url: OTHER_URL, disabled: false }, targetId);
        assert.equal((await sdk.multistream.get(targetId)).multistreamTarget?.disabled, false);
      });

      it('stream.addMultistreamTarget answers 204 by id and with an inline spec; the stream lists both without a url', async () => {
        const byId = await sdk.stream.addMultistreamTarget({ profile: 'source', id: targetId }, stream.id);
        assert.equal(byId.statusCode, 204);
        const inline = await sdk.stream.addMultistreamTarget(
          { profile: SMALL_RUNG.name, videoOnly: true, spec: { name: 'youtube', url: INLINE_URL } },
          stream.id,
        );
        assert.equal(inline.statusCode, 204);
        const targets = (await sdk.stream.get(stream.id)).stream?.multistream?.targets ?? [];
        assert.equal(targets.length, 2, JSON.stringify(targets));
        assert.deepEqual(targets[0], { id: targetId, profile: 'source', videoOnly: false });
        const saved = targets[1];
        assert.ok(saved?.id && saved.id !== targetId, 'the inline spec became a saved target');
        assert.equal(saved.profile, SMALL_RUNG.name);
        assert.equal(saved.videoOnly, true);
        assert.equal((await sdk.multistream.get(saved.id)).multistreamTarget?.name, 'youtube');
        const raw = await server.call('GET', `/api/stream/${stream.id}`, { key });
        assert.doesNotMatch(JSON.stringify(raw.body.multistream), /secret-key|rtmp:/);
      });

      it('stream.removeMultistreamTarget and multistream.delete answer 204; the target is gone', async () => {
        const targets = (await sdk.stream.get(stream.id)).stream?.multistream?.targets ?? [];
        for (const t of targets) {
          const res = await sdk.stream.removeMultistreamTarget(stream.id, t.id ?? '');
          assert.equal(res.statusCode, 204);
        }
        assert.deepEqual((await sdk.stream.get(stream.id)).stream?.multistream?.targets ?? [], []);
        for (const t of targets) {
          const res = await sdk.multistream.delete(t.id ?? '');
          assert.equal(res.statusCode, 204);
          assert.equal(await statusOf(sdk.multistream.get(t.id ?? '')), 404);
        }
        assert.deepEqual((await sdk.multistream.getAll()).data ?? [], []);
      });

      it("another owner's target is a 404 to every call, and a bad url a 422 naming url", async () => {
        const mine = (await sdk.multistream.create({ url: TARGET_URL })).multistreamTarget;
        assert.ok(mine?.id);
        assert.ok(mine.name, 'a target made without a name gets one');
        assert.equal(await statusOf(bob.multistream.get(mine.id)), 404);
        assert.equal(await statusOf(bob.multistream.update({ url: OTHER_URL }, mine.id)), 404);
        assert.equal(await statusOf(bob.multistream.delete(mine.id)), 404);
        assert.deepEqual((await bob.multistream.getAll()).data ?? [], []);
        assert.equal(
          await statusOf(bob.stream.addMultistreamTarget({ profile: 'source', id: mine.id }, stream.id)),
          404,
        );
        const bobsStream = (await bob.stream.create({ name: 'bob' })).stream;
        assert.ok(bobsStream?.id);
        assert.equal(
          await statusOf(bob.stream.addMultistreamTarget({ profile: 'source', id: mine.id }, bobsStream.id)),
          404,
          "a stream can't take another owner's target",
        );
        const bad = await refused(sdk.multistream.create({ url: 'ftp://example.com/x' }));
        assert.equal(bad.statusCode, 422);
        assert.match(bad.body, /url/);
        assert.equal((await sdk.multistream.delete(mine.id)).statusCode, 204);
      });

      it('no target url appears in a log line', () => {
        for (const secret of SECRETS) assert.ok(!server.logs.text.includes(secret), `${secret} was logged`);
      });
    });

    describe('sessions and live clips', { skip: kind === PUBLISHES_ON ? false : 'publishes on one database' }, () => {
      let publish: TestPublish | undefined;
      let session: Session;
      let clipId = '';

      after(() => publish?.stop());

      it('a stream never published has no sessions; a live clip of it is a 422', async () => {
        const res = await sdk.session.getRecorded(stream.id);
        assert.equal(res.statusCode, 200);
        assert.deepEqual(res.data, []);
        const now = Date.now();
        const clip = await refused(
          sdk.stream.createClip({ playbackId: stream.playbackId, startTime: now - 5000, endTime: now - 2000 }),
        );
        assert.equal(clip.statusCode, 422);
      });

      it('a publish opens one session: getRecorded, get and getAll read it while live, recording waiting', async () => {
        publish = await publishTestSource({
          url: `rtmp://127.0.0.1:${rtmpPort}/live/${stream.streamKey}`,
          protocol: 'rtmp',
          seconds: 10,
          width: 320,
          height: 240,
          fps: 30,
        });
        await waitFor(async () => (await sdk.stream.get(stream.id)).stream?.isActive, 15_000, 'the stream to be live');
        for (const record of [undefined, true, 1] as const) {
          const res = await sdk.session.getRecorded(stream.id, record);
          assert.equal(res.statusCode, 200);
          assert.equal(res.data?.length, 1, `record=${record}`);
        }
        const listed = (await sdk.session.getRecorded(stream.id)).data?.[0];
        assert.ok(listed?.id);
        assert.equal(listed.parentId, stream.id);
        assert.equal(listed.name, 'recorded show');
        assert.equal(listed.playbackId, stream.playbackId);
        assert.equal(listed.record, true);
        assert.equal(listed.recordingStatus, 'waiting');
        assert.equal(typeof listed.createdAt, 'number');
        const one = await sdk.session.get(listed.id);
        assert.equal(one.statusCode, 200);
        assert.equal(one.session?.id, listed.id);
        const all = (await sdk.session.getAll()).data ?? [];
        assert.ok(
          all.some((s) => s.id === listed.id),
          'GET /api/session lists it',
        );
        session = listed;
      });

      it('stream.createClip of the live playbackId with Unix-ms times makes a ~3 s clip asset of the session', async () => {
        // Seconds 3-6 of the publish by the wall clock, asked once second 7 has been sent.
        const start = await waitFor(() => Promise.resolve(publish?.firstFrameAt()), 10_000, 'the first frame');
        const until = start + 7500;
        await waitFor(() => Promise.resolve(Date.now() >= until), 15_000, 'second 7 of the publish');
        const res = await sdk.stream.createClip({
          playbackId: stream.playbackId,
          startTime: start + 3000,
          endTime: start + 6000,
          name: 'the goal',
        });
        assert.equal(res.statusCode, 200);
        const asset = res.data?.asset;
        assert.ok(asset?.id && res.data?.task.id);
        assert.equal(asset.name, 'the goal');
        assert.equal(asset.source.type, 'clip');
        assert.equal((asset.source as { sessionId?: string }).sessionId, session.id);
        assert.equal((asset.source as { playbackId?: string }).playbackId, stream.playbackId);
        clipId = asset.id;
        const ready = await waitFor(
          async () => {
            const a = (await sdk.asset.get(clipId)).asset;
            if (a?.status?.phase === 'failed') assert.fail(`the clip failed: ${a.status.errorMessage}`);
            return a?.status?.phase === 'ready' ? a : undefined;
          },
          120_000,
          'the live clip to be ready',
        );
        const duration = ready.videoSpec?.duration ?? 0;
        assert.ok(Math.abs(duration - 3) < 0.5, `the clip lasts ${duration} s`);
      });

      it('session.getClips and stream.getClips list the clip', async () => {
        const bySession = await sdk.session.getClips(session.id ?? '');
        assert.equal(bySession.statusCode, 200);
        assert.deepEqual(
          bySession.data?.map((a) => a.id),
          [clipId],
        );
        const byStream = await sdk.stream.getClips(stream.id);
        assert.deepEqual(
          byStream.data?.map((a) => a.id),
          [clipId],
        );
      });

      it('once the window closes the recording is an asset with the session id; the session reads ready with its URLs', async () => {
        await publish?.exited;
        const ready = await waitFor(
          async () => {
            const s = (await sdk.session.get(session.id ?? '')).session;
            if (s?.recordingStatus === 'failed') assert.fail('the recording failed');
            return s?.recordingStatus === 'ready' ? s : undefined;
          },
          180_000,
          'the recording to be ready',
        );
        assert.match(ready.recordingUrl ?? '', /^http:\/\/127\.0\.0\.1:\d+\/.+\.m3u8/);
        assert.match(ready.mp4Url ?? '', /^http:\/\/127\.0\.0\.1:\d+\//);
        const asset = (await sdk.asset.get(session.id ?? '')).asset;
        assert.deepEqual(asset?.source, { type: 'recording', sessionId: session.id });
        assert.equal(asset?.status?.phase, 'ready');
        const duration = asset?.videoSpec?.duration ?? 0;
        assert.ok(Math.abs(duration - 10) < 0.5, `the recording lasts ${duration} s of the 10 sent`);
        const mp4 = await fetch(ready.mp4Url ?? '');
        assert.equal(mp4.status, 200);
        const head = Buffer.from(await mp4.arrayBuffer()).subarray(0, 12);
        assert.equal(head.toString('latin1', 4, 8), 'ftyp', 'mp4Url is an MP4 file');
        assert.equal((await sdk.session.getRecorded(stream.id, true)).data?.length, 1, 'one session, one recording');
      });

      it("another owner's session, its clips and the stream's sessions are 404s; a clip of another's stream too", async () => {
        const id = session.id ?? '';
        assert.equal(await statusOf(bob.session.get(id)), 404);
        assert.equal(await statusOf(bob.session.getClips(id)), 404);
        assert.equal(await statusOf(bob.session.getRecorded(stream.id)), 404);
        assert.equal(await statusOf(bob.stream.getClips(stream.id)), 404);
        assert.ok(!((await bob.session.getAll()).data ?? []).some((s) => s.id === id));
        const now = Date.now();
        const clip = await refused(
          bob.stream.createClip({ playbackId: stream.playbackId, startTime: now - 5000, endTime: now - 2000 }),
        );
        assert.equal(clip.statusCode, 404);
        assert.ok(!server.logs.text.includes(stream.streamKey), 'the stream key was logged');
      });
    });
  });
}
