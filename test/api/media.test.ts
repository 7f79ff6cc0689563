// `/media/<key>` (issue #27): what the built-in store holds, served to players with Range,
// validators, CORS and cache lifetimes, from the folder store and from a bucket (streamed
// through or redirected to a presigned URL); a key that climbs out of its place is a 404
// however it is spelled.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { SettingKey } from '../../src/config/index.ts';
import type { BuiltinStore } from '../../src/storage/builtin/index.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const signal = new AbortController().signal;
let scratch: string;
before(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'mp-media-'));
});
after(() => rm(scratch, { recursive: true, force: true }));

/** 1000 bytes whose every position differs from its neighbours, so a wrong range shows. */
const SEGMENT = Buffer.from(Array.from({ length: 1000 }, (_, i) => (i * 7 + 3) % 251));
const PLAYLIST = '#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-ENDLIST\n';

/** Files of every served kind under `task/<uuid>/`, put through a writer as the pipeline does. */
async function putFiles(store: BuiltinStore): Promise<string> {
  const prefix = `task/${randomUUID()}/`;
  const writer = store.writer(prefix);
  const files: Record<string, Buffer | string> = {
    'hls/index.m3u8': PLAYLIST,
    'hls/360p0/0.ts': SEGMENT,
    'hls/360p0/a b.ts': 'spaced',
    'mp4/360p0.mp4': 'mp4',
    'fmp4/0.m4s': 'm4s',
    'fmp4/a.m4a': 'm4a',
    'dash/index.mpd': '<MPD/>',
    'hls/thumbnails/thumbnails.vtt': 'WEBVTT\n',
    'hls/thumbnails/keyframes_0.jpg': 'jpg',
    'poster.png': 'png',
    'meta.json': '{}',
    'empty.ts': '',
  };
  for (const [key, body] of Object.entries(files)) {
    const file = path.join(scratch, randomUUID());
    await writeFile(file, body);
    await writer.put(key, { file }, { contentType: 'application/octet-stream', signal });
  }
  await writer.close(signal);
  return prefix;
}

type Served = { server: TestServer; prefix: string; base: string };

/** For the suite it is called in: a server (API role) on `settings`, holding the files of putFiles. */
function served(settings: () => Promise<Partial<Record<SettingKey, unknown>>> = async () => ({})): () => Served {
  let state: Served | undefined;
  before(async () => {
    const server = await startTestServer({ roles: { api: true, worker: false }, settings: await settings() });
    const prefix = await putFiles(server.running.core.builtinStore);
    state = { server, prefix, base: `${server.url}/media/${prefix}` };
  });
  // Every test here awaits its answers, so nothing is in flight: connections left open are
  // closed first. Without it, the bucket proxy's server held one connection (no response open
  // on it) until the 72 s keep-alive timeout before its graceful close returned.
  after(() => {
    state?.server.running.app?.server.closeAllConnections();
    return state?.server.stop();
  });
  return () => {
    assert.ok(state, 'the server started');
    return state;
  };
}

/** A request sent byte for byte, so `..` and `//` reach the server as written (fetch would resolve them). */
async function raw(url: string, target: string): Promise<{ status: number; text: string }> {
  const { port } = new URL(url);
  const socket = net.connect(Number(port), '127.0.0.1');
  // Not half-closed: the server closes after its answer (Connection: close).
  socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  const chunks: Buffer[] = [];
  for await (const c of socket) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('latin1');
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]), text };
}

const get = (url: string, headers: Record<string, string> = {}, method = 'GET') => fetch(url, { method, headers });
const bytes = async (res: Response) => Buffer.from(await res.arrayBuffer());

