// A video that is really a playlist, through every route that takes a video: a direct upload
// (request-upload, then PUT), upload/url, POST /api/transcode (its input read by ranges
// through the range proxy) and a clip of an asset whose stored file is one. The playlists name
// another owner's private asset by relative paths of several depths and by absolute `file:`
// paths, and segments on a loopback listener: every task fails saying playlists are not
// accepted, no asset of Bob's ends up ready, and the listener hears nothing from ffmpeg. A concat
// list, a DASH manifest and a still image take the same routes and are refused as what they are.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { makeClip } from '../helpers/media.ts';
import { requestUpload } from '../helpers/uploads.ts';
import { startTestServer, waitFor, type TestServer } from '../helpers/server.ts';

const REFUSAL = /playlists and lists of other files are not accepted/;
const SMALL = [{ name: '240p', width: 320, height: 240, bitrate: 300_000 }];

/** The first picture of `video` as a PNG file's bytes. */
function pngOf(video: string): Buffer {
  return execFileSync('ffmpeg', ['-v', 'error', '-i', video, '-frames:v', '1', '-c:v', 'png', '-f', 'image2pipe', '-']);
}

/** Every file under `dir`, as paths. */
function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)],
  );
}

/** A loopback server for Bob's playlists (by ranges too) that counts what else is asked of it. */
async function startOrigin(): Promise<{
  server: Server;
  url: string;
  files: Map<string, string | Buffer>;
  stray: string[];
}> {
  const files = new Map<string, string | Buffer>();
  const stray: string[] = [];
  const server = createServer((req, res) => {
    const body = files.get(req.url ?? '');
    if (body === undefined) {
      stray.push(`${req.url} ${req.headers['user-agent'] ?? ''}`);
      return res.writeHead(200, { 'content-type': 'video/mp2t' }).end(Buffer.alloc(188 * 20));
    }
    const bytes = Buffer.from(body);
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (!m) return res.writeHead(200, { 'content-length': bytes.length, 'accept-ranges': 'bytes' }).end(bytes);
    const start = Number(m[1]);
    const end = m[2] ? Math.min(Number(m[2]), bytes.length - 1) : bytes.length - 1;
    res.writeHead(206, {
      'content-length': end - start + 1,
      'content-range': `bytes ${start}-${end}/${bytes.length}`,
      'accept-ranges': 'bytes',
    });
    res.end(bytes.subarray(start, end + 1));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, files, stray };
}

describe('a playlist in place of a video, under every input route', () => {
  let server: TestServer;
  let origin: Awaited<ReturnType<typeof startOrigin>>;
  let alice: string;
  let bob: string;
  let clip: string;
  /** Alice's private files that Bob's playlists name: a media playlist and a segment. */
  let aliceFiles: { playlist: string; segment: string };
  let playlists: Record<string, string>;

  const assetOf = async (id: string) => (await server.call('GET', `/api/asset/${id}`, { key: bob })).body;
  const failedAsset = (id: string) =>
    waitFor(
      async () => {
        const a = await assetOf(id);
        assert.notEqual(a.status.phase, 'ready', `Bob's asset ${id} is ready: it read the files its playlist names`);
        return a.status.phase === 'failed' && a;
      },
      60_000,
      `asset ${id} to fail`,
    );
  const failedTask = (id: string) =>
    waitFor(
      async () => {
        const t = (await server.call('GET', `/api/task/${id}`, { key: bob })).body;
        assert.notEqual(t.status.phase, 'completed', `task ${id} completed`);
        return t.status.phase === 'failed' && t;
      },
      60_000,
      `task ${id} to fail`,
    );

  /** A direct upload of `text` as Bob's video: request-upload, then PUT. */
  async function upload(text: string): Promise<string> {
    const up = await requestUpload(server.url, bob, 'not a video');
    const put = await fetch(up.url, { method: 'PUT', body: text });
    assert.ok(put.ok, `PUT answered ${put.status}`);
    return up.asset.id;
  }

  before(async () => {
    clip = await makeClip({ width: 320, height: 240, seconds: 2 });
    origin = await startOrigin();
    server = await startTestServer({});
    alice = await server.key('alice');
    bob = await server.key('bob');
    const up = await requestUpload(server.url, alice, 'private');
    await server.call('PATCH', `/api/asset/${up.asset.id}`, { key: alice, body: { playbackPolicy: { type: 'jwt' } } });
    const put = await fetch(up.url, { method: 'PUT', body: readFileSync(clip) });
    assert.ok(put.ok);
    await waitFor(
      async () => (await server.call('GET', `/api/asset/${up.asset.id}`, { key: alice })).body.status.phase === 'ready',
      60_000,
      "Alice's asset to be ready",
    );
    const mine = walk(path.join(server.dataDir, 'media', 'asset', up.asset.playbackId));
    const playlist = mine.find((f) => f.endsWith('.m3u8') && readFileSync(f, 'utf8').includes('#EXTINF'));
    const segment = mine.find((f) => f.endsWith('.ts') && statSync(f).size > 0);
    assert.ok(playlist && segment, `Alice's files: ${mine.join(', ')}`);
    aliceFiles = { playlist, segment };
    const fromStore = (f: string) => path.relative(path.join(server.dataDir, 'media', 'asset'), f);
    const fromData = (f: string) => path.relative(server.dataDir, f);
    // Relative paths from any folder Bob's file may sit in: the store (asset/<his>/), the
    // uploads folder, a task's scratch (scratch/<run>/), at depths 1 to 6.
    const relative = Array.from({ length: 6 }, (_, i) => i + 1).flatMap((d) =>
      [fromStore(segment), `asset/${fromStore(segment)}`, fromData(segment), aliceFiles.segment.slice(1)].map(
        (p) => `${'../'.repeat(d)}${p}`,
      ),
    );
    const media = (lines: string[]) =>
      `#EXTM3U\n#EXT-X-TARGETDURATION:2\n${lines.map((l) => `#EXTINF:2.0,\n${l}\n`).join('')}#EXT-X-ENDLIST\n`;
    playlists = {
      relative: media(relative),
      absolute: media([`file:${segment}`, segment]),
      master: `#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=800000\n../${fromStore(playlist)}\n#EXT-X-STREAM-INF:BANDWIDTH=700000\nfile:${playlist}\n`,
      remote: media([`${origin.url}/private/seg0.ts`, `${origin.url}/private/seg1.ts`]),
    };
    for (const [name, text] of Object.entries(playlists)) origin.files.set(`/${name}.mp4`, text);
  });

  after(async () => {
    await server?.stop();
    await new Promise((r) => origin?.server.close(r));
  });

  it('a direct upload of each playlist fails saying playlists are not accepted', async () => {
    const ids = await Promise.all(Object.values(playlists).map(upload));
    for (const id of ids) assert.match((await failedAsset(id)).status.errorMessage, REFUSAL);
  });

  it('upload/url of a playlist fails the same way', async () => {
    for (const name of ['relative', 'remote']) {
      const res = await server.call('POST', '/api/asset/upload/url', {
        key: bob,
        body: { name, url: `${origin.url}/${name}.mp4` },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.match((await failedAsset(res.body.asset.id)).status.errorMessage, REFUSAL);
    }
  });

  it('POST /api/transcode of a playlist (read by ranges) fails the same way', async () => {
    for (const name of ['remote', 'absolute', 'master']) {
      const res = await server.call('POST', '/api/transcode', {
        key: bob,
        body: {
          input: { url: `${origin.url}/${name}.mp4` },
          outputs: { hls: { path: `/out/${name}` } },
          profiles: SMALL,
        },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.match((await failedTask(res.body.id)).status.errorMessage, REFUSAL);
    }
  });

  it("a clip of an asset whose stored file is a playlist fails, and reads none of Alice's bytes", async () => {
    // An asset made before playlists were refused: a real one whose source is then replaced.
    const up = await requestUpload(server.url, bob, 'an old asset');
    await fetch(up.url, { method: 'PUT', body: readFileSync(clip) });
    await waitFor(async () => (await assetOf(up.asset.id)).status.phase === 'ready', 60_000, "Bob's asset");
    writeFileSync(path.join(server.dataDir, 'media', 'asset', up.asset.playbackId, 'source'), playlists.absolute ?? '');
    const res = await server.call('POST', '/api/clip', {
      key: bob,
      body: { playbackId: up.asset.playbackId, startTime: 0, endTime: 1000 },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.match((await failedTask(res.body.task.id)).status.errorMessage, REFUSAL);
  });

  it('a concat list, a DASH manifest and an image, under upload, upload/url and transcode: refused, nothing opened', async () => {
    const segment = `${origin.url}/private/other.ts`;
    const others: Record<string, [string | Buffer, RegExp]> = {
      concat: [`ffconcat version 1.0\nfile '${aliceFiles.segment}'\nfile '${segment}'\n`, REFUSAL],
      dash: [
        `<?xml version="1.0"?>\n<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="static" mediaPresentationDuration="PT2S" minBufferTime="PT1S"><Period><AdaptationSet mimeType="video/mp2t"><Representation id="1" bandwidth="1000"><BaseURL>${segment}</BaseURL></Representation></AdaptationSet></Period></MPD>\n`,
        REFUSAL,
      ],
      image: [pngOf(clip), /still image or an image sequence/],
    };
    for (const [name, [content, refusal]] of Object.entries(others)) {
      origin.files.set(`/${name}.mp4`, content);
      const up = await requestUpload(server.url, bob, name);
      assert.ok((await fetch(up.url, { method: 'PUT', body: content })).ok);
      const byUrl = await server.call('POST', '/api/asset/upload/url', {
        key: bob,
        body: { name, url: `${origin.url}/${name}.mp4` },
      });
      const transcode = await server.call('POST', '/api/transcode', {
        key: bob,
        body: {
          input: { url: `${origin.url}/${name}.mp4` },
          outputs: { hls: { path: `/out/${name}` } },
          profiles: SMALL,
        },
      });
      assert.match((await failedAsset(up.asset.id)).status.errorMessage, refusal, name);
      assert.match((await failedAsset(byUrl.body.asset.id)).status.errorMessage, refusal, name);
      assert.match((await failedTask(transcode.body.id)).status.errorMessage, refusal, name);
    }
  });

  it('the listener named by the playlists heard nothing from ffmpeg', () => {
    assert.deepEqual(origin.stray, []);
  });
});
