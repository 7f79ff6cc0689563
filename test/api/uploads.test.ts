// Uploads (issue #27 items 3 and 5, spec/API.md section C): the direct PUT and tus 1.0 at the
// URLs of POST /api/asset/request-upload, with the real tus-js-client. The bytes land in the
// built-in store at the asset's source key; a wrong or expired token is a 404, an upload over
// the size limit, or past the owner's total of unfinished uploads, a 413 with nothing kept, a PATCH at the wrong offset a 409; an upload whose
// connection drops at half resumes from the server's offset; the token is in no log line.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { buffer } from 'node:stream/consumers';
import { after, before, describe, it } from 'node:test';
import { assetSourceKey } from '../../src/assets/index.ts';
import { databaseKinds, startTestServer, type TestServer, waitFor } from '../helpers/server.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import {
  bigVideo,
  chunksOf,
  rawRequest,
  requestUpload,
  sha256,
  sha256File,
  tusUpload,
  type UploadUrls,
} from '../helpers/uploads.ts';

const MiB = 1024 * 1024;
const TUS = { 'tus-resumable': '1.0.0' };
const PATCH_TYPE = { 'content-type': 'application/offset+octet-stream' };
const NOT_FOUND = JSON.stringify({ errors: ['not found'] });

/** What the built-in store holds at the asset's source key, or undefined. */
async function stored(server: TestServer, playbackId: string): Promise<Buffer | undefined> {
  const store = server.running.core.builtinStore;
  if (!(await store.stat(assetSourceKey(playbackId)))) return undefined;
  return buffer(await store.read(assetSourceKey(playbackId)));
}

/** The files of the staging folder. */
const staged = (server: TestServer): string[] => {
  const dir = path.join(server.dataDir, 'uploads');
  return existsSync(dir) ? readdirSync(dir) : [];
};

const tusCreate = (u: UploadUrls, length: number) =>
  rawRequest(u.tusEndpoint, { method: 'POST', headers: { ...TUS, 'upload-length': String(length) } });
const tusHead = (location: string) => rawRequest(location, { method: 'HEAD', headers: TUS });
const tusPatch = (location: string, offset: number, body: Buffer, headers: Record<string, string> = {}) =>
  rawRequest(location, {
    method: 'PATCH',
    headers: {
      ...TUS,
      ...PATCH_TYPE,
      'upload-offset': String(offset),
      'content-length': String(body.length),
      ...headers,
    },
    chunks: [body],
  });

