// The built-in store (issue #27) in both its kinds, a folder and an S3-protocol bucket, held
// to the same contract: a file is visible only once whole, ranges read what they say, a move
// takes the file, a job reads a stored object as its input, a prefix is removed in whole, and
// every key meets the path rule.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { PassThrough, type Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { CreateBucketCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { ConfigError } from '../../src/config/index.ts';
import { StorageDeniedError } from '../../src/lib/errors.ts';
import { type BuiltinStore, createBuiltinStore, FolderStore } from '../../src/storage/builtin/index.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';

const PART = 5 * 1024 * 1024;
const signal = new AbortController().signal;

let s3: TestS3;
let dir: string;
before(async () => {
  s3 = await startS3();
  dir = await mkdtemp(path.join(os.tmpdir(), 'mp-builtin-'));
});
after(async () => {
  await Promise.all([s3?.close(), rm(dir, { recursive: true, force: true })]);
});

const settings = (over: Record<string, string | undefined> = {}) => ({
  dataDir: dir,
  s3MaxAttempts: 2,
  uploadPartSizeBytes: PART,
  inputTimeoutMs: 60_000,
  inputIdleTimeoutMs: 30_000,
  ...over,
});

/** A bucket store at `url` on the S3 server `endpoint` (the test server's keys unless `secret`). */
const storeAt = (url: string, endpoint: string, secret = s3.credentials.secretAccessKey): BuiltinStore =>
  createBuiltinStore(
    settings({
      storeUrl: url,
      storeEndpoint: endpoint,
      storeAccessKeyId: s3.credentials.accessKeyId,
      storeSecretAccessKey: secret,
    }),
  );

/** A bucket store on the test S3 server, its keys under `media/`. */
async function bucketStore(): Promise<{ store: BuiltinStore; bucket: string }> {
  const bucket = await s3.createBucket();
  return { store: storeAt(`s3://${bucket}/media`, s3.endpoint), bucket };
}

const local = async (name: string, body: Buffer | string): Promise<string> => {
  const file = path.join(dir, `${name}-${Math.random().toString(36).slice(2)}`);
  await writeFile(file, body);
  return file;
};
const exists = (file: string) =>
  access(file).then(
    () => true,
    () => false,
  );
const bytes = (r: Readable) => text(r);
const refused = async (p: Promise<unknown>): Promise<void> => {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  assert.ok(err instanceof StorageDeniedError, `refused with StorageDeniedError, got ${String(err)}`);
};

const kinds: { name: string; make(): Promise<BuiltinStore> }[] = [
  { name: 'folder', make: async () => new FolderStore(await mkdtemp(path.join(dir, 'media-'))) },
  { name: 's3', make: async () => (await bucketStore()).store },
];

