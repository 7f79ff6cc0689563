import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { CancelledError, StorageDeniedError, UpstreamUnavailableError, isRetryable } from '../../src/lib/errors.ts';
import { S3ObjectStore } from '../../src/storage/index.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';

let s3: TestS3;
let dir: string;
before(async () => {
  s3 = await startS3();
  dir = await mkdtemp(path.join(os.tmpdir(), 'mp-store-'));
});
after(async () => {
  await Promise.all([s3?.close(), rm(dir, { recursive: true, force: true })]);
});

const opts = { maxAttempts: 2, partSizeBytes: 5 * 1024 * 1024, allowPrivate: true };
const signal = new AbortController().signal;

describe('S3 object store', () => {
  it('puts files (multipart above one part) and streams with their content type', async () => {
    const bucket = await s3.createBucket();
    const store = new S3ObjectStore({ endpoint: s3.endpoint, bucket, credentials: s3.credentials }, opts);
    await store.check(signal);
    const big = path.join(dir, 'big.mp4');
    // Three parts (5 + 5 + 2 MiB) whose bytes differ, so a part out of place would show.
    const bytes = Buffer.alloc(12 * 1024 * 1024);
    for (let i = 0; i < bytes.length; i += 4) bytes.writeUInt32LE(i, i);
    await writeFile(big, bytes);
    await store.put('out/mp4/big.mp4', { file: big }, { contentType: 'video/mp4', signal });
    await store.put(
      'out/hls/index.m3u8',
      { stream: Readable.from(['#EXTM3U\n']) },
      { contentType: 'application/vnd.apple.mpegurl', signal },
    );
    assert.deepEqual(await s3.keys(bucket), ['out/hls/index.m3u8', 'out/mp4/big.mp4']);
    assert.deepEqual(await s3.head(bucket, 'out/mp4/big.mp4'), { contentType: 'video/mp4', size: bytes.length });
    assert.ok(
      (await s3.get(bucket, 'out/mp4/big.mp4')).body.equals(bytes),
      'the multipart object holds the file, part by part in order',
    );
    assert.equal((await s3.get(bucket, 'out/hls/index.m3u8')).body.toString(), '#EXTM3U\n');
    await store.close();
  });

  it('stops a multipart upload when its job is cancelled, leaving no object', async () => {
    const bucket = await s3.createBucket();
    const store = new S3ObjectStore({ endpoint: s3.endpoint, bucket, credentials: s3.credentials }, opts);
    const big = path.join(dir, 'cancelled.mp4');
    await writeFile(big, Buffer.alloc(16 * 1024 * 1024, 1));
    const ctrl = new AbortController();
    const put = store.put('out/mp4/cancelled.mp4', { file: big }, { contentType: 'video/mp4', signal: ctrl.signal });
    setImmediate(() => ctrl.abort());
    const err = await put.then(
      () => null,
      (e: Error) => e,
    );
    assert.ok(err instanceof CancelledError, String(err));
    assert.deepEqual(await s3.keys(bucket), []);
    await store.close();
  });

  it('refuses a wrong secret and a missing bucket at check(), not retried, secret never shown', async () => {
    const bucket = await s3.createBucket();
    const secret = 'definitely-wrong-secret';
    const bad = new S3ObjectStore(
      {
        endpoint: s3.endpoint,
        bucket,
        credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: secret },
      },
      opts,
    );
    const err = await bad.check(signal).then(
      () => null,
      (e: Error) => e,
    );
    assert.ok(err instanceof StorageDeniedError && !isRetryable(err), String(err));
    assert.match(err.message, /storage denied.*bucket/);
    assert.ok(err.message.includes(`"${bucket}"`) && !err.message.includes(secret));

    const none = new S3ObjectStore(
      { endpoint: s3.endpoint, bucket: 'no-such-bucket-here', credentials: s3.credentials },
      opts,
    );
    const err2 = await none.check(signal).then(
      () => null,
      (e: Error) => e,
    );
    assert.ok(err2 instanceof StorageDeniedError, String(err2));
    assert.match(err2.message, /"no-such-bucket-here" does not exist/);
  });

  it('reports an unreachable server as retryable', async () => {
    const store = new S3ObjectStore(
      { endpoint: 'http://127.0.0.1:9', bucket: 'b', credentials: s3.credentials },
      { ...opts, maxAttempts: 1 },
    );
    const err = await store.check(signal).then(
      () => null,
      (e: Error) => e,
    );
    assert.ok(err instanceof UpstreamUnavailableError && isRetryable(err), String(err));
    assert.match(err.message, /storage unreachable/);
  });

  it('refuses a private endpoint unless allowed', async () => {
    const store = new S3ObjectStore(
      { endpoint: s3.endpoint, bucket: 'b', credentials: s3.credentials },
      { ...opts, allowPrivate: false },
    );
    const err = await store.check(signal).then(
      () => null,
      (e: Error) => e,
    );
    assert.ok(err instanceof StorageDeniedError, String(err));
  });
});
