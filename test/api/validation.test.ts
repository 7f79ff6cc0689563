import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { databaseKinds, startTestServer, transcodeBody, type TestServer } from '../helpers/server.ts';

// Each bad body must answer 422 (or 400 for malformed JSON) with messages that name the
// field and the rule, never a 500, and nothing may be queued.

const base = transcodeBody();
const storage = base.storage as Record<string, unknown>;

const cases: Array<{ name: string; body?: unknown; raw?: string; status: number; expect: RegExp }> = [
  { name: 'malformed JSON', raw: '{"input": ', status: 400, expect: /not valid JSON/ },
  { name: 'body is an array', body: [1, 2], status: 422, expect: /\(body\): must be an object/ },
  { name: 'missing input', body: { ...base, input: undefined }, status: 422, expect: /^input: is required/ },
  { name: 'missing outputs', body: { ...base, outputs: undefined }, status: 422, expect: /^outputs: is required/ },
  { name: 'empty outputs', body: { ...base, outputs: {} }, status: 422, expect: /^outputs: must have at least 1/ },
  {
    name: 'unknown top-level key',
    body: { ...base, colour: 'blue' },
    status: 422,
    expect: /^colour: is not a known property/,
  },
  {
    name: 'input.url not a string',
    body: { ...base, input: { url: 42 } },
    status: 422,
    expect: /^input\.url: must be a string/,
  },
  {
    name: 'input.url ftp scheme',
    body: { ...base, input: { url: 'ftp://example.com/a.mp4' } },
    status: 422,
    expect: /^input\.url: must start with https:\/\/, http:\/\/, ipfs:\/\/ or ar:\/\//,
  },
  {
    name: 'input.url not a URL',
    body: { ...base, input: { url: 'https://' } },
    status: 422,
    expect: /^input\.url: must be an absolute URL/,
  },
  {
    name: 'subdomain-style IPFS gateway',
    body: {
      ...base,
      input: { url: 'https://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi.ipfs.dweb.link/video.mp4' },
    },
    status: 422,
    expect: /input\.url: subdomain-style gateway URLs are not supported; use the path style/,
  },
  {
    name: 'ipfs URI without CID',
    body: { ...base, input: { url: 'ipfs://' } },
    status: 422,
    expect: /^input\.url: must be ipfs:\/\/<id>/,
  },
  {
    name: 'input URL with a password',
    body: { ...base, input: { url: 'https://user:pw@example.com/a.mp4' } },
    status: 422,
    expect: /^input\.url: must not carry a user name or password/,
  },
  {
    name: 's3 input without path',
    body: {
      ...base,
      input: {
        type: 's3',
        endpoint: 'https://s3.example.com',
        bucket: 'b',
        credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
      },
    },
    status: 422,
    expect: /^input\.path: is required/,
  },
  {
    name: 's3 input with an empty secret',
    body: {
      ...base,
      input: {
        type: 's3',
        endpoint: 'https://s3.example.com',
        bucket: 'b',
        path: '/a.mp4',
        credentials: { accessKeyId: 'a', secretAccessKey: '' },
      },
    },
    status: 422,
    expect: /^input\.credentials\.secretAccessKey: must NOT have fewer than 1 characters/,
  },
  {
    name: 'unknown storage type',
    body: { ...base, storage: { type: 'ftp' } },
    status: 422,
    expect: /^storage\.type: must be one of "s3", "dweb\.storage", "web3\.storage"/,
  },
  {
    name: 'storage without bucket',
    body: { ...base, storage: { ...storage, bucket: undefined } },
    status: 422,
    expect: /^storage\.bucket: is required/,
  },
  {
    name: 'storage without credentials',
    body: { ...base, storage: { ...storage, credentials: undefined } },
    status: 422,
    expect: /^storage\.credentials: is required/,
  },
  {
    name: 'storage endpoint not http',
    body: { ...base, storage: { ...storage, endpoint: 'file:///etc/passwd' } },
    status: 422,
    expect: /^storage\.endpoint: must start with https:\/\/ or http:\/\//,
  },
  {
    name: 'dweb storage without proof',
    body: { ...base, storage: { type: 'dweb.storage', credentials: {} } },
    status: 422,
    expect: /^storage\.credentials\.proof: is required/,
  },
  {
    name: 'output path not a string',
    body: { ...base, outputs: { hls: { path: 5 } } },
    status: 422,
    expect: /^outputs\.hls\.path: must be a string/,
  },
  {
    name: 'unknown output kind',
    body: { ...base, outputs: { dash: { path: '/x' } } },
    status: 422,
    expect: /^outputs\.dash: is not a known property/,
  },
  {
    name: 'profile bitrate too low',
    body: { ...base, profiles: [{ name: 'p', width: 640, height: 360, bitrate: 100 }] },
    status: 422,
    expect: /^profiles\[0\]\.bitrate: must be >= 400/,
  },
  {
    name: 'profile width too small',
    body: { ...base, profiles: [{ name: 'p', width: 64, height: 360, bitrate: 1000 }] },
    status: 422,
    expect: /^profiles\[0\]\.width: must be >= 128/,
  },
  {
    name: 'profile unknown encoder',
    body: { ...base, profiles: [{ name: 'p', width: 640, height: 360, bitrate: 1000, encoder: 'AV2' }] },
    status: 422,
    expect: /^profiles\[0\]\.encoder: must be one of "H\.264", "HEVC", "VP8", "VP9"/,
  },
  {
    name: 'profile unknown h264 profile',
    body: { ...base, profiles: [{ name: 'p', width: 640, height: 360, bitrate: 1000, profile: 'H264Ultra' }] },
    status: 422,
    expect: /^profiles\[0\]\.profile: must be one of/,
  },
  {
    name: 'profile odd width',
    body: { ...base, profiles: [{ name: 'p', width: 641, height: 360, bitrate: 1000 }] },
    status: 422,
    expect: /^profiles\[0\]: width and height must be even/,
  },
  {
    name: 'duplicate profile names',
    body: {
      ...base,
      profiles: [
        { name: 'p', width: 640, height: 360, bitrate: 1000 },
        { name: 'p', width: 1280, height: 720, bitrate: 1000 },
      ],
    },
    status: 422,
    expect: /^profiles\[1\]\.name: must be unique/,
  },
  {
    name: 'empty profiles array',
    body: { ...base, profiles: [] },
    status: 422,
    expect: /^profiles: must NOT have fewer than 1 items/,
  },
  {
    name: 'segment size zero',
    body: { ...base, targetSegmentSizeSecs: 0 },
    status: 422,
    expect: /^targetSegmentSizeSecs: must be >= 1/,
  },
  {
    name: 'segment size a string',
    body: { ...base, targetSegmentSizeSecs: '6' },
    status: 422,
    expect: /^targetSegmentSizeSecs: must be a number/,
  },
  { name: 'c2pa not a boolean', body: { ...base, c2pa: 'yes' }, status: 422, expect: /^c2pa: must be a boolean/ },
  {
    name: 'c2pa without signing configured',
    body: { ...base, c2pa: true },
    status: 422,
    expect: /^c2pa: C2PA signing is not configured on this server/,
  },
  {
    name: 'creatorId of an unknown type',
    body: { ...base, creatorId: { type: 'verified', value: 'x' } },
    status: 422,
    expect: /^creatorId\.type: must be "unverified"/,
  },
];

