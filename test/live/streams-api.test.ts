// The stream routes through the real `livepeer` SDK (spec/API.md section D): stream.create,
// get, getAll, update (suspend), terminate (409 while idle), delete, playback.get of an idle
// stream; the validation messages; another owner's 404; the key in no log line; webhooks
// subscribed to stream.started and stream.idle get `{stream}` without the key. The SDK's zod
// schemas are strict, so every answer it parses is held to Livepeer's shapes.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import { Type } from 'livepeer/models/components/playbackpolicy.js';
import { Events } from 'livepeer/models/components/webhook.js';
import { createLogger } from '../../src/lib/log.ts';
import { LiveSessionStore, NodeRegistry } from '../../src/live/index.ts';
import { freePort } from '../helpers/ports.ts';
import { databaseKinds, startTestServer, type TestServer, waitFor } from '../helpers/server.ts';
import { startJsonReceiver } from '../helpers/webhook-receiver.ts';

const LOW = { name: 'low', width: 320, height: 240, bitrate: 300_000, fps: 0 };

for (const { kind, skip } of await databaseKinds()) {
  describe(`stream API (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let alice: string;
    let bob: string;
    let sdk: Livepeer;
    let receiver: Awaited<ReturnType<typeof startJsonReceiver>>;
    const keys: string[] = [];
    let rtmpPort: number;

    before(async () => {
      receiver = await startJsonReceiver();
      rtmpPort = await freePort();
      // RTMP named (its URL is shown), SRT off (no URL); the api role alone takes no publisher.
      server = await startTestServer({
        database: kind,
        settings: { rtmpPort, srtPort: 0 },
        roles: { api: true, worker: false },
      });
      alice = await server.key('alice');
      bob = await server.key('bob');
      sdk = new Livepeer({ apiKey: alice, serverURL: `${server.url}/api` });
    });
    after(async () => {
      await server.stop();
      receiver.server.closeAllConnections();
      await new Promise<void>((r) => receiver.server.close(() => r()));
    });

    it('stream.create answers 201 with a key, a playbackId, the default ladder and the ingest URL', async () => {
      const res = await sdk.stream.create({ name: 'cam 1', record: false, userTags: { show: 'news' } });
      assert.equal(res.statusCode, 201);
      const s = res.stream;
      assert.ok(s?.id);
      keys.push(s.streamKey ?? '');
      assert.match(s.streamKey ?? '', /^[a-z0-9]{6}(-[a-z0-9]{6}){3}$/);
      assert.match(s.playbackId ?? '', /^[a-z0-9]{16}$/);
      assert.equal(s.name, 'cam 1');
      assert.equal(s.isActive, false);
      assert.equal(s.suspended, false);
      assert.deepEqual(
        s.profiles?.map((p) => [p.name, p.width, p.height, p.bitrate, p.fps]),
        [
          ['240p0', 426, 240, 250_000, 0],
          ['360p0', 640, 360, 800_000, 0],
          ['480p0', 854, 480, 1_600_000, 0],
          ['720p0', 1280, 720, 3_000_000, 0],
        ],
      );
      assert.deepEqual(s.userTags, { show: 'news' });
      // The extensions the SDK drops, over plain HTTP.
      const raw = await server.call('GET', `/api/stream/${s.id}`, { key: alice });
      assert.equal(raw.status, 200);
      const body = raw.body as Record<string, unknown>;
      assert.equal(body.rtmpIngestUrl, `rtmp://127.0.0.1:${rtmpPort}/live`);
      assert.equal(body.srtIngestUrl, undefined, 'SRT ingest is off');
      assert.equal(body.streamKey, s.streamKey, 'the owner sees the key');
    });

    it('takes a ladder of its own, [] for the source alone, and multistream targets as given', async () => {
      const target = {
        profile: 'low',
        videoOnly: true,
        spec: { name: 'yt', url: 'rtmp://a.example/live2/secret-yt-key' },
      };
      const res = await sdk.stream.create({ name: 'own ladder', profiles: [LOW], multistream: { targets: [target] } });
      keys.push(res.stream?.streamKey ?? '');
      assert.deepEqual(
        res.stream?.profiles?.map((p) => p.name),
        ['low'],
      );
      // The inline spec became a saved target (its url in one table): the stream keeps its id.
      const [kept] = res.stream?.multistream?.targets ?? [];
      assert.deepEqual({ ...kept, id: undefined }, { profile: 'low', videoOnly: true, id: undefined });
      const saved = await server.call('GET', `/api/multistream/target/${kept?.id}`, { key: alice });
      assert.equal(saved.body.name, 'yt');
      const raw = await server.call('GET', `/api/stream/${res.stream?.id}`, { key: alice });
      for (const body of [raw.body, saved.body])
        assert.ok(!JSON.stringify(body).includes('secret-yt-key'), "a target's URL is never shown back");
      const alone = await sdk.stream.create({ name: 'source alone', profiles: [] });
      keys.push(alone.stream?.streamKey ?? '');
      assert.deepEqual(alone.stream?.profiles, []);
    });

    it('refuses bad profiles and targets with 422s that name the field and the rule', async () => {
      const refuse = async (body: Record<string, unknown>, expected: RegExp) => {
        const res = await server.call('POST', '/api/stream', { key: alice, body: { name: 'bad', ...body } });
        assert.equal(res.status, 422, JSON.stringify(res.body));
        const errors = (res.body as { errors: string[] }).errors;
        assert.ok(
          errors.some((e) => expected.test(e)),
          `${JSON.stringify(errors)} should match ${expected}`,
        );
      };
      await refuse({ profiles: [{ ...LOW, width: 0 }] }, /^profiles\[0\]\.width: must be >= 128/);
      await refuse({ profiles: [{ ...LOW, bitrate: 10 }] }, /^profiles\[0\]\.bitrate: must be >= 50000/);
      await refuse({ profiles: [{ ...LOW, bitrate: 1e9 }] }, /^profiles\[0\]\.bitrate: must be <= 50000000/);
      await refuse({ profiles: [{ ...LOW, width: 321 }] }, /^profiles\[0\]\.width: must be even$/);
      await refuse({ profiles: [LOW, LOW] }, /^profiles\[1\]\.name: "low" is used by another profile/);
      await refuse({ profiles: [{ ...LOW, name: 'source' }] }, /^profiles\[0\]\.name: "source" is the passthrough/);
      await refuse({ profiles: [{ ...LOW, encoder: 'HEVC' }] }, /^profiles\[0\]\.encoder: must be "H\.264"/);
      await refuse(
        { multistream: { targets: [{ profile: 'source' }] } },
        /^multistream\.targets\[0\]: must have an id or a spec$/,
      );
      await refuse(
        { multistream: { targets: [{ profile: '1080p', id: 'x' }] } },
        /^multistream\.targets\[0\]\.profile: must be "source" or a profile of the stream \(240p0, 360p0, 480p0, 720p0\)$/,
      );
      await refuse({ name: '' }, /^name: /);
      const patch = await server.call('PATCH', `/api/stream/${randomUUID()}`, {
        key: alice,
        body: { suspended: 'yes' },
      });
      assert.equal(patch.status, 422);
    });

    it('getAll lists the owner’s streams newest first (streamsonly accepted); get reads one', async () => {
      const all = (await sdk.stream.getAll('1')).data ?? [];
      assert.deepEqual(
        all.map((s) => s.name),
        ['source alone', 'own ladder', 'cam 1'],
      );
      const first = all.at(-1);
      assert.ok(first?.id);
      const one = (await sdk.stream.get(first.id)).stream;
      assert.equal(one?.name, 'cam 1');
      assert.equal(one?.streamKey, first.streamKey);
      const paged = await server.call('GET', '/api/stream?limit=2', { key: alice });
      assert.equal((paged.body as unknown[]).length, 2);
      assert.match(paged.headers.get('link') ?? '', /rel="next"/);
    });

    it("another owner's stream is a 404 on every route", async () => {
      const mine = (await sdk.stream.getAll()).data?.[0];
      assert.ok(mine?.id);
      for (const [method, path, body] of [
        ['GET', `/api/stream/${mine.id}`, undefined],
        ['PATCH', `/api/stream/${mine.id}`, { suspended: true }],
        ['DELETE', `/api/stream/${mine.id}/terminate`, undefined],
        ['DELETE', `/api/stream/${mine.id}`, undefined],
      ] as const) {
        const res = await server.call(method, path, { key: bob, ...(body ? { body } : {}) });
        assert.equal(res.status, 404, `${method} ${path}`);
      }
      assert.deepEqual((await server.call('GET', '/api/stream', { key: bob })).body, []);
      assert.equal((await sdk.stream.get(mine.id)).stream?.suspended, false, "bob's PATCH changed nothing");
    });

    it('update suspends (204), terminate of an idle stream is a 409, delete is a 204 and then a 404', async () => {
      const made = (await sdk.stream.create({ name: 'to suspend' })).stream;
      keys.push(made?.streamKey ?? '');
      assert.ok(made?.id);
      const upd = await sdk.stream.update({ suspended: true, name: 'suspended one' }, made.id);
      assert.equal(upd.statusCode, 204);
      const got = (await sdk.stream.get(made.id)).stream;
      assert.equal(got?.suspended, true);
      assert.equal(got?.name, 'suspended one');
      const term = await server.call('DELETE', `/api/stream/${made.id}/terminate`, { key: alice });
      assert.equal(term.status, 409);
      assert.deepEqual(term.body, { errors: ['the stream is not live: there is no publisher to cut off'] });
      await assert.rejects(sdk.stream.terminate(made.id));
      const del = await sdk.stream.delete(made.id);
      assert.equal(del.statusCode, 204);
      assert.equal((await server.call('GET', `/api/stream/${made.id}`, { key: alice })).status, 404);
    });

    it('update takes null for profiles and playbackPolicy, creatorId, record and recordingSpec; its 422s name the field', async () => {
      const made = (await sdk.stream.create({ name: 'patched', profiles: [LOW], playbackPolicy: { type: Type.Jwt } }))
        .stream;
      keys.push(made?.streamKey ?? '');
      assert.ok(made?.id);
      const bad = await server.call('PATCH', `/api/stream/${made.id}`, {
        key: alice,
        body: { profiles: [{ ...LOW, height: 241 }], multistream: { targets: [{ profile: 'low', id: 't1' }] } },
      });
      assert.equal(bad.status, 422);
      // The target names a rung of the ladder the patch gives: only the height is wrong.
      assert.deepEqual(bad.body, { errors: ['profiles[0].height: must be even'] });
      const gone = await server.call('PATCH', `/api/stream/${made.id}`, {
        key: alice,
        body: { multistream: { targets: [{ profile: '720p0', id: 't1' }] } },
      });
      assert.deepEqual(gone.body, {
        errors: ['multistream.targets[0].profile: must be "source" or a profile of the stream (low)'],
      });
      const upd = await sdk.stream.update(
        {
          profiles: null,
          playbackPolicy: null,
          record: true,
          creatorId: 'maker-9',
          recordingSpec: { profiles: [LOW] },
        },
        made.id,
      );
      assert.equal(upd.statusCode, 204);
      const got = (await sdk.stream.get(made.id)).stream;
      assert.deepEqual(
        got?.profiles?.map((p) => p.name),
        ['240p0', '360p0', '480p0', '720p0'],
      );
      assert.equal(got?.playbackPolicy, undefined);
      assert.equal(got?.record, true);
      assert.deepEqual(got?.creatorId, { type: 'unverified', value: 'maker-9' });
      assert.deepEqual(
        got?.recordingSpec?.profiles?.map((p) => p.name),
        ['low'],
      );
    });

    it('playback.get of an idle stream answers type live, meta.live 0 and its HLS URL', async () => {
      const s = (await sdk.stream.getAll()).data?.at(-1);
      assert.ok(s?.playbackId);
      const info = (await sdk.playback.get(s.playbackId)).playbackInfo;
      assert.equal(info?.type, 'live');
      assert.equal(info?.meta.live, 0);
      assert.deepEqual(info?.meta.source, [
        {
          hrn: 'HLS (TS)',
          type: 'html5/application/vnd.apple.mpegurl',
          url: `${server.url}/media/live/${s.playbackId}/index.m3u8`,
        },
      ]);
    });

    it('webhooks subscribe to stream.started and stream.idle and get {stream} without its key', async () => {
      const hook = await sdk.webhook.create({
        name: 'live',
        url: receiver.url,
        events: [Events.StreamStarted, Events.StreamIdle],
      });
      assert.deepEqual(hook.webhook?.events, ['stream.started', 'stream.idle']);
      const s = (await sdk.stream.create({ name: 'goes live' })).stream;
      keys.push(s?.streamKey ?? '');
      assert.ok(s?.id);
      // What the live runtime does when a publish starts and ends (a node holding its session's lease).
      const db = server.running.core.db;
      const sessions = new LiveSessionStore(db);
      const node = new NodeRegistry({ db, log: createLogger({ level: 'silent' }) });
      await node.register(undefined);
      const k = { streamId: s.id, sessionId: randomUUID(), nodeId: node.id };
      assert.equal((await sessions.claim({ ...k, protocol: 'rtmp', windowSecs: 0 })).claimed, true);
      const live = (await sdk.playback.get(s.playbackId ?? '')).playbackInfo;
      assert.equal(live?.meta.live, 1);
      await sessions.idle(k);
      await node.unregister();
      const got = await waitFor(
        async () => (receiver.got.length >= 2 ? receiver.got : undefined),
        15_000,
        'two deliveries',
      );
      assert.deepEqual(
        got.map((d) => d.event),
        ['stream.started', 'stream.idle'],
      );
      assert.equal(got[0]?.payload.stream.id, s.id);
      assert.equal(got[0]?.payload.stream.isActive, true);
      assert.equal(got[1]?.payload.stream.isActive, false);
      assert.equal(got[0]?.payload.stream.streamKey, undefined);
      for (const d of got) assert.ok(!JSON.stringify(d).includes(s.streamKey ?? '-'), 'no key in a delivery');
    });

    it('no log line holds a stream key', () => {
      assert.ok(keys.length >= 5);
      for (const key of keys) {
        assert.ok(key.length > 20);
        assert.ok(!server.logs.text.includes(key), 'a stream key was logged');
      }
      assert.match(server.logs.text, /stream created/);
    });
  });
}
