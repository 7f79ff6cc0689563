// The asset and playback routes through the real `livepeer` SDK (issue #27, spec/API.md
// section C): asset.create with the direct PUT, createViaUrl, get until ready, getAll,
// update, delete (its files gone), playback.get; another owner's asset; 422s that name the
// field; the asset webhooks; the OpenAPI document. The SDK's zod schemas are strict, so every
// answer it parses is checked against Livepeer's shapes.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import { Asset$inboundSchema } from 'livepeer/models/components/asset.js';
import { Events } from 'livepeer/models/components/webhook.js';
import { ErrorT } from 'livepeer/models/errors/error.js';
import { makeClip } from '../helpers/media.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { refused } from '../helpers/sdk.ts';
import { databaseKinds, startTestServer, waitFor, type TestServer } from '../helpers/server.ts';
import { startJsonReceiver } from '../helpers/webhook-receiver.ts';

const URL_SECRET = 'sig-do-not-show-91ab';
const ASSET_EVENTS = [
  Events.AssetCreated,
  Events.AssetUpdated,
  Events.AssetReady,
  Events.AssetFailed,
  Events.AssetDeleted,
];

/** playback.get's 404, which the SDK throws as its one typed error (ErrorT, with no status on it). */
async function notFoundPlayback(p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ErrorT) return;
    throw err;
  }
  assert.fail('the call succeeded');
}

const sha = (algorithm: string, file: string) => createHash(algorithm).update(readFileSync(file)).digest('hex');

