// Several nodes, in one process: node A answers /internal/live/ from its ladder (a real
// LiveRendition fed ffmpeg's fragmented MP4 part by part), node B serves /media/live/ of a
// stream held by A through RemotePlayback. What a viewer of B sees is what A has; the cluster
// secret guards A's routes; and however many viewers wait on B, A is asked once per URL in
// flight (a blocking reload, a hinted part) and once per file at all (B keeps them).

import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { SigningKeyStore } from '../../src/access/index.ts';
import { sharedErrorHandler } from '../../src/api/errors.ts';
import { internalLiveRoutes } from '../../src/api/internal-live-routes.ts';
import { liveMediaRoutes } from '../../src/api/live-media-routes.ts';
import type { Db } from '../../src/db/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { LiveRendition } from '../../src/live/llhls/index.ts';
import { type LivePlayback, RemotePlayback, type StreamRecord, StreamStore } from '../../src/live/index.ts';
import { moofOffsets, standInLadder } from '../helpers/live-ladder.ts';
import { signPlaybackJwt } from '../helpers/playback-jwt.ts';
import { openTestDb, waitFor } from '../helpers/server.ts';
import { fmp4File } from './llhls-source.ts';

const PROJECT = '00000000-0000-4000-8000-000000000000';
const TIMING = { partTargetSecs: 0.25, segmentTargetSecs: 1, windowSecs: 30 };
const SECRET = 'a-cluster-secret-of-thirty-two-characters-or-more';
const VIEWERS = 20;