/** The checks every kind of store must pass, proxying: `base` is `<server>/media/<prefix>`. */
function servingChecks(ctx: () => Served): void {
  it('serves a segment whole with its length, type, validators, cache lifetime and CORS headers', async () => {
    const { base } = ctx();
    const res = await get(`${base}hls/360p0/0.ts`, { origin: 'https://player.example' });
    assert.equal(res.status, 200);
    assert.ok((await bytes(res)).equals(SEGMENT));
    assert.equal(res.headers.get('content-length'), '1000');
    assert.equal(res.headers.get('content-type'), 'video/mp2t');
    assert.equal(res.headers.get('accept-ranges'), 'bytes');
    assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.match(res.headers.get('etag') ?? '', /^"[^"]+"$/);
    assert.ok(Date.parse(res.headers.get('last-modified') ?? '') > Date.now() - 600_000);
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
    for (const h of ['Content-Length', 'Content-Range', 'Accept-Ranges', 'ETag'])
      assert.ok(res.headers.get('access-control-expose-headers')?.includes(h), `exposes ${h}`);
  });

  it('names each kind by its extension; playlists are cached for seconds only', async () => {
    const { base } = ctx();
    const kinds: [string, string, string][] = [
      ['hls/index.m3u8', 'application/vnd.apple.mpegurl', 'public, max-age=5'],
      ['dash/index.mpd', 'application/dash+xml', 'public, max-age=5'],
      ['mp4/360p0.mp4', 'video/mp4', 'public, max-age=31536000, immutable'],
      ['fmp4/0.m4s', 'video/iso.segment', 'public, max-age=31536000, immutable'],
      ['fmp4/a.m4a', 'audio/mp4', 'public, max-age=31536000, immutable'],
      ['hls/thumbnails/thumbnails.vtt', 'text/vtt; charset=utf-8', 'public, max-age=31536000, immutable'],
      ['hls/thumbnails/keyframes_0.jpg', 'image/jpeg', 'public, max-age=31536000, immutable'],
      ['poster.png', 'image/png', 'public, max-age=31536000, immutable'],
      ['meta.json', 'application/json', 'public, max-age=31536000, immutable'],
    ];
    for (const [key, type, cache] of kinds) {
      const res = await get(base + key);
      await res.arrayBuffer();
      assert.equal(res.status, 200, key);
      assert.equal(res.headers.get('content-type'), type, key);
      assert.equal(res.headers.get('cache-control'), cache, key);
    }
    const playlist = await get(`${base}hls/index.m3u8`);
    assert.equal(await playlist.text(), PLAYLIST);
    const spaced = await get(`${base}hls/360p0/a%20b.ts`);
    assert.equal(await spaced.text(), 'spaced', 'a key segment is percent-decoded once, as mediaUrl encodes it');
    const empty = await get(`${base}empty.ts`);
    assert.equal(empty.status, 200);
    assert.equal((await bytes(empty)).length, 0);
  });

  it('answers single ranges 206 with Content-Range, and ranges past the end 416', async () => {
    const { base } = ctx();
    const url = `${base}hls/360p0/0.ts`;
    const cases: [string, number, number][] = [
      ['bytes=10-19', 10, 19],
      ['bytes=990-', 990, 999],
      ['bytes=-5', 995, 999],
      ['bytes=995-5000', 995, 999],
      ['bytes=0-0', 0, 0],
      ['bytes=-5000', 0, 999],
    ];
    for (const [range, start, end] of cases) {
      const res = await get(url, { range });
      assert.equal(res.status, 206, range);
      assert.equal(res.headers.get('content-range'), `bytes ${start}-${end}/1000`, range);
      assert.equal(res.headers.get('content-length'), String(end - start + 1), range);
      assert.ok((await bytes(res)).equals(SEGMENT.subarray(start, end + 1)), range);
    }
    for (const range of ['bytes=1000-', 'bytes=5000-6000', 'bytes=-0']) {
      const res = await get(url, { range });
      assert.equal(res.status, 416, range);
      assert.equal(res.headers.get('content-range'), 'bytes */1000', range);
      const body = (await res.json()) as { errors: string[] };
      assert.match(body.errors[0] ?? '', /outside the file/);
    }
    // Several ranges, and ranges that are not valid, may be answered with the whole file.
    for (const range of ['bytes=0-1,5-6', 'bytes=9-2', 'items=0-1', 'bytes=x-']) {
      const res = await get(url, { range });
      assert.equal(res.status, 200, range);
      assert.equal((await bytes(res)).length, 1000, range);
    }
  });

  it('answers HEAD with the headers and no body', async () => {
    const { base } = ctx();
    const res = await get(`${base}hls/360p0/0.ts`, { range: 'bytes=0-9' }, 'HEAD');
    assert.equal(res.status, 200, 'Range is for GET');
    assert.equal(res.headers.get('content-length'), '1000');
    assert.equal(res.headers.get('content-type'), 'video/mp2t');
    assert.ok(res.headers.get('etag'));
    assert.equal((await bytes(res)).length, 0);
    const missing = await get(`${base}hls/none.ts`, {}, 'HEAD');
    assert.equal(missing.status, 404);
  });

  it('answers 304 to a client holding the version, and honours If-Range', async () => {
    const { base } = ctx();
    const url = `${base}hls/360p0/0.ts`;
    const first = await get(url);
    await first.arrayBuffer();
    const etag = first.headers.get('etag') ?? '';
    const lastModified = first.headers.get('last-modified') ?? '';
    for (const inm of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const res = await get(url, { 'if-none-match': inm });
      assert.equal(res.status, 304, inm);
      assert.equal(res.headers.get('etag'), etag);
      assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.equal((await bytes(res)).length, 0);
    }
    const changed = await get(url, { 'if-none-match': '"other"' });
    assert.equal(changed.status, 200);
    await changed.arrayBuffer();
    const since = await get(url, { 'if-modified-since': lastModified });
    assert.equal(since.status, 304);
    const ranged = await get(url, { range: 'bytes=0-9', 'if-range': etag });
    assert.equal(ranged.status, 206, 'If-Range with the current ETag: the range');
    await ranged.arrayBuffer();
    const byDate = await get(url, { range: 'bytes=0-9', 'if-range': lastModified });
    assert.equal(byDate.status, 206, 'If-Range with the Last-Modified date: the range');
    await byDate.arrayBuffer();
    const stale = await get(url, { range: 'bytes=0-9', 'if-range': '"an-older-version"' });
    assert.equal(stale.status, 200, 'If-Range with another ETag: the whole file');
    assert.equal((await bytes(stale)).length, 1000);
  });

  it('answers a CORS preflight for GET, HEAD and the Range header', async () => {
    const { base } = ctx();
    const res = await fetch(`${base}hls/360p0/0.ts`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://player.example',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'range',
      },
    });
    assert.equal(res.status, 204);
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
    assert.match(res.headers.get('access-control-allow-methods') ?? '', /GET.*HEAD/);
    assert.match(res.headers.get('access-control-allow-headers') ?? '', /\bRange\b/);
  });

  it('answers 404 for a missing key and every spelling of a path trick', async () => {
    const { server, prefix } = ctx();
    const id = prefix.split('/')[1] ?? '';
    const tricks = [
      `/media/${prefix}hls/none.ts`,
      '/media/',
      `/media/task/${id}`,
      `/media/task/${id}/hls/`,
      `/media/task%2f${id}%2fhls%2f360p0%2f0.ts`,
      `/media/task/${id}/hls/%252e%252e/hls/360p0/0.ts`,
      `/media/task/${id}/hls/360p0%5c0.ts`,
      `/media/task/${id}/hls/360p0/0.ts%00`,
      `/media/.partial/x`,
    ];
    for (const t of tricks) {
      const res = await fetch(server.url + t);
      assert.equal(res.status, 404, t);
      assert.deepEqual(await res.json(), { errors: ['not found'] }, t);
      assert.equal(res.headers.get('access-control-allow-origin'), '*', t);
    }
    assert.equal((await fetch(`${server.url}/media`)).status, 404);
    // A malformed escape stops Fastify's router before any route: a missing file, in the API's shape.
    const bad = await fetch(`${server.url}/media/task/${id}/hls/%zz/0.ts`);
    assert.equal(bad.status, 404);
    assert.deepEqual(await bad.json(), { errors: ['not found'] });
    // Sent as written (fetch resolves `..` and `%2e%2e` as URLs do): each would name the
    // segment, or a file of the data dir, if it were resolved.
    const rawTricks = [
      `/media/task/${id}/hls/%2e%2e/hls/360p0/0.ts`,
      `/media/task/${id}/hls/%2E%2E/hls/360p0/0.ts`,
      `/media/task/${id}/hls/.%2e/hls/360p0/0.ts`,
      `/media/task/${id}/hls/../hls/360p0/0.ts`,
      `/media/task/${id}/hls/./360p0/0.ts`,
      `/media/task/${id}//hls/360p0/0.ts`,
      `/media//task/${id}/hls/360p0/0.ts`,
      `/media/task/${id}/hls\\360p0\\0.ts`,
      '/media/../../../../etc/passwd',
      '/media/..%2f..%2f..%2fetc%2fpasswd',
      '/media/task/../../secret.txt',
    ];
    for (const t of rawTricks) {
      const res = await raw(server.url, t);
      assert.equal(res.status, 404, t);
      assert.ok(res.text.endsWith('{"errors":["not found"]}'), t);
    }
    const sane = await raw(server.url, `/media/task/${id}/hls/360p0/0.ts`);
    assert.equal(sane.status, 200, 'the same file, asked plainly');
  });
  it("serves nothing outside assets and transcode outputs: a split task's pieces are a 404 without a trace", async () => {
    const { server } = ctx();
    const store = server.running.core.builtinStore;
    const taskId = randomUUID();
    // What a split task keeps while it runs: its copy of an input that answers no ranges (maybe
    // fetched from a signed URL), a piece's rendition; and keys no feature writes today.
    const internal = [`pieces/${taskId}/source`, `pieces/${taskId}/chunk-0/360p0.mp4`, 'x.ts', `other/${taskId}/a.ts`];
    for (const key of internal) {
      const file = path.join(scratch, randomUUID());
      await writeFile(file, SEGMENT);
      await store.putFile(key, file, { contentType: 'application/octet-stream', signal });
      assert.ok(await store.stat(key), `${key} is in the store`);
      for (const method of ['GET', 'HEAD']) {
        const res = await fetch(`${server.url}/media/${key}`, { method, redirect: 'manual' });
        assert.equal(res.status, 404, `${method} ${key}`);
        assert.equal(res.headers.get('location'), null, `${method} ${key}`);
        if (method === 'GET') assert.deepEqual(await res.json(), { errors: ['not found'] }, key);
      }
    }
  });

  it("says nosniff on /media's every answer (whole, ranged, not modified, missing, preflights) and the server's", async () => {
    const { base, server } = ctx();
    const url = `${base}hls/360p0/0.ts`;
    const etag = (await get(url)).headers.get('etag') ?? '';
    const answers = [
      await get(url),
      await get(url, { range: 'bytes=0-9' }),
      await get(url, { 'if-none-match': etag }),
      await get(url, {}, 'HEAD'),
      await get(url, { range: 'bytes=5000-' }),
      await get(`${base}hls/none.ts`),
      await get(`${server.url}/media/task/x/%zz/0.ts`),
      await get(url, { origin: 'https://player.example', 'access-control-request-method': 'GET' }, 'OPTIONS'),
    ];
    assert.deepEqual(
      answers.map((r) => r.status),
      [200, 206, 304, 200, 416, 404, 404, 204],
    );
    for (const res of answers) {
      await res.arrayBuffer();
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff', `the ${res.status} answer`);
    }
    // And every other answer of the server: probes, the API's refusals, an unknown path, and
    // what Node's HTTP parser refuses before any route sees it.
    for (const p of ['/healthz', '/api/task', '/nope', '/api/openapi.json']) {
      const res = await get(server.url + p);
      await res.arrayBuffer();
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff', p);
    }
    // A Content-Length that is no number, slipped into raw's request line.
    const refused = await raw(server.url, '/ HTTP/1.1\r\nContent-Length: nope\r\nX:');
    assert.equal(refused.status, 400);
    assert.match(refused.text, /\r\nx-content-type-options: nosniff\r\n/i);
  });

  it('streams a large file, and stops reading it when the client goes away', async () => {
    const { server, prefix } = ctx();
    const store = server.running.core.builtinStore;
    const size = 32 * 1024 * 1024;
    const file = path.join(scratch, randomUUID());
    await writeFile(file, Buffer.alloc(size, 1));
    await store.putFile(`${prefix}mp4/big.mp4`, file, { contentType: 'video/mp4', signal });
    // Whichever way the store sends bodies: its own writeTo (the folder store), or read's stream.
    let stopped: Promise<string> | undefined;
    const { read, writeTo } = store;
    if (writeTo)
      store.writeTo = (...args) => {
        const sent = writeTo.apply(store, args);
        stopped = sent.then(
          () => 'written to the end',
          () => 'stopped',
        );
        return sent;
      };
    else
      store.read = async (...args) => {
        const stream = await read.apply(store, args);
        stopped = new Promise((r) =>
          stream.once('close', () => r(stream.readableEnded ? 'read to the end' : 'stopped')),
        );
        return stream;
      };
    try {
      const ctrl = new AbortController();
      const res = await fetch(`${server.url}/media/${prefix}mp4/big.mp4`, { signal: ctrl.signal });
      assert.equal(res.headers.get('content-length'), String(size));
      await res.body?.getReader().read();
      ctrl.abort();
      assert.equal(await stopped, 'stopped');
    } finally {
      store.read = read;
      if (writeTo) store.writeTo = writeTo;
    }
  });
}