for (const kind of kinds) {
  describe(`the built-in store: ${kind.name}`, () => {
    let store: BuiltinStore;
    before(async () => {
      store = await kind.make();
    });

    it("shows a writer's file only once it is whole, then stats and reads it", async () => {
      const writer = store.writer('task/t1/');
      await writer.check(signal);
      const body = new PassThrough();
      const put = writer.put(
        'hls/index.m3u8',
        { stream: body },
        { contentType: 'application/vnd.apple.mpegurl', signal },
      );
      body.write('#EXTM3U\n');
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(await store.stat('task/t1/hls/index.m3u8'), undefined, 'half a file is not there');
      body.end('#EXT-X-VERSION:3\n');
      await put;
      await writer.close(signal);
      const got = await store.stat('task/t1/hls/index.m3u8');
      assert.equal(got?.size, 25);
      assert.match(got?.etag ?? '', /^"[^"]+"$/, 'a strong, quoted ETag');
      assert.ok(got && Math.abs(got.lastModified.getTime() - Date.now()) < 600_000, 'last modified: now');
      assert.equal(await bytes(await store.read('task/t1/hls/index.m3u8')), '#EXTM3U\n#EXT-X-VERSION:3\n');
      assert.equal(await bytes(await store.read('task/t1/hls/index.m3u8', { start: 1, end: 5 })), 'EXTM3');
      assert.equal(await bytes(await store.read('task/t1/hls/index.m3u8', { start: 24, end: 24 })), '\n');
      assert.equal(await store.stat('task/t1/hls/none.ts'), undefined);
      assert.equal(await store.stat('task/t1/hls'), undefined, 'a folder is no object');
    });

    it('writes files through a writer, and in parts where the writer takes parts', async () => {
      const writer = store.writer('task/t2/');
      await writer.put('mp4/a.mp4', { file: await local('a', 'mp4 bytes') }, { contentType: 'video/mp4', signal });
      if (writer.parts) {
        // Two parts sent out of order, as the pipeline sends an MP4's head last.
        const big = Buffer.alloc(PART + 10, 7);
        big.write('head', 0);
        const file = await local('big', big);
        const parts = await writer.parts.open('mp4/big.mp4', { contentType: 'video/mp4', signal });
        await parts.put(2, { file, start: PART, length: 10 });
        await parts.put(1, { file, start: 0, length: PART });
        await parts.complete();
        assert.equal((await store.stat('task/t2/mp4/big.mp4'))?.size, PART + 10);
        assert.equal(await bytes(await store.read('task/t2/mp4/big.mp4', { start: 0, end: 3 })), 'head');
      }
      await writer.close(signal);
      assert.equal(await bytes(await store.read('task/t2/mp4/a.mp4')), 'mp4 bytes');
    });

    it('puts a local file by copy (the file stays) and by move (the file is taken), multipart when big', async () => {
      const copied = await local('copy', 'copied');
      await store.putFile('asset/p1/source', copied, { contentType: 'video/mp4', signal });
      assert.ok(await exists(copied), 'a copy leaves the file');
      assert.equal(await bytes(await store.read('asset/p1/source')), 'copied');

      // Over one part: S3 sends it as a multipart upload.
      const big = Buffer.alloc(2 * PART + 3);
      for (let i = 0; i + 4 <= big.length; i += 4) big.writeUInt32LE(i, i);
      const moved = await local('move', big);
      await store.putFile('asset/p2/source', moved, { contentType: 'video/mp4', signal, move: true });
      assert.equal(await exists(moved), false, 'a move takes the file');
      assert.equal((await store.stat('asset/p2/source'))?.size, big.length);
      const tail = await store.read('asset/p2/source', { start: PART - 4, end: PART + 3 });
      const chunks: Buffer[] = [];
      for await (const c of tail) chunks.push(c as Buffer);
      assert.ok(Buffer.concat(chunks).equals(big.subarray(PART - 4, PART + 4)), 'bytes across the part boundary');
    });

    it('gives a job the stored object as its input', async () => {
      await store.putFile('asset/p3/source', await local('in', 'the source'), { contentType: 'video/mp4', signal });
      const input = store.input('asset/p3/source');
      assert.ok(!input.description.includes(s3.credentials.secretAccessKey));
      const fetched = await input.fetch({ dest: path.join(dir, `dest-${kind.name}`), signal });
      assert.equal(fetched.size, 10);
      assert.equal(await readFile(fetched.path, 'utf8'), 'the source');
    });

    it('removes every object under a prefix and nothing beside it', async () => {
      const file = await local('x', 'x');
      for (const key of ['asset/r1/source', 'asset/r1/hls/index.m3u8', 'asset/r1/hls/360p0/0.ts', 'asset/r10/source'])
        await store.putFile(key, file, { contentType: 'application/octet-stream', signal });
      await store.removePrefix('asset/r1/');
      for (const key of ['asset/r1/source', 'asset/r1/hls/index.m3u8', 'asset/r1/hls/360p0/0.ts'])
        assert.equal(await store.stat(key), undefined, `${key} is gone`);
      assert.ok(await store.stat('asset/r10/source'), 'a prefix is a folder, not the start of a name');
      await store.removePrefix('asset/r1/');
      await store.removePrefix('asset/never/');
    });

    it('refuses keys that break the path rule', async () => {
      const writer = store.writer('task/t3/');
      const opts = { contentType: 'video/mp2t', signal };
      await refused(writer.put('../escape.ts', { file: await local('e', 'e') }, opts));
      await refused(writer.put('a//b.ts', { file: await local('e', 'e') }, opts));
      await refused(writer.put('a\\b.ts', { file: await local('e', 'e') }, opts));
      await writer.discard();
      for (const key of ['task/../escape', 'task/%2e%2e/x', '../x', 'task//x', 'task/x/', '.partial/x'])
        assert.equal(await store.stat(key), undefined, `stat(${key})`);
      await refused(store.read('task/../../x'));
      await refused(store.putFile('asset/../../x', await local('e', 'e'), opts));
      await refused(store.removePrefix(''));
      await refused(store.removePrefix('asset/..'));
      assert.throws(() => store.input('../x'), StorageDeniedError);
    });
  });
}

/**
 * s3rver in a child process with OpenSSL's legacy provider: it makes ListObjectsV2's
 * continuation tokens with DES, which Node 24 refuses otherwise (so a truncated listing, more
 * than 1000 keys, fails in the tests' own s3rver).
 */
