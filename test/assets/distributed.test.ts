import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type BrowserPlayer, startBrowserPlayer } from '../helpers/browser.ts';
import { makeClip } from '../helpers/media.ts';
import { testPostgres } from '../helpers/postgres.ts';
import { spawnWorkerChild } from '../helpers/worker-process.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { databaseFor, startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

// Issue #27 acceptance: the built-in store on an S3-protocol server (MEDIAPLANE_STORE_URL),
// with the API and a worker as separate processes (separate data dirs) on one PostgreSQL:
// the upload lands on the API's machine, the worker finds it in the bucket, and what the
// worker wrote plays through the API's /media.

const skip = (await testPostgres()) ? false : 'no PostgreSQL server available (apt-get install postgresql)';

describe('the built-in store in a bucket, API and worker in separate processes', { skip }, () => {
  let s3: TestS3;
  let server: TestServer;
  let worker: ChildProcess | undefined;
  let player: BrowserPlayer | undefined;
  let skipPlay = '';
  let key = '';
  let storeUrl = '';

  before(async () => {
    s3 = await startS3();
    const bucket = await s3.createBucket();
    storeUrl = `s3://${bucket}/media`;
    const store = {
      storeUrl,
      storeEndpoint: s3.endpoint,
      storeRegion: s3.region,
      storeAccessKeyId: s3.credentials.accessKeyId,
      storeSecretAccessKey: s3.credentials.secretAccessKey,
    };
    server = await startTestServer({
      databaseUrl: await databaseFor('postgres'),
      roles: { api: true, worker: false },
      settings: store,
    });
    key = await server.key('alice');
    worker = await spawnWorkerChild({
      WORKER_HANDLER: 'transcode',
      DATABASE_URL: server.databaseUrl ?? '',
      MEDIAPLANE_DATA_DIR: mkdtempSync(join(tmpdir(), 'mediaplane-worker-')),
      MEDIAPLANE_POLL_MS: '100',
      MEDIAPLANE_ALLOW_PRIVATE_URLS: 'true',
      MEDIAPLANE_STORE_URL: storeUrl,
      MEDIAPLANE_STORE_ENDPOINT: s3.endpoint,
      MEDIAPLANE_STORE_REGION: s3.region,
      MEDIAPLANE_STORE_ACCESS_KEY_ID: s3.credentials.accessKeyId,
      MEDIAPLANE_STORE_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
    });
    const started = await startBrowserPlayer();
    if ('skip' in started) skipPlay = started.skip;
    else player = started;
  });

  after(async () => {
    worker?.kill('SIGTERM');
    await player?.close();
    await server?.stop();
    await s3?.close();
  });

  it('uploads, processes in the worker and plays from the bucket through /media', async (t) => {
    const clip = await makeClip({ width: 384, height: 216, seconds: 4 });
    const created = await server.call('POST', '/api/asset/request-upload', {
      key,
      body: {
        name: 'bucket clip',
        staticMp4: true,
        profiles: [{ name: '216p0', width: 384, height: 216, bitrate: 400_000 }],
      },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const put = await fetch(created.body.url, { method: 'PUT', body: readFileSync(clip) });
    assert.equal(put.status, 200);
    const id = created.body.asset.id as string;
    const asset = await waitFor(async () => {
      const got = await server.call('GET', `/api/asset/${id}`, { key });
      if (got.body.status?.phase === 'failed') throw new Error(got.body.status.errorMessage);
      return got.body.status?.phase === 'ready' ? got.body : undefined;
    }, 120_000);
    // Everything is in the bucket, nothing in the API's own data dir.
    const keys = await s3.keys(storeUrl.split('/')[2] ?? '');
    const prefix = `media/asset/${asset.playbackId}/`;
    assert.ok(keys.includes(`${prefix}source`), keys.join('\n'));
    assert.ok(keys.includes(`${prefix}hls/index.m3u8`), keys.join('\n'));
    const playlist = await fetch(asset.playbackUrl);
    assert.equal(playlist.status, 200);
    assert.match(await playlist.text(), /#EXTM3U/);
    const download = await fetch(asset.downloadUrl);
    assert.equal(Buffer.from(await download.arrayBuffer()).equals(readFileSync(clip)), true);
    if (!player) return t.skip(skipPlay);
    const played = await player.playHls(asset.playbackUrl);
    assert.equal(played.error, undefined, played.log.join('\n'));
    assert.ok(played.played > 0.5, `played ${played.played} s`);
  });
});
