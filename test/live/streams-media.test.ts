// The live media routes (/media/live/{playbackId}/...) over real HTTP, with a stand-in
// LivePlayback whose one rendition is a real LiveRendition fed ffmpeg's fragmented MP4: the
// multivariant and media playlists, a blocking reload woken by the next part, a reload too far
// ahead (400), the files and their cache lifetimes, 404 when not live here, and the stream's
// playback policy (JWT on every request, carried by every URI; allowed origins).

import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { SigningKeyStore } from '../../src/access/index.ts';
import { sharedErrorHandler } from '../../src/api/errors.ts';
import { liveMediaRoutes } from '../../src/api/live-media-routes.ts';
import type { Db } from '../../src/db/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { LiveRendition } from '../../src/live/llhls/index.ts';
import { type LivePlayback, type StreamRecord, StreamStore } from '../../src/live/index.ts';
import { moofOffsets, standInLadder } from '../helpers/live-ladder.ts';
import { signPlaybackJwt } from '../helpers/playback-jwt.ts';
import { openTestDb } from '../helpers/server.ts';
import { fmp4File } from './llhls-source.ts';

const PROJECT = '00000000-0000-4000-8000-000000000000';
const TIMING = { partTargetSecs: 0.25, segmentTargetSecs: 1, windowSecs: 30 };