async function legacyS3(): Promise<{ endpoint: string; stop(): Promise<void> }> {
  const helper = pathToFileURL(path.resolve(import.meta.dirname, '../helpers/s3.ts')).href;
  const script = `import { startS3 } from ${JSON.stringify(helper)};
const s3 = await startS3({ verify: false });
process.stdout.write(JSON.stringify({ endpoint: s3.endpoint }) + '\\n');
process.stdin.resume();
process.stdin.on('end', () => s3.close().then(() => process.exit(0)));`;
  const child = spawn(process.execPath, ['--openssl-legacy-provider', '--input-type=module', '-e', script], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
  const { endpoint } = JSON.parse(line) as { endpoint: string };
  return {
    endpoint,
    stop: async () => {
      child.stdin.end();
      await once(child, 'exit');
    },
  };
}

describe('the bucket store', () => {
  it('removes more objects than one list page holds', async () => {
    const server = await legacyS3();
    const client = new S3Client({
      endpoint: server.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: s3.credentials,
    });
    try {
      const bucket = `mp-many-${Date.now().toString(36)}`;
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
      const put = (Key: string) => client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: 'x' }));
      const keys = Array.from({ length: 1010 }, (_, i) => `media/asset/many/${String(i).padStart(4, '0')}.ts`);
      for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map(put));
      await put('media/asset/other/source');
      const store = storeAt(`s3://${bucket}/media`, server.endpoint);
      await store.removePrefix('asset/many/');
      const left = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
      assert.deepEqual(
        left.Contents?.map((c) => c.Key),
        ['media/asset/other/source'],
      );
    } finally {
      client.destroy();
      await server.stop();
    }
  });

  it('keeps keys under the URL prefix, and names bucket and endpoint but no secret', async () => {
    const { store, bucket } = await bucketStore();
    await store.putFile('asset/k/source', await local('k', 'k'), { contentType: 'video/mp4', signal });
    assert.deepEqual(await s3.keys(bucket), ['media/asset/k/source']);
    assert.ok(store.description.includes(`"${bucket}"`) && store.description.includes(s3.endpoint));
    assert.ok(!store.description.includes(s3.credentials.secretAccessKey));
  });

  it('refuses a wrong secret without showing it', async () => {
    const bucket = await s3.createBucket();
    const secret = 'a-wrong-secret-value';
    const store = storeAt(`s3://${bucket}`, s3.endpoint, secret);
    const err = await store.read('asset/x/source').catch((e: Error) => e);
    assert.ok(err instanceof StorageDeniedError, String(err));
    assert.ok(!err.message.includes(secret) && err.message.includes('MEDIAPLANE_STORE_SECRET_ACCESS_KEY'));
  });

  it('signs URLs a client can GET without keys', async () => {
    // The tests' SigV4 proxy checks Authorization headers only; s3rver alone serves presigned URLs.
    const plain = await startS3({ verify: false });
    try {
      const bucket = await plain.createBucket();
      const store = storeAt(`s3://${bucket}/p`, plain.endpoint, plain.credentials.secretAccessKey);
      await store.putFile('asset/s/hls/0.ts', await local('s', 'segment'), { contentType: 'video/mp2t', signal });
      assert.ok(store.presign, 'a bucket store signs URLs');
      const url = await store.presign('asset/s/hls/0.ts', 60);
      assert.ok(url.startsWith(`${plain.endpoint}/${bucket}/p/asset/s/hls/0.ts?`), url);
      assert.match(url, /X-Amz-Expires=60/);
      const res = await fetch(url);
      assert.equal(res.status, 200);
      assert.equal(await res.text(), 'segment');
    } finally {
      await plain.close();
    }
  });

  it('stops start-up with a message naming the setting, never quoting a secret', () => {
    const bad = (over: Record<string, string | undefined>, pattern: RegExp) => {
      const err = (() => {
        try {
          createBuiltinStore(settings(over));
        } catch (e) {
          return e;
        }
      })();
      assert.ok(err instanceof ConfigError, String(err));
      assert.match(err.message, pattern);
      assert.ok(!err.message.includes('SECRETVALUE'), err.message);
    };
    const keys = { storeAccessKeyId: 'id', storeSecretAccessKey: 'SECRETVALUE' };
    bad({ storeUrl: 'https://bucket/x', ...keys }, /MEDIAPLANE_STORE_URL: must be s3:\/\/BUCKET/);
    bad({ storeUrl: 's3://id:SECRETVALUE@bucket/x', ...keys }, /MEDIAPLANE_STORE_URL/);
    bad({ storeUrl: 's3://bucket/a/../b', ...keys }, /MEDIAPLANE_STORE_URL: the prefix.*\.\./);
    bad({ storeUrl: 's3://bucket//b', ...keys }, /MEDIAPLANE_STORE_URL: the prefix/);
    bad({ storeUrl: 's3://bucket', storeEndpoint: 'ftp://x', ...keys }, /MEDIAPLANE_STORE_ENDPOINT/);
    bad({ storeUrl: 's3://bucket', storeAccessKeyId: 'id' }, /MEDIAPLANE_STORE_SECRET_ACCESS_KEY/);
    bad({ storeUrl: 's3://bucket' }, /MEDIAPLANE_STORE_ACCESS_KEY_ID/);
    assert.ok(createBuiltinStore(settings()) instanceof FolderStore, 'unset: the folder store');
  });
});