async function listening(app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

function bareApp(): FastifyInstance {
  const app = Fastify();
  app.setErrorHandler(sharedErrorHandler(createLogger({ level: 'silent' })));
  return app;
}

/** The next part a playlist hints at: [msn, part]. */
function hinted(text: string): [number, number] {
  const hint = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="(\d+)\.(\d+)\.m4s/.exec(text);
  assert.ok(hint, 'a preload hint');
  return [Number(hint[1]), Number(hint[2])];
}

describe('a ladder live on another node', () => {
  let db: Db;
  let streams: StreamStore;
  let stream: StreamRecord;
  let rendition: LiveRendition;
  let file: Buffer;
  let moofs: number[];
  let written: number;
  let nodeA: FastifyInstance;
  let nodeB: FastifyInstance;
  let urlA: string;
  let urlB: string;
  let registry: Registry;
  let remote: RemotePlayback;
  let holderUrl: string | undefined;
  /** The publishers A was asked to cut off. */
  const cuts: string[] = [];
  /** The internal requests A was sent (path and query). */
  const seenByA: string[] = [];
  /** Stream reads B has finished: a viewer's last wait before B asks A (public streams). */
  let streamReads = 0;

  /** Writes the source up to the start of moof `n`: parts before it are whole. */
  const writeUpTo = (n: number) => {
    const end = moofs[n] ?? file.length;
    rendition.write(file.subarray(written, end));
    written = end;
  };

  before(async () => {
    db = await openTestDb('embedded');
    await db.query('INSERT INTO owners (name, project_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', ['alice', PROJECT]);
    streams = new StreamStore(db);
    stream = await streams.create({ owner: 'alice', projectId: PROJECT, name: 'on air' });
    file = await fmp4File(6);
    moofs = moofOffsets(file);
    written = 0;
    rendition = new LiveRendition({ name: 'low', timing: TIMING });
    writeUpTo(6);
    const ladder = standInLadder(rendition);
    const live: LivePlayback = {
      ladder: (id) => (id === stream.playbackId ? ladder : undefined),
      terminate: (id, reason) => {
        cuts.push(`${id}: ${reason}`);
        return id === stream.id;
      },
    };
    nodeA = bareApp();
    nodeA.addHook('onRequest', async (req) => {
      if (req.url.startsWith('/internal/')) seenByA.push(req.url);
    });
    await internalLiveRoutes(nodeA, { secret: SECRET, live });
    urlA = await listening(nodeA);
    holderUrl = urlA;
    registry = new Registry();
    remote = new RemotePlayback({
      holders: { holder: async (id) => (id === stream.playbackId ? holderUrl : undefined) },
      secret: SECRET,
      metrics: registry,
    });
    nodeB = bareApp();
    const counted = {
      byPlaybackId: async (id: string) => {
        const read = await streams.byPlaybackId(id);
        streamReads++;
        return read;
      },
    };
    await liveMediaRoutes(nodeB, {
      streams: counted,
      remote,
      signingKeys: new SigningKeyStore(db),
      streamReadMs: 0,
    });
    urlB = `${await listening(nodeB)}/media/live/${stream.playbackId}`;
  });
  after(async () => {
    rendition.end();
    await nodeB.close();
    await nodeA.close();
    await db.close();
  });

  const internal = (path: string, secret?: string) =>
    fetch(`${urlA}/internal/live/${stream.playbackId}/${path}`, {
      headers: secret === undefined ? {} : { authorization: `Bearer ${secret}` },
    });

  it("answers the other nodes only with the cluster's secret", async () => {
    assert.equal((await internal('low/index.m3u8')).status, 401);
    assert.equal((await internal('low/index.m3u8', 'not-the-secret')).status, 401);
    const ok = await internal('low/index.m3u8', SECRET);
    assert.equal(ok.status, 200);
    assert.match(await ok.text(), /#EXT-X-PART:/);
    assert.equal((await internal('index.m3u8', SECRET)).status, 200);
    assert.equal((await internal('high/index.m3u8', SECRET)).status, 404);
    assert.equal((await internal('low/index.m3u8?_HLS_msn=x', SECRET)).status, 400);
    const unset = bareApp();
    await internalLiveRoutes(unset, { secret: undefined, live: { ladder: () => undefined, terminate: () => false } });
    try {
      const res = await fetch(`${await listening(unset)}/internal/live/${stream.playbackId}/low/index.m3u8`, {
        headers: { authorization: `Bearer ${SECRET}` },
      });
      assert.equal(res.status, 404, 'no secret set: no internal routes');
    } finally {
      await unset.close();
    }
  });

  it('cuts a publisher held here off when another node asks with the secret', async () => {
    const terminate = (secret: string | undefined, streamId: string) =>
      fetch(`${urlA}/internal/live/${stream.playbackId}/terminate`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(secret === undefined ? {} : { authorization: `Bearer ${secret}` }),
        },
        body: JSON.stringify({ streamId, reason: 'the stream was terminated by its owner' }),
      });
    assert.equal((await terminate(undefined, stream.id)).status, 401);
    assert.deepEqual(cuts, []);
    assert.equal((await terminate(SECRET, 'another-stream')).status, 404);
    assert.equal((await terminate(SECRET, stream.id)).status, 204);
    assert.deepEqual(cuts.at(-1), `${stream.id}: the stream was terminated by its owner`);
    assert.equal(await remote.terminate({ streamId: stream.id, playbackId: stream.playbackId, reason: 'r' }), true);
    assert.equal(await remote.terminate({ streamId: stream.id, playbackId: 'nosuchplayback00', reason: 'r' }), false);
  });

  it("serves a viewer of another node the holder's playlists and files, byte for byte", async () => {
    const master = await fetch(`${urlB}/index.m3u8`);
    assert.equal(master.status, 200);
    assert.match(await master.text(), /^low\/index\.m3u8$/m);
    const viaB = await (await fetch(`${urlB}/low/index.m3u8`)).text();
    const atA = await (await internal('low/index.m3u8', SECRET)).text();
    assert.equal(viaB, atA);
    const names = [
      /#EXT-X-MAP:URI="([^"]+)"/.exec(viaB)?.[1],
      /#EXT-X-PART:[^\n]*URI="([^"]+)"/.exec(viaB)?.[1],
      /^(\d+\.m4s)$/m.exec(viaB)?.[1],
    ];
    for (const name of names) {
      assert.ok(name);
      const res = await fetch(`${urlB}/low/${name}`);
      assert.equal(res.status, 200, name);
      assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.ok(bytes.equals(Buffer.from(await (await internal(`low/${name}`, SECRET)).arrayBuffer())), name);
    }
    assert.equal((await fetch(`${urlB}/low/999.m4s`)).status, 404);
    assert.equal((await fetch(`${urlB}/high/index.m3u8`)).status, 404);
  });

  it('asks the holder once for a blocking reload however many viewers wait for it, and once per part', async () => {
    const [msn, part] = hinted(await (await fetch(`${urlB}/low/index.m3u8`)).text());
    const before = remote.upstreamRequests;
    seenByA.length = 0;
    const readsBefore = streamReads;
    const reload = `low/index.m3u8?_HLS_msn=${msn}&_HLS_part=${part}`;
    const waiting = Array.from({ length: VIEWERS }, () => fetch(`${urlB}/${reload}`));
    const hintedPart = Array.from({ length: VIEWERS }, () => fetch(`${urlB}/low/${msn}.${part}.m4s`));
    // Every viewer has read its stream and A has both requests; from the stream read to B's
    // shared upstream request only promises run, which all settle before a timer fires.
    await waitFor(async () => streamReads - readsBefore >= 2 * VIEWERS && seenByA.length >= 2, 30_000, 'the viewers');
    await new Promise((r) => setTimeout(r, 50));
    writeUpTo(moofs.findIndex((c) => c > written) + 1);
    const reloads = await Promise.all(waiting);
    for (const res of reloads) {
      assert.equal(res.status, 200);
      assert.ok((await res.text()).includes(`URI="${msn}.${part}.m4s"`), 'the awaited part is listed');
    }
    const parts = await Promise.all(hintedPart);
    const bodies = await Promise.all(parts.map(async (r) => Buffer.from(await r.arrayBuffer())));
    for (const [i, res] of parts.entries()) {
      assert.equal(res.status, 200);
      assert.ok(bodies[i]?.equals(bodies[0] as Buffer));
    }
    // Later viewers of the same part: from B's cache.
    for (let i = 0; i < 5; i++) assert.equal((await fetch(`${urlB}/low/${msn}.${part}.m4s`)).status, 200);
    assert.deepEqual(
      seenByA.sort(),
      [
        `/internal/live/${stream.playbackId}/${reload}`,
        `/internal/live/${stream.playbackId}/low/${msn}.${part}.m4s`,
      ].sort(),
    );
    assert.equal(remote.upstreamRequests - before, 2);
    assert.match(await registry.metrics(), /^mediaplane_live_upstream_requests_total \d+$/m);
  });

  it("carries a viewer's token into every URI, and asks the holder without it", async () => {
    const signingKeys = new SigningKeyStore(db);
    const made = await signingKeys.create('alice', PROJECT);
    stream = await streams.update('alice', stream.id, { playbackPolicy: { type: 'jwt' } });
    const jwt = signPlaybackJwt(made.privateKey, { sub: stream.playbackId, pub: made.key.publicKey });
    assert.equal((await fetch(`${urlB}/low/index.m3u8`)).status, 401, 'the token is checked on the viewer node');
    seenByA.length = 0;
    const master = await (await fetch(`${urlB}/index.m3u8?jwt=${jwt}`)).text();
    assert.match(master, new RegExp(`^low/index\\.m3u8\\?jwt=${jwt}$`, 'm'));
    const media = await fetch(`${urlB}/low/index.m3u8?jwt=${jwt}`);
    assert.equal(media.headers.get('cache-control'), 'private, no-store');
    const text = await media.text();
    const uris = [...text.matchAll(/URI="([^"]+)"/g)].map((m) => m[1] ?? '');
    uris.push(...text.split('\n').filter((l) => l !== '' && !l.startsWith('#')));
    assert.ok(uris.length > 5);
    for (const uri of uris) assert.ok(uri.endsWith(`?jwt=${jwt}`), `${uri} carries the token`);
    for (const seen of seenByA) assert.ok(!seen.includes('jwt'), `${seen} asked without the token`);
    stream = await streams.update('alice', stream.id, { playbackPolicy: { type: 'public' } });
  });

  it('answers 404 when no live node holds the stream, and 503 when its holder does not answer', async () => {
    holderUrl = undefined;
    assert.equal((await fetch(`${urlB}/low/index.m3u8`)).status, 404);
    // A holder whose lease has not expired yet, but which answers nothing (killed).
    const gone = bareApp();
    const goneUrl = await listening(gone);
    await gone.close();
    holderUrl = goneUrl;
    const res = await fetch(`${urlB}/low/index.m3u8`);
    assert.equal(res.status, 503);
    assert.match(JSON.stringify(await res.json()), /did not answer/);
    assert.equal((await fetch(`${urlB}/low/1.m4s`)).status, 404);
    holderUrl = urlA;
  });
});