describe('live media routes', () => {
  let db: Db;
  let app: FastifyInstance;
  let url: string;
  let streams: StreamStore;
  let stream: StreamRecord;
  let idle: StreamRecord;
  let rest: Buffer;
  let rendition: LiveRendition;
  let privateKey: string;
  let publicKey: string;

  before(async () => {
    db = await openTestDb('embedded');
    await db.query('INSERT INTO owners (name, project_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', ['alice', PROJECT]);
    streams = new StreamStore(db);
    stream = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'on air' });
    idle = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'off air' });
    const signingKeys = new SigningKeyStore(db);
    const made = await signingKeys.create('alice', PROJECT);
    privateKey = made.privateKey;
    publicKey = made.key.publicKey;
    // The first half of 4 s of ffmpeg's fMP4 now; the rest when a test says.
    const file = await fmp4File(4);
    const cut = moofOffsets(file)[8] ?? file.length;
    rest = file.subarray(cut);
    rendition = new LiveRendition({ name: 'low', timing: TIMING });
    rendition.write(file.subarray(0, cut));
    const ladder = standInLadder(rendition);
    const live: LivePlayback = {
      ladder: (playbackId) => (playbackId === stream.playbackId ? ladder : undefined),
      terminate: () => false,
    };
    app = Fastify();
    // The API's error shapes, as buildApp sets them for /media.
    app.setErrorHandler(sharedErrorHandler(createLogger({ level: 'silent' })));
    // Every request reads the stream's policy afresh: the tests change it.
    await liveMediaRoutes(app, { streams, live, signingKeys, streamReadMs: 0 });
    await app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/media/live`;
  });
  after(async () => {
    rendition.end();
    await app.close();
    await db.close();
  });

  const get = (path: string, headers: Record<string, string> = {}) => fetch(`${url}/${path}`, { headers });

  it('answers 404 for a stream not live here and for what the ladder has not', async () => {
    for (const path of [
      `${idle.playbackId}/index.m3u8`,
      `${idle.playbackId}/low/index.m3u8`,
      'nosuchplayback00/index.m3u8',
      `${stream.playbackId}/high/index.m3u8`,
      `${stream.playbackId}/low/999.m4s`,
      `${stream.playbackId}/low/init-77.mp4`,
    ])
      assert.equal((await get(path)).status, 404, path);
  });

  it('serves the multivariant and the media playlist uncached, with CORS for any page', async () => {
    const master = await get(`${stream.playbackId}/index.m3u8`, { origin: 'https://viewer.example' });
    assert.equal(master.status, 200);
    assert.equal(master.headers.get('content-type'), 'application/vnd.apple.mpegurl');
    assert.equal(master.headers.get('cache-control'), 'no-cache');
    assert.equal(master.headers.get('access-control-allow-origin'), '*');
    assert.match(await master.text(), /^low\/index\.m3u8$/m);
    const media = await get(`${stream.playbackId}/low/index.m3u8`);
    assert.equal(media.status, 200);
    assert.equal(media.headers.get('cache-control'), 'no-cache');
    const text = await media.text();
    assert.match(text, /#EXT-X-PART:DURATION=[\d.]+,URI="\d+\.\d+\.m4s"/);
    assert.match(text, /#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES/);
    assert.match(text, /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="[^"]+"/);
  });

  it('serves init, parts and segments immutable', async () => {
    const text = await (await get(`${stream.playbackId}/low/index.m3u8`)).text();
    const init = /#EXT-X-MAP:URI="([^"]+)"/.exec(text)?.[1];
    const part = /#EXT-X-PART:[^\n]*URI="([^"]+)"/.exec(text)?.[1];
    const segment = /^(\d+\.m4s)$/m.exec(text)?.[1];
    for (const [file, type] of [
      [init, 'video/mp4'],
      [part, 'video/iso.segment'],
      [segment, 'video/iso.segment'],
    ] as const) {
      assert.ok(file, `${type} named in the playlist`);
      const res = await get(`${stream.playbackId}/low/${file}`);
      assert.equal(res.status, 200, file);
      assert.equal(res.headers.get('content-type'), type);
      assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.ok((await res.arrayBuffer()).byteLength > 0);
    }
  });

  it('holds a blocking reload until its part comes, and refuses one too far ahead', async () => {
    const text = await (await get(`${stream.playbackId}/low/index.m3u8`)).text();
    const hint = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="(\d+)\.(\d+)\.m4s"/.exec(text);
    assert.ok(hint);
    const [msn, part] = [Number(hint[1]), Number(hint[2])];
    const tooFar = await get(`${stream.playbackId}/low/index.m3u8?_HLS_msn=${msn + 5}`);
    assert.equal(tooFar.status, 400);
    let answered = false;
    const held = get(`${stream.playbackId}/low/index.m3u8?_HLS_msn=${msn}&_HLS_part=${part}`).then((r) => {
      answered = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(answered, false, 'held while the part is not there');
    rendition.write(rest);
    const res = await held;
    assert.equal(res.status, 200);
    assert.ok((await res.text()).includes(`URI="${msn}.${part}.m4s"`), 'the awaited part is listed');
  });

  it("reads a stream's row once per period however many requests come", async () => {
    let reads = 0;
    const counting = {
      byPlaybackId: (id: string) => {
        reads++;
        return streams.byPlaybackId(id);
      },
    };
    const ladder = standInLadder(rendition);
    const other = Fastify();
    other.setErrorHandler(sharedErrorHandler(createLogger({ level: 'silent' })));
    const live: LivePlayback = {
      ladder: (id) => (id === stream.playbackId ? ladder : undefined),
      terminate: () => false,
    };
    // A minute, not the default second: a loaded host must not turn one read into two.
    await liveMediaRoutes(other, {
      streams: counting,
      live,
      signingKeys: new SigningKeyStore(db),
      streamReadMs: 60_000,
    });
    await other.listen({ port: 0, host: '127.0.0.1' });
    try {
      const base = `http://127.0.0.1:${(other.server.address() as AddressInfo).port}/media/live/${stream.playbackId}`;
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => fetch(`${base}/${i % 2 ? 'index.m3u8' : 'low/index.m3u8'}`)),
      );
      for (const res of answers) assert.equal(res.status, 200);
      assert.equal(reads, 1);
    } finally {
      await other.close();
    }
  });

  describe('a stream with a jwt playback policy', () => {
    before(async () => {
      stream = await streams.update('alice', stream.id, {
        playbackPolicy: { type: 'jwt', allowedOrigins: ['https://allowed.example'] },
      });
    });
    const token = () => signPlaybackJwt(privateKey, { sub: stream.playbackId, pub: publicKey });

    it('refuses a request without a token, or with a wrong one, on every route', async () => {
      for (const path of ['index.m3u8', 'low/index.m3u8']) {
        const none = await get(`${stream.playbackId}/${path}`);
        assert.equal(none.status, 401);
        assert.match(JSON.stringify(await none.json()), /this stream is private/);
        const wrong = signPlaybackJwt(privateKey, { sub: idle.playbackId, pub: publicKey });
        assert.equal((await get(`${stream.playbackId}/${path}?jwt=${wrong}`)).status, 401);
      }
    });

    it('with ?jwt= every URI carries the token, and the files it names open with it, uncached', async () => {
      const jwt = token();
      const master = await (await get(`${stream.playbackId}/index.m3u8?jwt=${jwt}`)).text();
      assert.match(master, new RegExp(`^low/index\\.m3u8\\?jwt=${jwt}$`, 'm'));
      const media = await get(`${stream.playbackId}/low/index.m3u8?jwt=${jwt}`);
      assert.equal(media.headers.get('cache-control'), 'private, no-store');
      const text = await media.text();
      const uris = [...text.matchAll(/URI="([^"]+)"/g)].map((m) => m[1] ?? '');
      uris.push(...text.split('\n').filter((l) => l !== '' && !l.startsWith('#')));
      assert.ok(uris.length > 5);
      for (const uri of uris) assert.ok(uri.endsWith(`jwt=${jwt}`), `${uri} carries the token`);
      const part = /#EXT-X-PART:[^\n]*URI="([^"]+)"/.exec(text)?.[1] ?? '';
      const file = await get(`${stream.playbackId}/low/${part}`);
      assert.equal(file.status, 200);
      assert.equal(file.headers.get('cache-control'), 'private, no-store');
      assert.equal((await get(`${stream.playbackId}/low/${part.replace(/\?.*/, '')}`)).status, 401);
    });

    it("refuses a page the policy's allowedOrigins does not list", async () => {
      const jwt = token();
      const other = await get(`${stream.playbackId}/index.m3u8?jwt=${jwt}`, { origin: 'https://other.example' });
      assert.equal(other.status, 403);
      const allowed = await get(`${stream.playbackId}/index.m3u8?jwt=${jwt}`, { origin: 'https://allowed.example' });
      assert.equal(allowed.status, 200);
      assert.equal(allowed.headers.get('access-control-allow-origin'), 'https://allowed.example');
    });
  });
});
