import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { databaseKinds, startTestServer, transcodeBody, type TestServer } from '../helpers/server.ts';

// Issue #15: a string holding U+0000 passed validation and failed the task insert
// (PostgreSQL 22P05: jsonb cannot hold \u0000), so the client got a 500, and the error
// logged with it carried the SQL parameters, the S3 secret among them. Every string of the
// request now refuses control characters and lone surrogates with a 422 naming the field,
// on both databases.

const SECRET = 'sEcReT/do-not-leak+123';
const CONTROL = 'must not contain control characters (U+0000 to U+001F, U+007F to U+009F)';
const SURROGATE = 'must be valid Unicode (it holds a lone surrogate)';

const base = transcodeBody();
const s3Storage = base.storage as { credentials: Record<string, string> };

// One bad string per field kind: top level, inside a union, in an array, a credential, a path.
const cases: { name: string; body: Record<string, unknown>; field: string; rule?: string }[] = [
  { name: 'NUL in creatorId', body: { creatorId: 'a\u0000b' }, field: 'creatorId' },
  {
    name: 'NUL in creatorId.value',
    body: { creatorId: { type: 'unverified', value: '\u0000' } },
    field: 'creatorId.value',
  },
  {
    name: 'newline in input.url',
    body: { input: { url: 'http://127.0.0.1:9/v.mp4\nX-Injected: 1' } },
    field: 'input.url',
  },
  { name: 'tab in input.url', body: { input: { url: 'http://127.0.0.1:9/v\t.mp4' } }, field: 'input.url' },
  {
    name: 'NUL in outputs.hls.path',
    body: { outputs: { hls: { path: '/out/\u0000hls' } } },
    field: 'outputs.hls.path',
  },
  {
    name: 'BEL in profiles[0].gop',
    body: { profiles: [{ name: 'a', width: 640, height: 360, bitrate: 500_000, gop: '2\u0007' }] },
    field: 'profiles[0].gop',
  },
  { name: 'DEL in storage.bucket', body: { storage: { ...s3Storage, bucket: 'out\u007f' } }, field: 'storage.bucket' },
  {
    name: 'C1 NEL in storage.endpoint',
    body: { storage: { ...s3Storage, endpoint: 'http://127.0.0.1:9000/\u0085' } },
    field: 'storage.endpoint',
  },
  {
    name: 'NUL in the S3 secret',
    body: {
      storage: { ...s3Storage, credentials: { accessKeyId: 'AKIATESTKEY', secretAccessKey: `${SECRET}\u0000` } },
    },
    field: 'storage.credentials.secretAccessKey',
  },
  {
    name: 'newline in the UCAN proof',
    body: { storage: { type: 'dweb.storage', credentials: { proof: 'bWFkZS11cA==\n' } } },
    field: 'storage.credentials.proof',
  },
  { name: 'lone surrogate in creatorId', body: { creatorId: 'x\ud800y' }, field: 'creatorId', rule: SURROGATE },
];

for (const { kind, skip } of await databaseKinds()) {
  describe(`control characters in a request (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let key: string;
    const responses: string[] = [];

    before(async () => {
      server = await startTestServer({ database: kind, roles: { api: true, worker: false } });
      key = await server.key('alice');
    });
    after(() => server?.stop());

    const post = async (body: Record<string, unknown>) => {
      const res = await server.call('POST', '/api/transcode', { key, body: transcodeBody(body) });
      responses.push(JSON.stringify(res.body));
      return res;
    };

    for (const c of cases) {
      it(`${c.name} is a 422 naming the field`, async () => {
        const res = await post(c.body);
        assert.equal(res.status, 422, JSON.stringify(res.body));
        assert.deepEqual(res.body.errors, [`${c.field}: ${c.rule ?? CONTROL}`]);
      });
    }

    it('reports every bad string of one request, in the order they were sent', async () => {
      const res = await post({
        input: { url: 'http://127.0.0.1:9/\u0001' },
        outputs: { mp4: { path: '/o\u0002' } },
        creatorId: '\u0003',
      });
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.errors, [
        `input.url: ${CONTROL}`,
        `outputs.mp4.path: ${CONTROL}`,
        `creatorId: ${CONTROL}`,
      ]);
    });

    it('reports a bad string next to the other rule breaks of the request', async () => {
      const res = await post({ creatorId: 'a\u0000', targetSegmentSizeSecs: 'six' });
      assert.equal(res.status, 422);
      assert.deepEqual(
        new Set(res.body.errors),
        new Set([`creatorId: ${CONTROL}`, 'targetSegmentSizeSecs: must be a number']),
      );
    });

    it('refuses control characters in a query string too', async () => {
      const res = await server.call('GET', '/api/task?cursor=%00', { key });
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.deepEqual(res.body.errors, [`querystring.cursor: ${CONTROL}`]);
    });

    it('keeps text that is not control characters: accents, emoji, a surrogate pair', async () => {
      const creatorId = 'Zoë 🎬 \u00a0𝒜';
      const res = await post({ creatorId });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.params['transcode-file'].creatorId, creatorId);
    });

    it('answered no 500, and no log line holds the secret or an error', () => {
      assert.ok(responses.length > cases.length, 'the requests were made');
      for (const r of responses)
        assert.ok(!r.includes(SECRET) && !r.includes('internal server error'), `response: ${r.slice(0, 300)}`);
      assert.ok(server.logs.lines.length > 10, 'the server logged requests');
      for (const line of server.logs.lines) {
        assert.ok(!line.includes(SECRET), `secret in a log line: ${line.slice(0, 300)}`);
        assert.ok(!line.includes('"level":50'), `an error was logged: ${line.slice(0, 300)}`);
      }
    });
  });
}
