// What a client reads before it offers a feature, and what it reads after a task ended:
// GET /api/capabilities says C2PA signing and IPFS exports to the server's space are off on a
// default server, naming the settings that turn them on, and where the server's own hls.js
// is; that script answers as JavaScript with no key from any origin; GET /api/task/{id}/history
// gives an ended task's stored events, the ones its webhooks got, and another owner none.

import assert from 'node:assert/strict';
import { gunzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { capabilitiesOf } from '../../src/api/capabilities-routes.ts';
import { startTestServer, type TestServer, transcodeBody } from '../helpers/server.ts';

describe('capabilities, the player script and stored task events', () => {
  let server: TestServer;
  let alice: string;
  let bob: string;
  before(async () => {
    server = await startTestServer({ roles: { api: true, worker: false } });
    alice = await server.key('alice');
    bob = await server.key('bob');
  });
  after(() => server.stop());

  it('says what a default server cannot do, and which settings enable it', async () => {
    const res = await server.call('GET', '/api/capabilities', { key: alice });
    assert.equal(res.status, 200);
    assert.equal(res.body.c2pa.enabled, false);
    assert.deepEqual(res.body.c2pa.settings, ['MEDIAPLANE_C2PA_KEY', 'MEDIAPLANE_C2PA_CERTS']);
    assert.match(res.body.c2pa.about, /MEDIAPLANE_C2PA_KEY and MEDIAPLANE_C2PA_CERTS/);
    assert.equal(res.body.ipfsExport.enabled, false);
    assert.equal(res.body.ipfsExport.ownProof, true, 'an export with its own proof is still accepted');
    assert.deepEqual(res.body.ipfsExport.settings, ['MEDIAPLANE_DWEB_EXPORT_PROOF']);
    assert.equal(res.body.player.hlsJsUrl, `${server.url}/player/hls.min.js`);
    // What it says is what the API does: c2pa: true is refused.
    const signed = await server.call('POST', '/api/asset/request-upload', {
      key: alice,
      body: { name: 'x', staticMp4: true, c2pa: true },
    });
    assert.equal(signed.status, 422);
    assert.equal((await server.call('GET', '/api/capabilities')).status, 401, 'a key, as every /api route');
  });

  it('says a configured server can, without showing any setting value', () => {
    const on = capabilitiesOf({
      rules: { c2paConfigured: true, validateDwebProof: async () => undefined },
      exportProofConfigured: true,
      publicBase: () => 'https://media.example',
    });
    assert.equal(on.c2pa.enabled, true);
    assert.equal(on.ipfsExport.enabled, true);
    assert.equal(on.player.hlsJsUrl, 'https://media.example/player/hls.min.js');
  });

  it('serves its own hls.js at a stable path, to any page, gzipped when asked, 304 when unchanged', async () => {
    const res = await fetch(`${server.url}/player/hls.min.js`, { headers: { origin: 'https://blog.example' } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/javascript/);
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    const js = await res.text();
    assert.ok(js.length > 100_000, `${js.length} bytes`);
    assert.match(js, /Hls/);
    const etag = res.headers.get('etag') ?? '';
    assert.match(etag, /^"hls\.js-\d+\.\d+\.\d+"$/);
    const again = await fetch(`${server.url}/player/hls.min.js`, { headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    // fetch() decodes gzip itself; node:http does not, so the raw bytes are compared here.
    const raw = await import('node:http').then(
      (http) =>
        new Promise<{ encoding: string | undefined; body: Buffer }>((resolve, reject) => {
          http
            .get(`${server.url}/player/hls.min.js`, { headers: { 'accept-encoding': 'gzip' } }, (r) => {
              const chunks: Buffer[] = [];
              r.on('data', (c: Buffer) => chunks.push(c));
              r.on('end', () => resolve({ encoding: r.headers['content-encoding'], body: Buffer.concat(chunks) }));
            })
            .on('error', reject);
        }),
    );
    assert.equal(raw.encoding, 'gzip');
    assert.ok(raw.body.length < js.length / 2);
    assert.equal(gunzipSync(raw.body).toString('utf8'), js);
  });

  it("keeps an ended task's events, as its webhooks got them, for its owner only", async () => {
    const created = await server.call('POST', '/api/transcode', { key: alice, body: transcodeBody() });
    const id: string = created.body.id;
    assert.equal((await server.call('POST', `/api/task/${id}/cancel`, { key: alice })).status, 200);
    const res = await server.call('GET', `/api/task/${id}/history`, { key: alice });
    assert.equal(res.status, 200);
    const events = res.body as { id: string; event: string; createdAt: number; task: any }[];
    assert.deepEqual(
      events.map((e) => [e.event, e.task.status.phase]),
      [
        ['task.spawned', 'waiting'],
        ['task.updated', 'cancelled'],
      ],
    );
    assert.ok(events[0] && events[1] && events[0].createdAt <= events[1].createdAt, 'oldest first');
    assert.equal(events[0]?.task.id, id);
    assert.equal(events[0]?.task.params['transcode-file'].storage.credentials.secretAccessKey, '***');
    assert.doesNotMatch(JSON.stringify(res.body), /sEcReT/);
    const last = await server.call('GET', `/api/task/${id}/history?limit=1`, { key: alice });
    assert.deepEqual(
      last.body.map((e: { event: string }) => e.event),
      ['task.updated'],
      'limit keeps the newest',
    );
    assert.equal((await server.call('GET', `/api/task/${id}/history`, { key: bob })).status, 404);
    assert.equal((await server.call('GET', '/api/task/nope/history', { key: alice })).status, 404);
  });
});
