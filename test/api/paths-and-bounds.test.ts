import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as ed25519 from '@ucanto/principal/ed25519';
import { InputUnreadableError, StorageDeniedError } from '../../src/lib/errors.ts';
import { checkedObjectKey, objectPathProblem } from '../../src/lib/object-path.ts';
import { DwebObjectStore } from '../../src/storage/dweb/index.ts';
import { LocalDirStore, S3InputSource, S3ObjectStore } from '../../src/storage/index.ts';
import { startTestServer, transcodeBody, type TestServer } from '../helpers/server.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';

// Issue #15, holes 4 and 5 (transcode side): output and input paths that climb out of their
// folder or bucket, and numbers that make absurd jobs (one-frame segments), are refused
// with a 422 naming the field and the rule, before anything is queued; every store asserts
// the path rule again on each key it writes.

/** Bad paths, each with the words of the rule the message must name. */
const BAD_PATHS: Array<{ name: string; path: string; rule: RegExp }> = [
  { name: 'a traversal to /etc', path: '/abs/../../../etc', rule: /must not contain \. or \.\. segments/ },
  { name: 'a .. segment at the end', path: 'out/..', rule: /must not contain \. or \.\. segments/ },
  { name: 'a . segment', path: '/out/./hls', rule: /must not contain \. or \.\. segments/ },
  { name: 'an empty segment', path: '/out//hls', rule: /must not contain empty segments \(\/\/\)/ },
  { name: 'two leading slashes', path: '//out/hls', rule: /must not contain empty segments/ },
  { name: 'two trailing slashes', path: '/out/hls//', rule: /must not contain empty segments/ },
  { name: 'a backslash', path: '/out\\..\\..\\etc', rule: /must not contain a backslash/ },
  { name: 'a question mark', path: '/out/hls?x=1', rule: /must not contain \? or #/ },
  { name: 'a hash', path: '/out/hls#frag', rule: /must not contain \? or #/ },
  { name: 'percent-encoded dots (lower case)', path: '/out/%2e%2e/etc', rule: /must not contain % \(percent-encoded/ },
  { name: 'percent-encoded dots (upper case)', path: '/out/%2E%2E/etc', rule: /must not contain % \(percent-encoded/ },
  { name: 'a percent-encoded slash', path: '/out%2f..%2fetc', rule: /must not contain % \(percent-encoded/ },
  { name: 'a percent-encoded backslash', path: '/out%5c..', rule: /must not contain % \(percent-encoded/ },
  { name: 'a double-encoded dot', path: '/out/%252e%252e/etc', rule: /must not contain % \(percent-encoded/ },
  { name: 'a NUL', path: '/out/hls\u0000.m3u8', rule: /must not contain control characters/ },
  { name: 'a line feed', path: '/out/hls\nX-Injected: 1', rule: /must not contain control characters/ },
  { name: 'a C1 control', path: '/out/\u0085hls', rule: /must not contain control characters/ },
  { name: 'a lone surrogate', path: '/out/\ud800', rule: /must be valid Unicode/ },
  // 513 two-byte characters: 1,026 bytes in 514 characters, under the schema's maxLength.
  {
    name: 'over 1,024 bytes of UTF-8',
    path: `/${'é'.repeat(513)}`,
    rule: /must be at most 1024 bytes in UTF-8 \(this one is 1027\)/,
  },
  { name: 'a segment over 255 bytes', path: `/out/${'a'.repeat(256)}`, rule: /must not have a segment over 255 bytes/ },
];

// Exactly 1,024 bytes of UTF-8, no segment over 255 bytes: the longest path accepted.
const AT_1024_BYTES = `/${'é'.repeat(127)}/${'a'.repeat(255)}/${'b'.repeat(255)}/${'c'.repeat(254)}/d`;

describe('the object path rule (lib/object-path.ts)', () => {
  for (const c of BAD_PATHS) {
    it(`refuses ${c.name}`, () => {
      assert.match(objectPathProblem(c.path, { folder: true }) ?? 'accepted', c.rule);
      assert.match(objectPathProblem(c.path) ?? 'accepted', c.rule);
    });
  }

  it('accepts nested folders and names, with or without the leading slash, up to 1,024 bytes', () => {
    for (const p of [
      '/out/hls',
      'out/mp4',
      '/a/b/c/d/e/f',
      '/videos/2024-05-01/clip_1.v2',
      '/vidéos/日本',
      '/...x/a..b/.hidden',
      AT_1024_BYTES,
    ]) {
      assert.equal(objectPathProblem(p), null, p);
      assert.equal(objectPathProblem(p, { folder: true }), null, p);
    }
    assert.equal(Buffer.byteLength(AT_1024_BYTES), 1024);
  });

  it('lets a folder end with one slash, or be the root; an object must end with a name', () => {
    assert.equal(objectPathProblem('/out/hls/', { folder: true }), null);
    assert.equal(objectPathProblem('/', { folder: true }), null);
    assert.match(objectPathProblem('/in/video/') ?? '', /must name an object/);
    assert.match(objectPathProblem('/') ?? '', /must name an object/);
  });

  it('gives a store its key without the leading slash, or a StorageDeniedError that is never retried', () => {
    assert.equal(checkedObjectKey('out/hls/360p0/0.ts'), 'out/hls/360p0/0.ts');
    assert.equal(checkedObjectKey('/out/mp4/720p0.mp4'), 'out/mp4/720p0.mp4');
    for (const key of ['a/../b', '../escape', '/out//x', 'out/%2e%2e/x', 'out/x/']) {
      assert.throws(
        () => checkedObjectKey(key),
        (err: unknown) =>
          err instanceof StorageDeniedError && !err.retryable && /storage key refused/.test(err.message),
        key,
      );
    }
  });
});

describe('every store refuses a key that breaks the path rule, whoever built it', () => {
  let s3: TestS3;
  let dir: string;
  const put = { contentType: 'video/mp2t', signal: new AbortController().signal };
  before(async () => {
    s3 = await startS3();
    dir = await mkdtemp(join(tmpdir(), 'mp-paths-'));
    await writeFile(join(dir, 'seg.ts'), 'segment bytes');
  });
  after(async () => {
    await Promise.all([s3?.close(), rm(dir, { recursive: true, force: true })]);
  });

  it('s3: nothing lands in the bucket for a/../b, and the error is not retried', async () => {
    const bucket = await s3.createBucket();
    const store = new S3ObjectStore(
      { endpoint: s3.endpoint, bucket, credentials: s3.credentials },
      { maxAttempts: 1, partSizeBytes: 5 * 1024 * 1024, allowPrivate: true },
    );
    for (const key of ['a/../b', 'out/../../escape.ts', 'out/%2e%2e/x.ts']) {
      await assert.rejects(
        store.put(key, { file: join(dir, 'seg.ts') }, put),
        (err: unknown) => err instanceof StorageDeniedError && !err.retryable,
        key,
      );
    }
    await assert.rejects(store.parts.open('a/../b.mp4', put), StorageDeniedError);
    await store.put('out/hls/0.ts', { file: join(dir, 'seg.ts') }, put);
    assert.deepEqual(await s3.keys(bucket), ['out/hls/0.ts']);
    await store.close();
  });

  it('s3 input: input.path a/../b is refused before any request', async () => {
    const input = new S3InputSource(
      { endpoint: 'http://127.0.0.1:9', bucket: 'in', credentials: s3.credentials, path: '/a/../b.mp4' },
      { limits: { maxBytes: 1024, timeoutMs: 1000, idleTimeoutMs: 1000 }, maxAttempts: 1, allowPrivate: true },
    );
    await assert.rejects(
      input.fetch({ dest: join(dir, 'in.mp4'), signal: put.signal }),
      (err: unknown) =>
        err instanceof InputUnreadableError && /input\.path: must not contain \. or \.\. segments/.test(err.message),
    );
  });

  it('local (mediaplane transcode --out): a/../b is refused and nothing is written', async () => {
    const root = join(dir, 'local-out');
    const store = new LocalDirStore(root);
    await store.check();
    for (const key of ['a/../b', '../escape', 'a/..\\..\\b'])
      await assert.rejects(store.put(key, { file: join(dir, 'seg.ts') }, put), StorageDeniedError, key);
    assert.deepEqual(await readdir(root), []);
    assert.deepEqual((await readdir(dir)).sort(), ['local-out', 'seg.ts']);
  });

  it('dweb: a/../b is refused and nothing is staged', async () => {
    const staging = await mkdtemp(join(dir, 'dweb-'));
    const store = new DwebObjectStore({
      proof: 'unused',
      agent: await ed25519.generate(),
      serviceUrl: 'http://127.0.0.1:9',
      serviceDid: 'did:web:upload.example',
      gateway: 'https://gw.example/',
      stagingParent: staging,
    });
    await assert.rejects(store.put('a/../b', { file: join(dir, 'seg.ts') }, put), StorageDeniedError);
    const [stagingDir] = await readdir(staging);
    assert.deepEqual(stagingDir ? await readdir(join(staging, stagingDir), { recursive: true }) : [], []);
    await store.discard();
  });
});

describe('POST /api/transcode: paths and numeric bounds', () => {
  let server: TestServer;
  let refusedKey: string;
  let acceptedKey: string;
  before(async () => {
    server = await startTestServer({ roles: { api: true, worker: false } });
    refusedKey = await server.key('refused');
    acceptedKey = await server.key('accepted');
  });
  after(() => server.stop());

  async function refused(body: Record<string, unknown>, expect: RegExp): Promise<void> {
    const res = await server.call('POST', '/api/transcode', { key: refusedKey, body });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    const errors: string[] = res.body.errors;
    assert.ok(
      errors.some((m) => expect.test(m)),
      `${JSON.stringify(errors)} should match ${expect}`,
    );
  }

  async function accepted(body: Record<string, unknown>): Promise<Record<string, any>> {
    const res = await server.call('POST', '/api/transcode', { key: acceptedKey, body });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  }

  const s3Input = (path: string) => ({
    type: 's3',
    endpoint: 'http://127.0.0.1:9000',
    bucket: 'in',
    path,
    credentials: { accessKeyId: 'AKIAIN', secretAccessKey: 'in-secret' },
  });
  const profile = (over: Record<string, unknown> = {}) => ({
    name: 'p',
    width: 640,
    height: 360,
    bitrate: 1_000_000,
    ...over,
  });

  for (const kind of ['hls', 'mp4', 'fmp4'] as const) {
    it(`refuses each bad outputs.${kind}.path with the rule it breaks`, async () => {
      for (const c of BAD_PATHS) {
        await refused(
          transcodeBody({ outputs: { [kind]: { path: c.path } } }),
          new RegExp(`^outputs\\.${kind}\\.path: ${c.rule.source}`),
        );
      }
    });
  }

  it('refuses each bad input.path of an S3 input with the rule it breaks', async () => {
    for (const c of BAD_PATHS)
      await refused(transcodeBody({ input: s3Input(c.path) }), new RegExp(`^input\\.path: ${c.rule.source}`));
    await refused(transcodeBody({ input: s3Input('/in/folder/') }), /^input\.path: must name an object/);
  });

  it('refuses a profile name that would climb out of the HLS folder', async () => {
    await refused(
      transcodeBody({ profiles: [profile({ name: '..' })] }),
      /^profiles\[0\]\.name: must not contain \. or \.\. segments/,
    );
  });

  it('refuses segment durations outside 1 to 60 seconds', async () => {
    await refused(transcodeBody({ targetSegmentSizeSecs: 1e-300 }), /^targetSegmentSizeSecs: must be >= 1/);
    await refused(transcodeBody({ targetSegmentSizeSecs: 0.5 }), /^targetSegmentSizeSecs: must be >= 1/);
    await refused(transcodeBody({ targetSegmentSizeSecs: 61 }), /^targetSegmentSizeSecs: must be <= 60/);
  });

  it('refuses frame rates, keyframe intervals and sizes out of their bounds', async () => {
    await refused(transcodeBody({ profiles: [profile({ fps: 0 })] }), /^profiles\[0\]\.fps: must be >= 1/);
    await refused(transcodeBody({ profiles: [profile({ fps: 1e-300 })] }), /^profiles\[0\]\.fps: must be >= 1/);
    await refused(transcodeBody({ profiles: [profile({ fps: 241 })] }), /^profiles\[0\]\.fps: must be <= 240/);
    await refused(
      transcodeBody({ profiles: [profile({ fps: 24, fpsDen: 1001 })] }),
      /^profiles\[0\]\.fps: the frame rate fps\/fpsDen must be from 1 to 240 \(this one is 0\.02398\)/,
    );
    await refused(
      transcodeBody({ profiles: [profile({ fps: 30, fpsDen: 0 })] }),
      /^profiles\[0\]\.fpsDen: must be >= 1/,
    );
    await refused(
      transcodeBody({ profiles: [profile({ fps: 30, fpsDen: 1002 })] }),
      /^profiles\[0\]\.fpsDen: must be <= 1001/,
    );
    for (const gop of ['1e-300', '0', '0.0', '61', '-1', 'intr', '2s', ' 2', 'NaN', 'Infinity', '0.0001']) {
      await refused(
        transcodeBody({ profiles: [profile({ gop })] }),
        /^profiles\[0\]\.gop: must be a number of seconds from 0\.001 to 60 written as a string/,
      );
    }
    await refused(transcodeBody({ profiles: [profile({ quality: 52 })] }), /^profiles\[0\]\.quality: must be <= 51/);
    await refused(
      transcodeBody({ profiles: [profile({ bitrate: 200_000_001 })] }),
      /^profiles\[0\]\.bitrate: must be <= 200000000/,
    );
    await refused(
      transcodeBody({ profiles: [profile({ width: 7680, height: 7680 })] }),
      /^profiles\[0\]: width x height must be at most 35651584 pixels/,
    );
    const eightK = (name: string) => profile({ name, width: 7680, height: 4320, bitrate: 50_000_000 });
    await refused(
      transcodeBody({ profiles: [eightK('a'), eightK('b'), eightK('c')] }),
      /^profiles: the ladder's width x height summed over all profiles must be at most 71303168 pixels \(this one is 99532800\)/,
    );
  });

  it('states the bounds in the OpenAPI document', async () => {
    const doc = (await server.call('GET', '/api/openapi.json', { key: acceptedKey })).body;
    const body = doc.paths['/api/transcode'].post.requestBody.content['application/json'].schema;
    const segment = body.properties.targetSegmentSizeSecs;
    assert.equal(segment.minimum, 1);
    assert.equal(segment.maximum, 60);
    assert.match(segment.description, /from 1 to 60/);
    assert.match(
      body.properties.outputs.properties.hls.properties.path.description,
      /\. and \.\. segments, empty segments \(\/\/\), backslashes, \?, #, %/,
    );
  });

  it('queued none of the refused requests', async () => {
    const list = await server.call('GET', '/api/task', { key: refusedKey });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body, []);
  });

  it('accepts nested paths (leading slash added, one trailing slash kept) and the bounds themselves', async () => {
    const task = await accepted(
      transcodeBody({
        input: s3Input('in/2024/05/clip.v2.mp4'),
        outputs: { hls: { path: 'out/a/b/c/hls' }, mp4: { path: '/vidéos/日本/mp4/' }, fmp4: { path: '/' } },
        targetSegmentSizeSecs: 1,
        profiles: [profile({ fps: 24, gop: '0.5', quality: 51 })],
      }),
    );
    assert.deepEqual(task.params.outputs, {
      hls: { path: '/out/a/b/c/hls' },
      mp4: { path: '/vidéos/日本/mp4/' },
      fmp4: { path: '/' },
    });
    assert.equal(task.params['transcode-file'].input.path, '/in/2024/05/clip.v2.mp4');
    // 240/240 is exactly 1 frame per second: the lower bound of the frame rate.
    await accepted(
      transcodeBody({
        targetSegmentSizeSecs: 60,
        profiles: [
          profile({ fps: 240, gop: '60' }),
          profile({ name: 'r', fps: 240, fpsDen: 240, gop: '0.001' }),
          profile({ name: 'i', gop: 'intra' }),
        ],
      }),
    );
    await accepted(
      transcodeBody({
        outputs: { hls: { path: AT_1024_BYTES } },
        profiles: [
          profile({ name: 'a', width: 7680, height: 4320 }),
          profile({ name: 'b', width: 7680, height: 4320 }),
        ],
      }),
    );
    const list = await server.call('GET', '/api/task', { key: acceptedKey });
    assert.equal(list.body.length, 3);
  });
});
