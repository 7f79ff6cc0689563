// Issue #30 through the service: a 24 s input (threshold 10 s, 8 s chunks) posted to the API
// of a service with one worker slot (embedded database), split by the worker, its pieces
// run by the queue, stitched, and the outputs written to an S3 bucket.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { makeClip } from '../helpers/media.ts';
import { startHttp, type TestHttp } from '../helpers/http-input.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { startTestServer, waitFor, type TestServer } from '../helpers/server.ts';
import { serveRanges } from './chunked-helpers.ts';

let server: TestServer;
let web: TestHttp;
let s3: TestS3;
let key: string;

before(async () => {
  const clip = await makeClip({ width: 640, height: 360, seconds: 24 });
  [web, s3] = await Promise.all([startHttp({ '/in.mp4': serveRanges(clip).route }), startS3()]);
  server = await startTestServer({
    settings: {
      chunkThresholdSecs: 10,
      chunkSecs: 8,
      x264Preset: 'ultrafast',
      perTitle: false,
      workerConcurrency: 1,
    },
  });
  key = await server.key('owner-chunked');
});
after(async () => {
  await Promise.all([server?.stop(), web?.close(), s3?.close()]);
});

describe('a chunked task through the API and the queue', () => {
  it('completes with a single worker slot, its outputs in the bucket, one task to the caller', async () => {
    const bucket = await s3.createBucket();
    const posted = await server.call('POST', '/api/transcode', {
      key,
      body: {
        input: { url: web.url('/in.mp4') },
        storage: {
          type: 's3',
          endpoint: s3.endpoint,
          bucket,
          credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: s3.credentials.secretAccessKey },
        },
        outputs: { hls: { path: 'out/hls' }, mp4: { path: 'out/mp4' } },
        profiles: [{ name: '240p', width: 426, height: 240, bitrate: 400_000 }],
        targetSegmentSizeSecs: 2,
      },
    });
    assert.equal(posted.status, 200, JSON.stringify(posted.body));
    const id = posted.body.id as string;
    const task = await waitFor(
      async () => {
        const res = await server.call('GET', `/api/task/${id}`, { key });
        return ['completed', 'failed', 'cancelled'].includes(res.body.status.phase) ? res.body : undefined;
      },
      240_000,
      'the chunked task to settle',
    );
    assert.equal(task.status.phase, 'completed', JSON.stringify(task.status));
    const out = task.output.transcodeFile;
    assert.equal(out.hls.path, '/out/hls/index.m3u8');
    assert.equal(out.mp4[0].path, '/out/mp4/240p.mp4');
    assert.ok(out.mp4[0].size > 0);
    if (task.pieces) assert.equal(task.pieces.completed, task.pieces.total);
    const keys = await s3.keys(bucket);
    for (let i = 0; i < 12; i++) assert.ok(keys.includes(`out/hls/240p/${i}.ts`), `segment ${i}: ${keys.join(' ')}`);
    assert.ok(keys.includes('out/hls/audio/0/index.m3u8'));
    assert.ok(keys.includes('out/hls/thumbnails/thumbnails.vtt'));
    const playlist = (await s3.get(bucket, 'out/hls/240p/index.m3u8')).body.toString();
    assert.match(playlist, /#EXT-X-PLAYLIST-TYPE:VOD/);
    // The pieces are not tasks of their own to the caller.
    const list = await server.call('GET', '/api/task', { key });
    assert.equal(JSON.stringify(list.body).includes('transcode-chunk'), false);
  });
});
