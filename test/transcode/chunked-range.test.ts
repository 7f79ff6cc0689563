// Issue #30: a chunk's input read by ranges, through the proxy on 127.0.0.1, from every kind
// of source (HTTP with the private-address guard, S3, the built-in store).
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/index.ts';
import { FolderStore } from '../../src/storage/builtin/index.ts';
import {
  openRangeReader,
  parseRange,
  startRangeProxy,
  storedRangeReader,
  type RangeReader,
} from '../../src/storage/index.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { serveRanges } from './chunked-helpers.ts';

const BYTES = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251));
let dir: string;
let web: TestHttp;
let s3: TestS3;
const signal = new AbortController().signal;
const options = (allowPrivateUrls: boolean) => ({
  ...loadConfig({ env: {}, overrides: { allowPrivateUrls } }),
});

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mp-range-'));
  const file = path.join(dir, 'bytes.bin');
  await writeFile(file, BYTES);
  web = await startHttp({ '/ranged': serveRanges(file).route, '/plain': serveFile(file) });
  s3 = await startS3();
});
after(async () => {
  await Promise.all([web?.close(), s3?.close(), rm(dir, { recursive: true, force: true })]);
});

/** GETs `range` of the proxy's object, as ffmpeg would. */
async function viaProxy(
  reader: RangeReader,
  range?: string,
): Promise<{ status: number; body: Buffer; headers: Headers }> {
  const proxy = await startRangeProxy(reader);
  try {
    const res = await fetch(proxy.url, range ? { headers: { range } } : {});
    return { status: res.status, body: Buffer.from(await res.arrayBuffer()), headers: res.headers };
  } finally {
    await proxy.close();
  }
}

describe('ranges', () => {
  it('parses the Range forms ffmpeg sends', () => {
    assert.deepEqual(parseRange('bytes=10-19', 100), { start: 10, end: 19 });
    assert.deepEqual(parseRange('bytes=90-', 100), { start: 90, end: 99 });
    assert.deepEqual(parseRange('bytes=-10', 100), { start: 90, end: 99 });
    assert.deepEqual(parseRange('bytes=90-500', 100), { start: 90, end: 99 });
    assert.equal(parseRange('bytes=100-', 100), null);
    assert.equal(parseRange(undefined, 100), undefined);
    assert.equal(parseRange('bytes=1-2,5-6', 100), undefined);
  });

  it('reads an HTTP source by ranges through the proxy', async () => {
    const reader = await openRangeReader({ url: web.url('/ranged') }, options(true), signal);
    assert.ok(reader);
    assert.equal(reader.size, BYTES.length);
    const part = await viaProxy(reader, 'bytes=1000-1999');
    assert.equal(part.status, 206);
    assert.equal(part.headers.get('content-range'), `bytes 1000-1999/${BYTES.length}`);
    assert.deepEqual(part.body, BYTES.subarray(1000, 2000));
    const tail = await viaProxy(reader, 'bytes=4990-');
    assert.deepEqual(tail.body, BYTES.subarray(4990));
    assert.equal((await viaProxy(reader, 'bytes=6000-')).status, 416);
  });

  it('has no reader for a source that answers ranges with the whole file (it is copied once)', async () => {
    assert.equal(await openRangeReader({ url: web.url('/plain') }, options(true), signal), undefined);
  });

  it('keeps the private-address guard: no reader for 127.0.0.1 unless private URLs are allowed', async () => {
    assert.equal(await openRangeReader({ url: web.url('/ranged') }, options(false), signal), undefined);
  });

  it('reads an S3 object and a built-in store object by ranges', async () => {
    const bucket = await s3.createBucket();
    await s3.put(bucket, 'in/bytes.bin', BYTES);
    const input = {
      type: 's3' as const,
      endpoint: s3.endpoint,
      bucket,
      credentials: s3.credentials,
      path: 'in/bytes.bin',
    };
    const reader = await openRangeReader(input, options(true), signal);
    assert.ok(reader);
    assert.equal(reader.size, BYTES.length);
    assert.deepEqual((await viaProxy(reader, 'bytes=0-99')).body, BYTES.subarray(0, 100));
    const store = new FolderStore(path.join(dir, 'media'));
    await store.putFile('pieces/p/source', path.join(dir, 'bytes.bin'), { contentType: 'x', signal });
    const stored = await storedRangeReader(store, 'pieces/p/source');
    assert.deepEqual((await viaProxy(stored, 'bytes=4000-4099')).body, BYTES.subarray(4000, 4100));
  });

  it('answers 404 to any other path than its own', async () => {
    const reader = await openRangeReader({ url: web.url('/ranged') }, options(true), signal);
    assert.ok(reader);
    const proxy = await startRangeProxy(reader);
    try {
      const res = await fetch(proxy.url.replace(/\/[0-9a-f]+\/source$/, '/guess/source'));
      assert.equal(res.status, 404);
    } finally {
      await proxy.close();
    }
  });
});
