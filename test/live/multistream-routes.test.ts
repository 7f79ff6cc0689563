import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { databaseKinds, startTestServer, type TestServer } from '../helpers/server.ts';

// The restream target routes over plain HTTP with the address guard on (private addresses
// refused, as in production): every url is checked where it comes in (a saved target, a
// stream's inline spec, a PATCH), refusals are 422s naming the field and never quoting the url,
// the list pages, and a stream's target list is changed one target at a time. The SDK's view
// of the same routes is test/live/sessions-sdk.test.ts.

const SECRET = 'target-route-secret';
const PUBLIC_URL = `rtmp://8.8.8.8/live/${SECRET}-public`;
const PRIVATE_URL = `rtmp://10.1.2.3/live/${SECRET}-private`;

for (const { kind, skip } of await databaseKinds()) {
  describe(`restream target routes (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let key = '';
    const call = (method: string, path: string, body?: unknown) =>
      server.call(method, `/api${path}`, { key, ...(body === undefined ? {} : { body }) });

    before(async () => {
      server = await startTestServer({ database: kind, settings: { allowPrivateUrls: false } });
      key = await server.key('alice');
    });
    after(() => server.stop());

    it('refuses urls that are no RTMP(S) or SRT, or reach a private address, naming the field', async () => {
      const cases: [unknown, RegExp][] = [
        [{ url: 'https://example.com/live' }, /^url: must start with rtmp:\/\/, rtmps:\/\/ or srt:\/\/$/],
        [{ url: 'srt://8.8.8.8?streamid=x' }, /^url: an srt:\/\/ URL must name a port$/],
        [{ url: PRIVATE_URL }, /^url: address not allowed: 10\.1\.2\.3 is a private address/],
        [{ url: `rtmp://localhost/live/${SECRET}` }, /^url: address not allowed: localhost is a loopback name/],
      ];
      for (const [body, message] of cases) {
        const res = await call('POST', '/multistream/target', body);
        assert.equal(res.status, 422, JSON.stringify(res.body));
        assert.match(String(res.body.errors?.[0]), message);
        assert.equal(JSON.stringify(res.body).includes(SECRET), false, 'the url is never quoted back');
      }
    });

    it('saves a public target with a default name, pages the list, and checks a PATCHed url too', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await call('POST', '/multistream/target', { url: PUBLIC_URL });
        assert.equal(res.status, 201);
        assert.deepEqual(Object.keys(res.body).sort(), ['createdAt', 'disabled', 'id', 'name']);
        assert.equal(res.body.name, 'rtmp://8.8.8.8');
        ids.push(res.body.id);
      }
      const page = await call('GET', '/multistream/target?limit=2');
      assert.deepEqual(
        page.body.map((t: { id: string }) => t.id),
        [ids[2], ids[1]],
      );
      const next = /<([^>]+)>; rel="next"/.exec(page.headers.get('link') ?? '')?.[1];
      assert.ok(next);
      // The link is relative to the request (RFC 8288): /api/multistream/target?limit=2&cursor=...
      const rest = await server.call('GET', next, { key });
      assert.deepEqual(
        rest.body.map((t: { id: string }) => t.id),
        [ids[0]],
      );
      const refused = await call('PATCH', `/multistream/target/${ids[0]}`, { url: PRIVATE_URL });
      assert.equal(refused.status, 422);
      assert.match(refused.body.errors[0], /^url: address not allowed/);
      assert.equal(
        (await call('PATCH', `/multistream/target/${ids[0]}`, { name: 'renamed', disabled: true })).status,
        204,
      );
      const read = await call('GET', `/multistream/target/${ids[0]}`);
      assert.deepEqual([read.body.name, read.body.disabled], ['renamed', true]);
    });

    it("a stream's targets: inline specs checked and saved, unknown ids refused, one target added or removed at a time", async () => {
      const badSpec = await call('POST', '/stream', {
        name: 'refused',
        multistream: { targets: [{ profile: 'source', spec: { url: PRIVATE_URL } }] },
      });
      assert.equal(badSpec.status, 422);
      assert.match(badSpec.body.errors[0], /^multistream\.targets\[0\]\.spec\.url: address not allowed/);
      const unknown = await call('POST', '/stream', {
        name: 'refused',
        multistream: { targets: [{ profile: 'source', id: '00000000-0000-4000-8000-000000000000' }] },
      });
      assert.deepEqual(unknown.body, {
        errors: ['multistream.targets[0].id: no multistream target of yours has this id'],
      });

      const stream = (await call('POST', '/stream', { name: 'restreamed', profiles: [] })).body as { id: string };
      const wrongRung = await call('POST', `/stream/${stream.id}/create-multistream-target`, {
        profile: '720p0',
        spec: { url: PUBLIC_URL },
      });
      assert.deepEqual(wrongRung.body, { errors: ['body.profile: must be "source" (the stream has no profiles)'] });
      const saved = (await call('POST', '/multistream/target', { name: 'yt', url: PUBLIC_URL })).body as { id: string };
      for (const videoOnly of [false, true]) {
        const res = await call('POST', `/stream/${stream.id}/create-multistream-target`, {
          profile: 'source',
          videoOnly,
          id: saved.id,
        });
        assert.equal(res.status, 204);
      }
      const targets = (await call('GET', `/stream/${stream.id}`)).body.multistream.targets;
      assert.deepEqual(targets, [{ id: saved.id, profile: 'source', videoOnly: true }], 'the same target is replaced');
      const missing = await call('DELETE', `/stream/${stream.id}/multistream/00000000-0000-4000-8000-000000000000`);
      assert.equal(missing.status, 404);
      assert.equal((await call('DELETE', `/stream/${stream.id}/multistream/${saved.id}`)).status, 204);
      assert.deepEqual((await call('GET', `/stream/${stream.id}`)).body.multistream.targets, []);
      assert.equal((await call('GET', `/multistream/target/${saved.id}`)).status, 200, 'the saved target stays');
    });

    it('no target url in a log line', () => {
      assert.equal(server.logs.text.includes(SECRET), false);
    });
  });
}