for (const { kind, skip } of await databaseKinds()) {
  describe(`uploads (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let key: string;
    const tokens: string[] = [];
    const upload = async () => {
      const u = await requestUpload(server.url, key);
      tokens.push(u.token);
      return u;
    };
    const phase = async (id: string) => (await server.call('GET', `/api/asset/${id}`, { key })).body.status.phase;

    before(async () => {
      // No worker: an uploaded asset stays `waiting` with its bytes in the store.
      server = await startTestServer({
        database: kind,
        roles: { api: true, worker: false },
        settings: { uploadMaxBytes: 64 * MiB },
      });
      key = await server.key('alice');
    });
    after(() => server.stop());

    it('a direct PUT stores the file whole at the source key, answers 200 with no body, and queues the asset', async () => {
      const u = await upload();
      const data = randomBytes(3 * MiB + 17);
      const res = await fetch(u.url, { method: 'PUT', body: data, headers: { 'content-type': 'video/mp4' } });
      assert.equal(res.status, 200);
      assert.equal(await res.text(), '');
      assert.equal(res.headers.get('access-control-allow-origin'), '*');
      assert.equal(sha256((await stored(server, u.asset.playbackId)) ?? Buffer.alloc(0)), sha256(data));
      assert.equal(await phase(u.asset.id), 'waiting');
      assert.deepEqual(staged(server), [], 'nothing is left in the staging folder');
      const mode = statSync(path.join(server.dataDir, 'uploads')).mode & 0o777;
      assert.equal(mode, 0o700, 'the staging folder is private, like the data dir');
      const again = await fetch(u.url, { method: 'PUT', body: 'more' });
      assert.equal(again.status, 404, 'a used upload URL is spent');
      assert.equal(await again.text(), NOT_FOUND);
    });

    it('a direct PUT takes a JSON body as the raw file too (no parser of the API reads it)', async () => {
      const u = await upload();
      const data = Buffer.from('{"not": "parsed"}');
      const res = await fetch(u.url, { method: 'PUT', body: data, headers: { 'content-type': 'application/json' } });
      assert.equal(res.status, 200);
      assert.deepEqual(await stored(server, u.asset.playbackId), data);
    });

    it('tus-js-client uploads a multi-MB file in several PATCHes to an absolute Location', async () => {
      const u = await upload();
      const data = randomBytes(9 * MiB + 5);
      const patches: number[] = [];
      const { url } = await tusUpload(u.tusEndpoint, data, {
        chunkSize: 4 * MiB,
        onBeforeRequest: (req) => {
          if (req.getMethod() === 'PATCH') patches.push(Number(req.getHeader('Upload-Offset')));
        },
      });
      assert.equal(url, `${server.url}/api/asset/upload/tus/${u.asset.id}?token=${u.token}`);
      assert.deepEqual(patches, [0, 4 * MiB, 8 * MiB]);
      assert.equal(sha256((await stored(server, u.asset.playbackId)) ?? Buffer.alloc(0)), sha256(data));
      assert.equal(await phase(u.asset.id), 'waiting');
      assert.deepEqual(staged(server), []);
      const head = await tusHead(url);
      assert.equal(head.status, 404, 'a finished upload is gone');
      assert.equal(head.headers['tus-resumable'], '1.0.0');
    });

    it('OPTIONS says what the server speaks and answers a browser preflight', async () => {
      const u = await upload();
      const res = await rawRequest(u.tusEndpoint, {
        method: 'OPTIONS',
        headers: { origin: 'https://console.example', 'access-control-request-method': 'PATCH' },
      });
      assert.equal(res.status, 204);
      assert.equal(res.headers['tus-version'], '1.0.0');
      assert.equal(res.headers['tus-extension'], 'creation,termination,expiration');
      assert.equal(res.headers['tus-max-size'], String(64 * MiB));
      assert.equal(res.headers['access-control-allow-origin'], '*');
      assert.match(String(res.headers['access-control-allow-methods']), /PATCH/);
      for (const h of ['Tus-Resumable', 'Upload-Length', 'Upload-Offset', 'Upload-Metadata', 'Content-Type'])
        assert.match(String(res.headers['access-control-allow-headers']), new RegExp(h));
      for (const h of ['Location', 'Upload-Offset', 'Upload-Length', 'Tus-Resumable'])
        assert.match(String(res.headers['access-control-expose-headers']), new RegExp(h));
    });

    it('tus: creation, HEAD offset, 409 at the wrong offset, 415, 412, then the last bytes complete it', async () => {
      const u = await upload();
      const data = randomBytes(300_000);
      const created = await tusCreate(u, data.length);
      assert.equal(created.status, 201);
      const location = String(created.headers.location);
      assert.equal(location, `${server.url}/api/asset/upload/tus/${u.asset.id}?token=${u.token}`);
      assert.equal(new Date(String(created.headers['upload-expires'])).getTime() > Date.now(), true);
      assert.equal((await tusPatch(location, 0, data.subarray(0, 100_000))).status, 204);

      const head = await tusHead(location);
      assert.equal(head.status, 200);
      assert.equal(head.headers['upload-offset'], '100000');
      assert.equal(head.headers['upload-length'], '300000');
      assert.equal(head.headers['cache-control'], 'no-store');
      assert.equal(head.headers['tus-resumable'], '1.0.0');
      assert.ok(head.headers['upload-expires']);

      const conflict = await tusPatch(location, 50_000, data.subarray(50_000, 60_000));
      assert.equal(conflict.status, 409);
      assert.match(conflict.body, /Upload-Offset is 50000 but the upload stands at 100000/);
      const wrongType = await tusPatch(location, 100_000, data.subarray(100_000, 110_000), {
        'content-type': 'application/octet-stream',
      });
      assert.equal(wrongType.status, 415);
      const oldVersion = await tusPatch(location, 100_000, data.subarray(100_000, 110_000), {
        'tus-resumable': '0.2.2',
      });
      assert.equal(oldVersion.status, 412);
      assert.equal(oldVersion.headers['tus-version'], '1.0.0');
      assert.equal((await rawRequest(location, { method: 'HEAD' })).status, 412, 'no Tus-Resumable: 412');
      assert.equal((await tusHead(location)).headers['upload-offset'], '100000', 'refused bytes are not kept');

      const last = await tusPatch(location, 100_000, data.subarray(100_000));
      assert.equal(last.status, 204);
      assert.equal(last.headers['upload-offset'], '300000');
      assert.deepEqual(await stored(server, u.asset.playbackId), data);
      assert.equal(await phase(u.asset.id), 'waiting');
    });

    it('tus: creation needs Upload-Length (Upload-Defer-Length is refused) and again gives the same resource', async () => {
      const u = await upload();
      const none = await rawRequest(u.tusEndpoint, { method: 'POST', headers: TUS });
      assert.equal(none.status, 400);
      assert.match(none.body, /Upload-Length is required/);
      const deferred = await rawRequest(u.tusEndpoint, {
        method: 'POST',
        headers: { ...TUS, 'upload-defer-length': '1' },
      });
      assert.equal(deferred.status, 400);
      assert.match(deferred.body, /Upload-Defer-Length is not supported/);
      const bad = await rawRequest(u.tusEndpoint, { method: 'POST', headers: { ...TUS, 'upload-length': '-3' } });
      assert.equal(bad.status, 400);
      const first = await tusCreate(u, 1000);
      await tusPatch(String(first.headers.location), 0, Buffer.alloc(400));
      const second = await tusCreate(u, 2000);
      assert.equal(second.status, 201);
      assert.equal(second.headers.location, first.headers.location);
      const head = await tusHead(String(second.headers.location));
      assert.deepEqual([head.headers['upload-offset'], head.headers['upload-length']], ['0', '2000']);
    });

    it('tus: termination frees the staged bytes; the upload is gone until created again', async () => {
      const u = await upload();
      const location = String((await tusCreate(u, 10_000)).headers.location);
      await tusPatch(location, 0, randomBytes(4000));
      assert.ok(staged(server).includes(u.asset.id));
      const del = await rawRequest(location, { method: 'DELETE', headers: TUS });
      assert.equal(del.status, 204);
      assert.equal(del.headers['tus-resumable'], '1.0.0');
      assert.deepEqual(
        staged(server).filter((f) => f.startsWith(u.asset.id)),
        [],
        'the bytes and the sidecar are freed',
      );
      assert.equal((await tusHead(location)).status, 404);
      assert.equal((await tusPatch(location, 0, Buffer.alloc(10))).status, 404);
      assert.equal((await rawRequest(location, { method: 'DELETE', headers: TUS })).status, 404);
      assert.equal(await phase(u.asset.id), 'uploading', 'the asset waits for another try until its URL expires');
      assert.equal((await tusCreate(u, 10)).status, 201, 'the URL still creates an upload');
    });

    it('a wrong token, none, or another asset’s is a 404 on every upload route', async () => {
      const [a, b] = [await upload(), await upload()];
      const location = String((await tusCreate(a, 100)).headers.location);
      const wrong = location.replace(a.token, b.token);
      const bogus = `${server.url}/api/asset/upload/tus/${a.asset.id}?token=${'x'.repeat(43)}`;
      const answers = [
        await rawRequest(`${server.url}/api/asset/upload/direct?token=nope`, {
          method: 'PUT',
          chunks: [Buffer.from('x')],
        }),
        await rawRequest(`${server.url}/api/asset/upload/direct`, { method: 'PUT', chunks: [Buffer.from('x')] }),
        await rawRequest(`${server.url}/api/asset/upload/tus?token=nope`, {
          method: 'POST',
          headers: { ...TUS, 'upload-length': '10' },
        }),
        await tusHead(wrong),
        await tusHead(bogus),
        await tusPatch(wrong, 0, Buffer.alloc(10)),
        await rawRequest(wrong, { method: 'DELETE', headers: TUS }),
      ];
      assert.deepEqual(
        answers.map((r) => r.status),
        [404, 404, 404, 404, 404, 404, 404],
      );
      for (const r of answers.filter((r) => r.body !== '')) assert.equal(r.body, NOT_FOUND);
      assert.equal((await tusHead(location)).status, 200, 'the right token still works');
    });

    it('the upload routes are in the OpenAPI document, with summaries', async () => {
      const doc = (await server.call('GET', '/api/openapi.json')).body;
      const ops = [
        doc.paths['/api/asset/upload/direct']?.put,
        doc.paths['/api/asset/upload/tus']?.post,
        doc.paths['/api/asset/upload/tus']?.options,
        doc.paths['/api/asset/upload/tus/{id}']?.patch,
        doc.paths['/api/asset/upload/tus/{id}']?.delete,
      ];
      for (const op of ops) assert.ok(op?.summary, 'each is documented with a summary');
      const put = doc.paths['/api/asset/upload/direct'].put;
      assert.ok(put.parameters.some((p: { name: string; in: string }) => p.name === 'token' && p.in === 'query'));
    });

    it('no upload token is in any log line; request lines show them scrubbed', () => {
      assert.ok(tokens.length > 5);
      for (const token of tokens) assert.ok(!server.logs.text.includes(token), 'a token was logged');
      assert.ok(
        server.logs.lines.some((l) => l.includes('/api/asset/upload/tus/') && l.includes('token=***')),
        'the request log names the upload URL, without its token',
      );
    });
  });
}

describe('upload limits (413) and expiry', () => {
  let server: TestServer;
  let key: string;
  const MAX = MiB;

  before(async () => {
    server = await startTestServer({ roles: { api: true, worker: false }, settings: { uploadMaxBytes: MAX } });
    key = await server.key('alice');
  });
  after(() => server.stop());

  it('a direct PUT with a Content-Length over the limit is a 413 before its body is read', async () => {
    const u = await requestUpload(server.url, key);
    const res = await rawRequest(u.url, {
      method: 'PUT',
      headers: { 'content-length': String(MAX + 1) },
      // Only the first chunk of the body is ever sent: the answer comes first.
      chunks: chunksOf(1, 1024),
    });
    assert.equal(res.status, 413);
    assert.match(res.body, /larger than the 1048576 bytes allowed/);
    assert.equal(res.headers.connection, 'close');
    assert.equal(await stored(server, u.asset.playbackId), undefined);
    assert.deepEqual(staged(server), []);
  });

  it('a chunked direct PUT that grows past the limit is a 413 and nothing is kept', async () => {
    const u = await requestUpload(server.url, key);
    const res = await rawRequest(u.url, { method: 'PUT', chunks: chunksOf(40, 64 * 1024) });
    assert.equal(res.status, 413);
    assert.equal(await stored(server, u.asset.playbackId), undefined);
    assert.deepEqual(staged(server), []);
    const fits = await rawRequest(u.url, { method: 'PUT', chunks: chunksOf(16, 64 * 1024) });
    assert.equal(fits.status, 200, 'a file of exactly the limit is taken');
    assert.equal((await stored(server, u.asset.playbackId))?.length, MAX);
  });

  it('tus: a length over Tus-Max-Size, or bytes past Upload-Length, are a 413 and none of them is kept', async () => {
    const u = await requestUpload(server.url, key);
    assert.equal((await tusCreate(u, MAX + 1)).status, 413);
    const location = String((await tusCreate(u, 1000)).headers.location);
    assert.equal((await tusPatch(location, 0, Buffer.alloc(600))).status, 204);
    assert.equal((await tusPatch(location, 600, Buffer.alloc(401))).status, 413, 'a Content-Length past the end');
    const chunked = await rawRequest(location, {
      method: 'PATCH',
      headers: { ...TUS, ...PATCH_TYPE, 'upload-offset': '600' },
      chunks: chunksOf(3, 200),
    });
    assert.equal(chunked.status, 413, 'a chunked body past the end');
    assert.equal((await tusHead(location)).headers['upload-offset'], '600');
  });

  it('an expired upload URL is a 404; the sweep fails its asset and frees its bytes', async () => {
    // Upload URLs valid for 2 s; the server's own sweep then runs every second.
    const brief = await startTestServer({
      roles: { api: true, worker: false },
      settings: { uploadUrlTtlMs: 2000 },
    });
    try {
      const briefKey = await brief.key('alice');
      const { u, location } = await stagedBeforeExpiry(brief, briefKey);
      await waitFor(async () => (await tusHead(location)).status === 404, 20_000, 'the URL to expire');
      assert.equal((await rawRequest(u.url, { method: 'PUT', chunks: [Buffer.from('late')] })).status, 404);

      // The sweep fails the asset, then frees its bytes.
      const asset = await waitFor(
        async () => {
          const a = (await brief.call('GET', `/api/asset/${u.asset.id}`, { key: briefKey })).body;
          return a.status.phase === 'failed' && staged(brief).length === 0 ? a : undefined;
        },
        20_000,
        'the sweep to fail the asset and free its bytes',
      );
      assert.match(asset.status.errorMessage, /expired/);
    } finally {
      await brief.stop();
    }
  });
});

describe("an owner's staged upload bytes (MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER)", () => {
  let server: TestServer;
  let alice: string;
  let bob: string;
  const CAP = 2 * MiB;
  const refusedForCap = (res: { status: number; body: string }, what: string) => {
    assert.equal(res.status, 413, what);
    assert.match(res.body, /may hold at most 2097152 bytes \(MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER\)/, what);
    assert.match(res.body, /finish or delete pending uploads/, what);
  };

  before(async () => {
    server = await startTestServer({
      roles: { api: true, worker: false },
      settings: { uploadMaxBytes: MiB, uploadMaxStagedBytesPerOwner: CAP },
    });
    alice = await server.key('alice');
    bob = await server.key('bob');
  });
  after(() => server.stop());

  it('two pending uploads of the largest size fill it: a third is refused at creation, as a direct PUT, until one finishes or goes', async () => {
    const [first, second, third] = [
      await requestUpload(server.url, alice),
      await requestUpload(server.url, alice),
      await requestUpload(server.url, alice),
    ];
    const firstAt = String((await tusCreate(first, MiB)).headers.location);
    const secondAt = String((await tusCreate(second, MiB)).headers.location);
    assert.equal((await tusPatch(secondAt, 0, Buffer.alloc(1000))).status, 204);

    refusedForCap(await tusCreate(third, 1), 'tus: at creation, by its Upload-Length');
    const declared = await rawRequest(third.url, {
      method: 'PUT',
      headers: { 'content-length': '1' },
      chunks: [Buffer.from('x')],
    });
    refusedForCap(declared, 'a direct PUT by its Content-Length');
    refusedForCap(await rawRequest(third.url, { method: 'PUT', chunks: chunksOf(2, 1024) }), 'a streamed direct PUT');
    assert.deepEqual(
      staged(server).filter((f) => f.startsWith(third.asset.id)),
      [],
      'a refused upload stages nothing',
    );
    const other = await requestUpload(server.url, bob);
    assert.equal((await tusCreate(other, MiB)).status, 201, "another owner's uploads count apart");

    // Ended with tus termination: its share is free again.
    assert.equal((await rawRequest(firstAt, { method: 'DELETE', headers: TUS })).status, 204);
    const thirdAt = String((await tusCreate(third, MiB)).headers.location);
    refusedForCap(await tusCreate(first, 1), 'the terminated upload, created again, counts again');

    // Finished: the bytes are in the store, no longer staged.
    assert.equal((await tusPatch(secondAt, 1000, Buffer.alloc(MiB - 1000))).status, 204);
    assert.equal((await rawRequest(first.url, { method: 'PUT', chunks: chunksOf(16, 64 * 1024) })).status, 200);
    assert.equal((await stored(server, first.asset.playbackId))?.length, MiB);

    // Deleted: its share goes with its staged bytes, which the server's sweep frees (within a
    // minute; here at once): until then they are on the disk, and count.
    const [fourth, fifth] = [await requestUpload(server.url, alice), await requestUpload(server.url, alice)];
    assert.equal((await tusCreate(fourth, MiB)).status, 201);
    refusedForCap(await tusCreate(fifth, MiB), 'the third and fourth uploads hold it all');
    assert.equal((await server.call('DELETE', `/api/asset/${third.asset.id}`, { key: alice })).status, 204);
    refusedForCap(await tusCreate(fifth, MiB), 'the deleted upload is still staged');
    assert.ok(staged(server).includes(third.asset.id));
    await server.running.uploadSweep?.sweep();
    assert.ok(!staged(server).includes(third.asset.id), 'the sweep freed it');
    assert.equal((await tusCreate(fifth, MiB)).status, 201);
    assert.equal((await tusHead(thirdAt)).status, 404);
  });
});

/**
 * An upload with 100 of its 1000 bytes staged while its URL is still valid. A host slow
 * enough to let the brief URL expire before the PATCH lands gets a fresh one.
 */
async function stagedBeforeExpiry(server: TestServer, key: string) {
  for (let attempt = 1; ; attempt++) {
    const u = await requestUpload(server.url, key);
    const created = await tusCreate(u, 1000);
    const location = String(created.headers.location);
    const patched = created.status === 201 ? (await tusPatch(location, 0, Buffer.alloc(100))).status : created.status;
    if (patched === 204) {
      assert.ok(staged(server).includes(u.asset.id), 'the bytes are staged');
      return { u, location };
    }
    assert.equal(patched, 404, 'only an expired URL answers otherwise');
    assert.ok(attempt < 5, 'five upload URLs expired before their first PATCH');
  }
}

describe('a 50 MB tus upload whose connection drops at half', () => {
  let server: TestServer;
  let proxy: TcpProxy;
  let key: string;

  before(async () => {
    // Every URL the service gives points at the proxy, the Location of the upload included.
    proxy = await startTcpProxy();
    server = await startTestServer({ settings: { publicUrl: proxy.url } });
    proxy.target = { host: '127.0.0.1', port: Number(new URL(server.url).port) };
    key = await server.key('alice');
  });
  after(async () => {
    await server.stop();
    await proxy.close();
  });

  it('resumes from the server’s offset, and the asset’s sha256 is the file’s', async () => {
    const file = await bigVideo(50);
    const size = statSync(file).size;
    const u = await requestUpload(server.url, key);
    assert.ok(u.tusEndpoint.startsWith(proxy.url));
    let cut = false;
    proxy.breakAt(proxy.sent + Math.floor(size / 2), 'cut', () => {
      cut = true;
    });
    const patches: number[] = [];
    await tusUpload(u.tusEndpoint, file, {
      onBeforeRequest: (req) => {
        if (req.getMethod() === 'PATCH') patches.push(Number(req.getHeader('Upload-Offset')));
      },
    });
    assert.ok(cut, 'the connection was cut');
    assert.equal(patches.length, 2, `one PATCH before the cut, one after: ${patches}`);
    assert.equal(patches[0], 0);
    assert.ok((patches[1] ?? 0) > size * 0.4, `the second PATCH resumed at ${patches[1]} of ${size}`);
    assert.ok(proxy.sent < size * 1.2, 'the first half was not sent again');

    const ready = await waitFor(
      async () => {
        const a = (await server.call('GET', `/api/asset/${u.asset.id}`, { key })).body;
        if (a.status.phase === 'failed') assert.fail(`the asset failed: ${a.status.errorMessage}`);
        return a.status.phase === 'ready' ? a : undefined;
      },
      120_000,
      'the asset to be ready',
    );
    const sha = ready.hash.find((h: { algorithm: string }) => h.algorithm === 'sha256')?.hash;
    assert.equal(sha, await sha256File(file));
    assert.equal(ready.size, size);
  });
});