for (const { kind, skip } of await databaseKinds()) {
  describe(`asset API (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let alice: string;
    let bob: string;
    let sdk: Livepeer;
    let clip: string;
    let origin: TestHttp;
    let receiver: Awaited<ReturnType<typeof startJsonReceiver>>;
    const seen: string[] = [];
    // The uploaded asset (ready after the first test) and the fetched one.
    let uploaded: { id: string; playbackId: string; taskId: string; token: string };
    let fetched: { id: string; playbackId: string };
    let failedId: string;

    before(async () => {
      clip = await makeClip({ width: 320, height: 240, seconds: 2 });
      origin = await startHttp({ '/video.mp4': serveFile(clip) });
      receiver = await startJsonReceiver();
      server = await startTestServer({ database: kind });
      alice = await server.key('alice');
      bob = await server.key('bob');
      sdk = new Livepeer({ apiKey: alice, serverURL: `${server.url}/api` });
      await sdk.webhook.create({ name: 'assets', url: receiver.url, events: ASSET_EVENTS });
    });
    after(async () => {
      await server.stop();
      await origin.close();
      receiver.server.closeAllConnections();
      await new Promise<void>((r) => receiver.server.close(() => r()));
    });

    /** GET /api/asset/{id} through the SDK until `done` holds for it. */
    const assetUntil = (id: string, done: (phase: string | undefined) => boolean, what: string) =>
      waitFor(
        async () => {
          const a = (await sdk.asset.get(id)).asset;
          if (a?.status?.phase === 'failed' && !done('failed'))
            assert.fail(`the asset failed: ${a.status.errorMessage}`);
          return done(a?.status?.phase) ? a : undefined;
        },
        60_000,
        what,
      );

    it('asset.create answers the upload URLs, the asset (uploading) and its upload task', async () => {
      const res = await sdk.asset.create({ name: 'uploaded clip', staticMp4: true, creatorId: 'maker-1' });
      assert.equal(res.statusCode, 200);
      const data = res.data;
      assert.ok(data);
      seen.push(JSON.stringify(data.asset));
      const token = new URL(data.url).searchParams.get('token') ?? '';
      assert.match(token, /^[A-Za-z0-9_-]{43}$/);
      assert.equal(data.url, `${server.url}/api/asset/upload/direct?token=${token}`);
      assert.equal(data.tusEndpoint, `${server.url}/api/asset/upload/tus?token=${token}`);
      assert.equal(data.asset.name, 'uploaded clip');
      assert.equal(data.asset.status?.phase, 'uploading');
      assert.deepEqual(data.asset.source, { type: 'directUpload' });
      assert.deepEqual(data.asset.creatorId, { type: 'unverified', value: 'maker-1' });
      assert.match(data.asset.playbackId ?? '', /^[a-z0-9]{16}$/);
      assert.equal(data.asset.playbackUrl, undefined, 'no playback URL before it is ready');
      uploaded = { id: data.asset.id, playbackId: data.asset.playbackId ?? '', taskId: data.task.id, token };

      const task = (await sdk.task.get(data.task.id)).task;
      assert.equal(task?.type, 'upload');
      assert.equal(task?.outputAssetId, data.asset.id);
      assert.equal(task?.inputAssetId, undefined);
      assert.equal(task?.params?.upload?.url, undefined, 'a direct upload has no URL to show');
      assert.equal(task?.status?.phase, 'pending', 'the task waits for the bytes');
    });

    it('playback of an asset not ready is a 422; of an unknown playbackId a 404', async () => {
      const early = await server.call('GET', `/api/playback/${uploaded.playbackId}`);
      assert.equal(early.status, 422);
      assert.deepEqual(early.body, { errors: ['id: the asset is not ready for playback (it is uploading)'] });
      await notFoundPlayback(sdk.playback.get('nosuchplayback00'));
      assert.equal((await server.call('GET', '/api/playback/nosuchplayback00')).status, 404);
    });

    it('the direct PUT of the file makes the asset ready: videoSpec, size, hash, playbackUrl, downloadUrl', async () => {
      const put = await fetch(`${server.url}/api/asset/upload/direct?token=${uploaded.token}`, {
        method: 'PUT',
        body: readFileSync(clip),
      });
      assert.ok(put.ok, `PUT answered ${put.status}`);
      const a = await assetUntil(uploaded.id, (p) => p === 'ready', 'the uploaded asset to be ready');
      seen.push(JSON.stringify(a));
      assert.equal(a.type, 'video');
      assert.equal(a.size, readFileSync(clip).length);
      const hashes = Object.fromEntries((a.hash ?? []).map((h) => [h.algorithm, h.hash]));
      assert.deepEqual(hashes, { md5: sha('md5', clip), sha256: sha('sha256', clip) });
      assert.ok(Math.abs((a.videoSpec?.duration ?? 0) - 2) < 0.2, `duration ${a.videoSpec?.duration}`);
      const video = a.videoSpec?.tracks?.find((t) => t.type === 'video');
      assert.equal(video?.codec, 'h264');
      assert.equal(video?.width, 320);
      assert.equal(video?.height, 240);
      assert.ok(
        a.videoSpec?.tracks?.some((t) => t.type === 'audio'),
        'the audio track is listed',
      );
      const mediaBase = `${server.url}/media/asset/${uploaded.playbackId}/`;
      assert.ok(a.playbackUrl?.startsWith(mediaBase), `playbackUrl ${a.playbackUrl}`);
      const master = await fetch(a.playbackUrl ?? '');
      assert.equal(master.status, 200);
      assert.match(await master.text(), /^#EXTM3U/);
      assert.equal(a.downloadUrl, `${mediaBase}source`);
      const source = Buffer.from(await (await fetch(a.downloadUrl ?? '')).arrayBuffer());
      assert.equal(createHash('sha256').update(source).digest('hex'), sha('sha256', clip));

      const task = (await sdk.task.get(uploaded.taskId)).task;
      assert.equal(task?.status?.phase, 'completed');
      assert.equal(task?.outputAssetId, uploaded.id);
      assert.ok(task?.output?.upload, 'the task shows its output');
    });

    it('the upload URL is spent once the upload finished, and never logged', async () => {
      const again = await fetch(`${server.url}/api/asset/upload/direct?token=${uploaded.token}`, {
        method: 'PUT',
        body: 'x',
      });
      assert.equal(again.status, 404);
      assert.ok(!server.logs.text.includes(uploaded.token), 'the upload token is in a log line');
    });

    it('playback.get lists HLS, the MP4 renditions, the storyboard and the poster, all served', async () => {
      const info = (await sdk.playback.get(uploaded.playbackId)).playbackInfo;
      assert.equal(info?.type, 'vod');
      const sources = info?.meta.source ?? [];
      assert.deepEqual(
        [...new Set(sources.map((s) => `${s.hrn} ${s.type}`))],
        [
          'HLS (TS) html5/application/vnd.apple.mpegurl',
          'MP4 html5/video/mp4',
          'Thumbnails text/vtt',
          'Thumbnail (JPEG) image/jpeg',
        ],
      );
      for (const mp4 of sources.filter((s) => s.hrn === 'MP4')) {
        assert.ok(mp4.width && mp4.height && mp4.bitrate && mp4.size, `the MP4 ${mp4.url} has its sizes`);
        const res = await fetch(mp4.url);
        assert.equal(res.status, 200);
        assert.equal(Number(res.headers.get('content-length')), mp4.size);
        await res.arrayBuffer();
      }
      for (const s of sources) {
        assert.ok(s.url.startsWith(`${server.url}/media/asset/${uploaded.playbackId}/`), s.url);
        const res = await fetch(s.url);
        assert.equal(res.status, 200, `${s.hrn} ${s.url}`);
        await res.arrayBuffer();
      }
      // No API key needed, as on Livepeer: a player asks it.
      assert.equal((await server.call('GET', `/api/playback/${uploaded.playbackId}`)).status, 200);
    });

    it('createViaUrl fetches the video; the source shows the URL without its query', async () => {
      const url = `${origin.url('/video.mp4')}?signature=${URL_SECRET}`;
      const res = await sdk.asset.createViaUrl({ name: 'fetched clip', url });
      assert.equal(res.statusCode, 200);
      const data = res.twoHundredApplicationJsonData;
      assert.ok(data);
      seen.push(JSON.stringify(data));
      assert.deepEqual(data.asset.source, { type: 'url', url: origin.url('/video.mp4') });
      assert.equal(data.asset.status?.phase, 'waiting');
      fetched = { id: data.asset.id, playbackId: data.asset.playbackId ?? '' };
      const task = (await sdk.task.get(data.task.id)).task;
      seen.push(JSON.stringify(task));
      assert.equal(task?.type, 'upload');
      assert.equal(task?.outputAssetId, data.asset.id);
      assert.equal(task?.params?.upload?.url, origin.url('/video.mp4'));
      const a = await assetUntil(fetched.id, (p) => p === 'ready', 'the fetched asset to be ready');
      assert.equal(a.size, readFileSync(clip).length);
      assert.ok(a.hash?.some((h) => h.algorithm === 'sha256' && h.hash === sha('sha256', clip)));
      assert.ok(a.playbackUrl?.startsWith(`${server.url}/media/asset/${fetched.playbackId}/`));
      assert.ok(origin.hits.includes('/video.mp4'));
    });

    it('getAll lists the owner’s assets newest first, paged with a Link', async () => {
      const all = (await sdk.asset.getAll()).data ?? [];
      assert.deepEqual(
        all.map((a) => a.id),
        [fetched.id, uploaded.id],
      );
      const first = await server.call('GET', '/api/asset?limit=1', { key: alice });
      assert.equal(first.status, 200);
      assert.deepEqual(
        first.body.map((a: { id: string }) => a.id),
        [fetched.id],
      );
      const link = first.headers.get('link') ?? '';
      const next = /^<([^>]+)>; rel="next"$/.exec(link)?.[1];
      assert.ok(next, `Link: ${link}`);
      const second = await server.call('GET', next, { key: alice });
      assert.deepEqual(
        second.body.map((a: { id: string }) => a.id),
        [uploaded.id],
      );
      assert.equal(second.headers.get('link'), null);
      // Every answer parses as Livepeer's Asset, strictly.
      for (const a of [...first.body, ...second.body]) Asset$inboundSchema.parse(a);
    });

    it('update renames and sets the playback policy', async () => {
      const renamed = (await sdk.asset.update({ name: 'renamed' }, fetched.id)).asset;
      assert.equal(renamed?.name, 'renamed');
      const policy = (await sdk.asset.update({ playbackPolicy: { type: 'public' as never } }, fetched.id)).asset;
      assert.equal(policy?.playbackPolicy?.type, 'public');
      assert.equal(policy?.name, 'renamed');
      const info = (await sdk.playback.get(fetched.playbackId)).playbackInfo;
      assert.equal(info?.meta.playbackPolicy?.type, 'public');
      const cleared = await server.call('PATCH', `/api/asset/${fetched.id}`, {
        key: alice,
        body: { playbackPolicy: null },
      });
      assert.equal(cleared.status, 200);
      assert.equal(cleared.body.playbackPolicy, undefined);
    });

    it("another owner's asset is a 404 on every route, and not in their list", async () => {
      const other = new Livepeer({ apiKey: bob, serverURL: `${server.url}/api` });
      assert.equal((await refused(other.asset.get(uploaded.id))).statusCode, 404);
      assert.equal((await refused(other.asset.update({ name: 'mine' }, uploaded.id))).statusCode, 404);
      assert.equal((await refused(other.asset.delete(uploaded.id))).statusCode, 404);
      assert.deepEqual((await other.asset.getAll()).data, []);
      assert.equal((await server.call('GET', '/api/asset/not-a-uuid', { key: alice })).status, 404);
      assert.equal((await server.call('GET', `/api/asset/${uploaded.id}`)).status, 401);
      assert.equal((await sdk.asset.get(uploaded.id)).asset?.name, 'uploaded clip', 'unchanged');
    });

    it('a 422 names the field, for each rule, through the SDK too', async () => {
      const cases: [string, unknown, string][] = [
        ['/api/asset/request-upload', {}, 'name: is required'],
        ['/api/asset/request-upload', { name: 'x', storage: { ipfs: true } }, 'storage: is not a known property'],
        [
          '/api/asset/request-upload',
          { name: 'x', playbackPolicy: { type: 'webhook' } },
          'playbackPolicy.type: must be "public" or "jwt" (webhook playback policies are not supported on this server)',
        ],
        [
          '/api/asset/request-upload',
          { name: 'x', profiles: [{ name: 'a', width: 640, height: 360, bitrate: 1_000_000, encoder: 'AV1' }] },
          'profiles[0].encoder: AV1 is only available in',
        ],
        ['/api/asset/request-upload', { name: 'x', c2pa: true }, 'c2pa: '],
        ['/api/asset/upload/url', { name: 'x', url: 'ftp://example.com/v.mp4' }, 'url: must start with https://'],
        ['/api/asset/upload/url', { name: 'x' }, 'url: is required'],
        [
          '/api/asset/upload/url',
          {
            name: 'x',
            url: 'https://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi.ipfs.dweb.link/v.mp4',
          },
          'url: subdomain-style gateway URLs are not supported',
        ],
      ];
      for (const [route, body, message] of cases) {
        const res = await server.call('POST', route, { key: alice, body });
        assert.equal(res.status, 422, `${route} ${JSON.stringify(body)}`);
        assert.ok(
          res.body.errors.some((e: string) => e.startsWith(message)),
          `${JSON.stringify(res.body.errors)} has ${message}`,
        );
      }
      const patch = await server.call('PATCH', `/api/asset/${uploaded.id}`, { key: alice, body: { name: '' } });
      assert.equal(patch.status, 422);
      assert.match(patch.body.errors[0], /^name: /);
      const err = await refused(sdk.asset.createViaUrl({ name: 'bad', url: 'not a url' }));
      assert.equal(err.statusCode, 422);
      assert.match(JSON.parse(err.body).errors[0], /^url: /);
      // Nothing was created by the refused requests.
      assert.equal((await sdk.asset.getAll()).data?.length, 2);
    });

    it('delete answers 204; the asset is gone, its files too', async () => {
      const folder = path.join(server.dataDir, 'media', 'asset', uploaded.playbackId);
      assert.ok(existsSync(folder), `the asset's files are in ${folder}`);
      const res = await sdk.asset.delete(uploaded.id);
      assert.equal(res.statusCode, 204);
      assert.equal((await refused(sdk.asset.get(uploaded.id))).statusCode, 404);
      assert.ok(!existsSync(folder), 'the files are gone');
      await notFoundPlayback(sdk.playback.get(uploaded.playbackId));
      assert.equal((await fetch(`${server.url}/media/asset/${uploaded.playbackId}/source`)).status, 404);
      assert.deepEqual(
        (await sdk.asset.getAll()).data?.map((a) => a.id),
        [fetched.id],
      );
      assert.equal((await refused(sdk.asset.delete(uploaded.id))).statusCode, 404, 'a second delete');
    });

    it('a URL that cannot be fetched fails the asset with words saying why; its playback is a 422', async () => {
      const res = await sdk.asset.createViaUrl({ name: 'missing', url: origin.url('/missing.mp4') });
      const id = res.twoHundredApplicationJsonData?.asset.id ?? '';
      failedId = id;
      const a = await assetUntil(id, (p) => p === 'failed', 'the asset to fail');
      assert.ok(a.status?.errorMessage, 'the failure is explained');
      assert.equal(a.playbackUrl, undefined);
      const playback = await server.call('GET', `/api/playback/${a.playbackId}`);
      assert.equal(playback.status, 422);
      assert.deepEqual(playback.body, { errors: ['id: the asset is not ready for playback (it is failed)'] });
    });

    it('upload/url with the same Idempotency-Key answers the first asset again; request-upload keeps no answer', async () => {
      const carol = await server.key('carol');
      const once = (path: string, body: unknown) =>
        server.call('POST', path, { key: carol, body, headers: { 'idempotency-key': 'upload-1' } });
      const body = { name: 'once', url: origin.url('/missing.mp4') };
      const first = await once('/api/asset/upload/url', body);
      const again = await once('/api/asset/upload/url', body);
      assert.equal(first.status, 200);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal(again.body.asset.id, first.body.asset.id);
      // Its answer holds the upload URL, a capability the database must not keep: no replay.
      const a = await once('/api/asset/request-upload', { name: 'twice' });
      const b = await once('/api/asset/request-upload', { name: 'twice' });
      assert.notEqual(a.body.asset.id, b.body.asset.id);
      assert.equal(b.headers.get('idempotent-replayed'), null);
    });

    it('webhooks receive asset.created, asset.ready and asset.deleted with the asset as GET shows it', async () => {
      const events = (id: string) => receiver.got.filter((b) => b.payload.asset?.id === id).map((b) => b.event);
      await waitFor(async () => events(uploaded.id).includes('asset.deleted'), 15_000, 'asset.deleted');
      const got = events(uploaded.id);
      for (const e of ['asset.created', 'asset.updated', 'asset.ready', 'asset.deleted'])
        assert.ok(got.includes(e), `${e} in ${got.join(', ')}`);
      for (const b of receiver.got) Asset$inboundSchema.parse(b.payload.asset);
      const ready = receiver.got.find((b) => b.event === 'asset.ready' && b.payload.asset.id === uploaded.id);
      assert.equal(ready?.payload.asset.status.phase, 'ready');
      assert.ok(ready?.payload.asset.playbackUrl.startsWith(`${server.url}/media/asset/${uploaded.playbackId}/`));
      assert.equal(
        receiver.got.find((b) => b.event === 'asset.deleted')?.payload.asset.status.phase,
        'deleted',
        'the deleted asset as it was deleted',
      );
      await waitFor(async () => events(fetched.id).includes('asset.updated'), 15_000, 'the PATCH event');
      await waitFor(async () => events(failedId).includes('asset.failed'), 15_000, 'asset.failed');
      assert.ok(!receiver.got.some((b) => b.payload.task), 'no task event: the webhook asked for asset events');
    });

    it('the OpenAPI document lists every asset route with its schemas', async () => {
      const doc = (await server.call('GET', '/api/openapi.json')).body;
      const ops: [string, string][] = [
        ['/api/asset/request-upload', 'post'],
        ['/api/asset/upload/url', 'post'],
        ['/api/asset', 'get'],
        ['/api/asset/{id}', 'get'],
        ['/api/asset/{id}', 'patch'],
        ['/api/asset/{id}', 'delete'],
        ['/api/playback/{id}', 'get'],
      ];
      for (const [p, method] of ops) {
        const op = doc.paths[p]?.[method];
        assert.ok(op?.summary, `${method} ${p} is documented`);
        assert.ok(op.responses['200'] ?? op.responses['204'], `${method} ${p} documents its answer`);
      }
      const body = doc.paths['/api/asset/upload/url'].post.requestBody.content['application/json'].schema;
      for (const field of ['name', 'url', 'staticMp4', 'playbackPolicy', 'profiles', 'c2pa', 'creatorId'])
        assert.ok(body.properties[field], `upload/url documents ${field}`);
      const asset = doc.paths['/api/asset/{id}'].get.responses['200'].content['application/json'].schema;
      for (const field of ['playbackUrl', 'downloadUrl', 'videoSpec', 'hash', 'size', 'status'])
        assert.ok(asset.properties[field], `the Asset documents ${field}`);
      assert.ok(
        doc.paths['/api/asset/upload/url'].post.parameters.some((p: { name: string }) => p.name === 'idempotency-key'),
      );
    });

    it('never shows the signed URL’s query in a response or a log line', () => {
      const everything = `${seen.join('\n')}\n${server.logs.text}`;
      assert.ok(!everything.includes(URL_SECRET), 'the URL signature leaked');
      assert.ok(!everything.includes(alice) && !everything.includes(bob), 'an API key leaked');
    });
  });
}
