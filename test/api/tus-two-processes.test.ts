// Uploads any API process can take: with the built-in store in a bucket, an upload stages in
// the bucket (assets/staging/bucket.ts), so tus PATCHes alternating between two API processes
// on one PostgreSQL make one upload, HEAD on either gives the offset, and S3's minimum part
// size (enforced by the test S3 as S3 and MinIO enforce it) is kept with PATCHes far smaller.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CompleteMultipartUploadCommand, CreateMultipartUploadCommand, UploadPartCommand } from '@aws-sdk/client-s3';
import { testPostgres } from '../helpers/postgres.ts';
import { S3_MIN_PART_BYTES, startS3, storeSettings, type TestS3 } from '../helpers/s3.ts';
import { databaseFor, startTestServer, type TestServer, waitFor } from '../helpers/server.ts';
import { bigVideo, requestUpload, sha256, sha256File } from '../helpers/uploads.ts';

const skip = (await testPostgres()) ? false : 'no PostgreSQL server available (apt-get install postgresql)';
const PATCH_BYTES = 900 * 1000;
const TUS = { 'tus-resumable': '1.0.0' };

describe('tus uploads across two API processes, staged in the bucket', { skip }, () => {
  let s3: TestS3;
  let bucket = '';
  let api: TestServer;
  let apiWorker: TestServer;
  let key = '';

  before(async () => {
    s3 = await startS3({ minPartBytes: S3_MIN_PART_BYTES });
    bucket = await s3.createBucket();
    const settings = storeSettings(s3, bucket);
    const databaseUrl = await databaseFor('postgres');
    api = await startTestServer({ databaseUrl, roles: { api: true, worker: false }, settings });
    apiWorker = await startTestServer({ databaseUrl, roles: { api: true, worker: true }, settings });
    key = await api.key('alice');
  });

  after(async () => {
    await api?.stop();
    await apiWorker?.stop();
    await s3?.close();
  });

  /** Nothing of an upload is on either process's disk: the bucket holds it all. */
  const nothingStagedLocally = () => {
    for (const s of [api, apiWorker]) {
      const folder = join(s.dataDir, 'uploads');
      assert.ok(!existsSync(folder) || readdirSync(folder).length === 0, `${folder} is empty`);
      const spool = join(s.dataDir, 'upload-spool');
      assert.ok(!existsSync(spool) || readdirSync(spool).length === 0, `${spool} is empty`);
    }
  };

  const headOffset = async (server: TestServer, resource: string): Promise<string | null> => {
    const res = await fetch(`${server.url}${resource}`, { method: 'HEAD', headers: TUS });
    assert.equal(res.status, 200, `HEAD on ${server.url}`);
    return res.headers.get('upload-offset');
  };

  it('900 KB PATCHes alternating between the processes make one upload whose sha256 is the file’s', async () => {
    const path = await bigVideo(12);
    const file = readFileSync(path);
    const u = await requestUpload(api.url, key);
    const created = await fetch(u.tusEndpoint, {
      method: 'POST',
      headers: { ...TUS, 'upload-length': String(file.length) },
    });
    assert.equal(created.status, 201);
    const location = new URL(created.headers.get('location') ?? '');
    const resource = `${location.pathname}${location.search}`;
    const servers = [api, apiWorker];
    let offset = 0;
    for (let i = 0; offset < file.length; i++) {
      const server = servers[i % 2] as TestServer;
      const chunk = file.subarray(offset, offset + PATCH_BYTES);
      const res = await fetch(`${server.url}${resource}`, {
        method: 'PATCH',
        headers: { ...TUS, 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream' },
        body: chunk,
      });
      assert.equal(res.status, 204, `PATCH ${i} at ${offset} on process ${i % 2}: ${await res.text()}`);
      offset += chunk.length;
      assert.equal(res.headers.get('upload-offset'), String(offset));
      if (offset < file.length) {
        // The offset is the bucket's: the other process knows it as well as the one that took the bytes.
        assert.equal(await headOffset(api, resource), String(offset));
        assert.equal(await headOffset(apiWorker, resource), String(offset));
      }
      nothingStagedLocally();
    }
    assert.ok(
      (await s3.keys(bucket)).every((k) => !k.startsWith('media/uploads/')),
      'nothing is left staged in the bucket',
    );
    const ready = await waitFor(
      async () => {
        const a = (await api.call('GET', `/api/asset/${u.asset.id}`, { key })).body;
        if (a.status.phase === 'failed') assert.fail(`the asset failed: ${a.status.errorMessage}`);
        return a.status.phase === 'ready' ? a : undefined;
      },
      120_000,
      'the asset to be ready',
    );
    const sha = ready.hash.find((h: { algorithm: string }) => h.algorithm === 'sha256')?.hash;
    assert.equal(sha, await sha256File(path));
    assert.equal(ready.size, statSync(path).size);
  });

  it('a direct PUT to either process stages in the bucket and stores the whole file', async () => {
    const body = Buffer.alloc(S3_MIN_PART_BYTES + 12_345);
    for (let i = 0; i < body.length; i += 4096) body[i] = i % 251;
    const u = await requestUpload(api.url, key);
    const put = await fetch(u.url.replace(api.url, apiWorker.url), { method: 'PUT', body });
    assert.equal(put.status, 200, await put.text());
    const stored = await s3.get(bucket, `media/asset/${u.asset.playbackId}/source`);
    assert.equal(sha256(stored.body), sha256(body));
    nothingStagedLocally();
  });

  it('the test S3 refuses to complete an upload with a part but the last under 5 MiB (EntityTooSmall)', async () => {
    const Key = 'too-small';
    const { UploadId } = await s3.client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key }));
    const parts = [];
    for (const [n, size] of [
      [1, 1000],
      [2, 1000],
    ] as const) {
      const r = await s3.client.send(
        new UploadPartCommand({ Bucket: bucket, Key, UploadId, PartNumber: n, Body: Buffer.alloc(size) }),
      );
      parts.push({ PartNumber: n, ETag: r.ETag });
    }
    await assert.rejects(
      s3.client.send(
        new CompleteMultipartUploadCommand({ Bucket: bucket, Key, UploadId, MultipartUpload: { Parts: parts } }),
      ),
      (err: Error) => err.name === 'EntityTooSmall',
    );
  });
});