describe('/media from the folder store', () => {
  const ctx = served();
  before(() => writeFile(path.join(ctx().server.dataDir, 'secret.txt'), 'not for the web'));
  servingChecks(ctx);

  it('offers a file without an extension (as an asset source is kept) as a download', async () => {
    const { server, prefix } = ctx();
    const store = server.running.core.builtinStore;
    const file = path.join(scratch, randomUUID());
    await writeFile(file, 'source bytes');
    // Under the task's prefix: an `asset/...` key is served by its asset's playback policy (issue #28).
    await store.putFile(`${prefix}source`, file, { contentType: 'video/mp4', signal, move: true });
    const res = await fetch(`${server.url}/media/${prefix}source`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/octet-stream');
    assert.equal(res.headers.get('content-disposition'), 'attachment');
    assert.equal(await res.text(), 'source bytes');
  });

  it('is documented in the OpenAPI document, and writes no log line per request', async () => {
    const { server } = ctx();
    const doc = await server.call('GET', '/api/openapi.json');
    const op = doc.body.paths['/media/*'];
    assert.ok(op?.get?.summary, 'GET /media/* has a summary');
    assert.ok(op.get.responses['206'] && op.get.responses['416'] && op.get.responses['304']);
    assert.ok(op.options?.summary, 'the preflight too');
    // A URL the router cannot decode (%zz) matches no route: it is logged, which helps.
    assert.ok(
      !server.logs.lines.some((l) => l.includes('/media/') && !l.includes('%zz')),
      'segment requests are not logged at the info level',
    );
  });
});

describe('/media of an asset whose playbackPolicy has allowedOrigins', () => {
  const ctx = served();
  let key = '';

  /** A new asset of `policy` (waiting for its upload) with a playlist and a segment in the store: their URLs. */
  async function assetWith(policy: Record<string, unknown> | undefined): Promise<{ id: string; urls: string[] }> {
    const { server } = ctx();
    const created = await server.call('POST', '/api/asset/request-upload', {
      key,
      body: { name: 'origins', ...(policy ? { playbackPolicy: policy } : {}) },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const prefix = `asset/${created.body.asset.playbackId}/`;
    const writer = server.running.core.builtinStore.writer(prefix);
    for (const [name, body] of [
      ['hls/index.m3u8', PLAYLIST],
      ['hls/360p0/0.ts', SEGMENT],
    ] as const) {
      const file = path.join(scratch, randomUUID());
      await writeFile(file, body);
      await writer.put(name, { file }, { contentType: 'application/octet-stream', signal });
    }
    await writer.close(signal);
    const base = `${server.url}/media/${prefix}`;
    return { id: created.body.asset.id, urls: [`${base}hls/index.m3u8`, `${base}hls/360p0/0.ts`] };
  }

  before(async () => {
    key = await ctx().server.key('origins-owner');
  });

  it('echoes a listed origin with Vary: Origin, refuses another with a 403, and answers a native player', async () => {
    const { urls } = await assetWith({
      type: 'public',
      allowedOrigins: ['https://Good.example/', 'http://localhost:3000'],
    });
    for (const url of urls) {
      for (const origin of ['https://good.example', 'http://localhost:3000']) {
        const res = await get(url, { origin });
        await res.arrayBuffer();
        assert.equal(res.status, 200, `${origin} ${url}`);
        assert.equal(res.headers.get('access-control-allow-origin'), origin);
        assert.match(res.headers.get('vary') ?? '', /\bOrigin\b/);
      }
      for (const origin of [
        'https://evil.example',
        'https://good.example.evil.example',
        'http://good.example',
        'null',
      ]) {
        const res = await get(url, { origin });
        assert.equal(res.status, 403, `${origin} ${url}`);
        assert.deepEqual(await res.json(), {
          errors: ["playback refused: this asset's playbackPolicy does not allow the page's origin"],
        });
        assert.notEqual(res.headers.get('access-control-allow-origin'), origin);
      }
      // A native player (Safari's <video>, VLC, ffmpeg) and a same-origin fetch send no Origin.
      const native = await get(url);
      await native.arrayBuffer();
      assert.equal(native.status, 200, url);
      assert.equal(
        native.headers.get('access-control-allow-origin'),
        null,
        'no CORS grant for a request without Origin',
      );
      assert.match(native.headers.get('vary') ?? '', /\bOrigin\b/, 'a shared cache keeps one answer per origin');
    }
  });

  it('allows every origin with `*` in the list, an empty list or none, as before', async () => {
    for (const policy of [
      { type: 'public', allowedOrigins: ['https://a.example', '*'] },
      { type: 'public', allowedOrigins: [] },
      undefined,
    ]) {
      const { urls } = await assetWith(policy);
      for (const url of urls) {
        const res = await get(url, { origin: 'https://evil.example' });
        await res.arrayBuffer();
        assert.equal(res.status, 200, `${JSON.stringify(policy)} ${url}`);
        assert.equal(res.headers.get('access-control-allow-origin'), '*');
        assert.equal(res.headers.get('vary'), null);
      }
    }
  });

  it('follows a PATCH of the policy from the next request', async () => {
    const { id, urls } = await assetWith(undefined);
    const segment = urls[1] ?? '';
    assert.equal((await get(segment, { origin: 'https://evil.example' })).status, 200);
    const patched = await ctx().server.call('PATCH', `/api/asset/${id}`, {
      key,
      body: { playbackPolicy: { type: 'public', allowedOrigins: ['https://good.example'] } },
    });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.deepEqual(patched.body.playbackPolicy, { type: 'public', allowedOrigins: ['https://good.example'] });
    assert.equal((await get(segment, { origin: 'https://evil.example' })).status, 403);
    assert.equal((await get(segment, { origin: 'https://good.example' })).status, 200);
  });
});

describe('/media from a bucket store', () => {
  // s3rver alone, without the tests' SigV4 proxy: that proxy checks Authorization headers only
  // (not presigned URLs), and keeps its upstream open when a client leaves midway, which holds
  // s3rver's close forever. The store's signatures are checked through it in
  // test/storage/builtin-store.test.ts.
  let plain: TestS3;
  before(async () => {
    plain = await startS3({ verify: false });
  });
  after(() => plain?.close());

  const bucketSettings = async (t: TestS3, serve: 'proxy' | 'redirect') => ({
    storeUrl: `s3://${await t.createBucket()}/store`,
    storeEndpoint: t.endpoint,
    storeAccessKeyId: t.credentials.accessKeyId,
    storeSecretAccessKey: t.credentials.secretAccessKey,
    storeServe: serve,
  });

  describe('streamed through (proxy)', () => {
    servingChecks(served(() => bucketSettings(plain, 'proxy')));
  });

  describe('redirected to presigned URLs', () => {
    const ctx = served(() => bucketSettings(plain, 'redirect'));

    it('answers 302 to a presigned URL of the bucket, which gives the bytes and ranges', async () => {
      const { server, prefix } = ctx();
      const url = `${server.url}/media/${prefix}hls/360p0/0.ts`;
      const res = await fetch(url, { redirect: 'manual' });
      assert.equal(res.status, 302);
      const location = res.headers.get('location') ?? '';
      assert.ok(location.startsWith(`${plain.endpoint}/`), location);
      assert.match(location, /X-Amz-Signature=[0-9a-f]+/);
      assert.match(location, /X-Amz-Expires=3600/);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      assert.equal(res.headers.get('access-control-allow-origin'), '*');
      const followed = await fetch(url);
      assert.equal(followed.status, 200);
      assert.ok((await bytes(followed)).equals(SEGMENT));
      const ranged = await fetch(url, { headers: { range: 'bytes=10-19' } });
      assert.equal(ranged.status, 206);
      assert.ok((await bytes(ranged)).equals(SEGMENT.subarray(10, 20)));
      const signature = /X-Amz-Signature=([0-9a-f]+)/.exec(location)?.[1] ?? '';
      assert.ok(!server.logs.text.includes(signature), 'a signature is never logged');
    });

    it('still answers 404 for path tricks and internal keys, before signing anything', async () => {
      const { server, prefix } = ctx();
      const id = prefix.split('/')[1] ?? '';
      const file = path.join(scratch, randomUUID());
      await writeFile(file, SEGMENT);
      await server.running.core.builtinStore.putFile(`pieces/${id}/source`, file, {
        contentType: 'application/octet-stream',
        signal,
      });
      for (const t of [
        `/media/task/${id}/hls/%2e%2e/x.ts`,
        `/media/task/${id}/hls/../hls/360p0/0.ts`,
        `/media/pieces/${id}/source`,
      ]) {
        const res = await raw(server.url, t);
        assert.equal(res.status, 404, t);
        assert.ok(!/location:/i.test(res.text), t);
      }
    });
  });
});