for (const { kind, skip } of await databaseKinds())
  describe(`POST /api/transcode validation (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let key: string;
    before(async () => {
      server = await startTestServer({ database: kind, roles: { api: true, worker: false } });
      key = await server.key('alice');
    });
    after(() => server.stop());

    for (const c of cases) {
      it(`refuses ${c.name}`, async () => {
        const res = await server.call('POST', '/api/transcode', {
          key,
          ...(c.raw !== undefined ? { raw: c.raw } : { body: c.body }),
        });
        assert.equal(res.status, c.status, JSON.stringify(res.body));
        assert.ok(Array.isArray(res.body.errors) && res.body.errors.length > 0, 'errors is a non-empty array');
        assert.ok(
          res.body.errors.some((m: string) => c.expect.test(m)),
          `${JSON.stringify(res.body.errors)} should match ${c.expect}`,
        );
      });
    }

    it('refuses private addresses unless the operator allows them', async () => {
      const strict = await startTestServer({
        database: kind,
        roles: { api: true, worker: false },
        settings: { allowPrivateUrls: false },
      });
      try {
        const k = await strict.key('bob');
        for (const url of [
          'http://127.0.0.1/a.mp4',
          'http://169.254.169.254/latest/meta-data',
          'http://10.0.0.5/a.mp4',
          'http://[::1]/a.mp4',
          'http://localhost:8080/a.mp4',
        ]) {
          const res = await strict.call('POST', '/api/transcode', { key: k, body: transcodeBody({ input: { url } }) });
          assert.equal(res.status, 422, url);
          assert.match(res.body.errors.join(' '), /input\.url: address not allowed/);
        }
        const s3 = await strict.call('POST', '/api/transcode', {
          key: k,
          body: transcodeBody({ input: { url: 'https://example.com/a.mp4' } }),
        });
        assert.equal(s3.status, 422);
        assert.match(s3.body.errors.join(' '), /storage\.endpoint: address not allowed/);
      } finally {
        await strict.stop();
      }
    });

    it('answers 413 for a body over the limit and queues nothing', async () => {
      const res = await server.call('POST', '/api/transcode', {
        key,
        body: transcodeBody({ creatorId: 'x'.repeat(2_000_000) }),
      });
      assert.equal(res.status, 413);
      assert.deepEqual(res.body, { errors: ['request body is too large'] });
      const list = await server.call('GET', '/api/task', { key });
      assert.deepEqual(list.body, []);
    });
  });
