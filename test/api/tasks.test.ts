import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import { databaseKinds, startTestServer, transcodeBody, type TestServer } from '../helpers/server.ts';

const SECRET = 'sEcReT/do-not-leak+123';
const ACCESS_KEY = 'AKIATESTKEY';

for (const { kind, skip } of await databaseKinds()) {
  describe(`task API (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let alice: string;
    let bob: string;
    const seen: string[] = [];
    // Every response body is kept, to check at the end that no secret ever came back.
    const call: TestServer['call'] = async (...args) => {
      const res = await server.call(...args);
      seen.push(JSON.stringify(res.body), JSON.stringify([...res.headers]));
      return res;
    };

    before(async () => {
      server = await startTestServer({
        database: kind,
        roles: { api: true, worker: false },
        settings: { maxQueuedPerOwner: 6 },
      });
      alice = await server.key('alice');
      bob = await server.key('bob');
    });
    after(() => server.stop());

    it('queues a transcode and returns the Task as the spec shows it', async () => {
      const res = await call('POST', '/api/transcode', {
        key: alice,
        body: transcodeBody({ creatorId: { type: 'unverified', value: 'c1' } }),
      });
      assert.equal(res.status, 200);
      const t = res.body;
      assert.equal(t.type, 'transcode-file');
      assert.equal(t.status.phase, 'waiting');
      assert.equal(typeof t.status.updatedAt, 'number');
      assert.equal(typeof t.createdAt, 'number');
      assert.equal(typeof t.scheduledAt, 'number');
      assert.match(t.projectId, /^[0-9a-f-]{36}$/);
      assert.match(t.requesterId, /^[0-9a-f]+$/);
      assert.deepEqual(t.params.outputs, { hls: { path: '/out/hls' }, mp4: { path: '/out/mp4' } });
      assert.deepEqual(t.params['transcode-file'].storage.credentials, { accessKeyId: '***', secretAccessKey: '***' });
      assert.deepEqual(t.params['transcode-file'].creatorId, { type: 'unverified', value: 'c1' });
      assert.equal(t.inputAssetId, undefined);
      const got = await call('GET', `/api/task/${t.id}`, { key: alice });
      assert.equal(got.status, 200);
      assert.equal(got.body.id, t.id);
      assert.equal(got.body.status.phase, 'waiting');
    });

    it('works with the livepeer SDK (transcode.create, task.get, task.getAll)', async () => {
      const sdk = new Livepeer({ apiKey: alice, serverURL: `${server.url}/api` });
      const created = await sdk.transcode.create({
        input: { url: 'https://example.com/video.mp4' },
        storage: {
          type: 's3',
          endpoint: 'http://127.0.0.1:9000',
          bucket: 'out',
          credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET },
        },
        outputs: { hls: { path: '/sdk/hls' } },
      } as Parameters<typeof sdk.transcode.create>[0]);
      seen.push(JSON.stringify(created.task));
      assert.equal(created.statusCode, 200);
      const id = created.task?.id;
      assert.ok(id, 'the SDK parsed a task id');
      assert.equal(created.task?.status?.phase, 'waiting');
      const got = await sdk.task.get(id);
      assert.equal(got.task?.id, id);
      assert.equal(got.task?.params?.transcodeFile?.outputs?.hls?.path, '/sdk/hls');
      const all = await sdk.task.getAll();
      assert.ok(all.data?.some((t) => t.id === id));
    });

    it('answers 401 without a key, with an unknown key and with a revoked one; the scheme is case-insensitive', async () => {
      assert.equal((await call('GET', '/api/task')).status, 401);
      assert.deepEqual((await call('GET', '/api/task', { headers: { authorization: 'Bearer mp_nope' } })).body, {
        errors: ['invalid API key'],
      });
      assert.equal((await call('GET', '/api/task', { headers: { authorization: `bEaReR ${alice}` } })).status, 200);
      const temp = await server.running.core.accounts.createKey('carol');
      assert.equal((await call('GET', '/api/task', { key: temp.key })).status, 200);
      assert.ok(await server.running.core.accounts.revokeKey(temp.id));
      assert.equal((await call('GET', '/api/task', { key: temp.key })).status, 401);
    });

    it("hides another owner's tasks: 404 on get, cancel and retry, absent from lists", async () => {
      const t = (await call('POST', '/api/transcode', { key: alice, body: transcodeBody() })).body;
      for (const [method, path] of [
        ['GET', `/api/task/${t.id}`],
        ['POST', `/api/task/${t.id}/cancel`],
        ['POST', `/api/task/${t.id}/retry`],
      ] as const) {
        const res = await call(method, path, { key: bob });
        assert.equal(res.status, 404, `${method} ${path}`);
        assert.deepEqual(res.body, { errors: ['not found'] });
      }
      const list = await call('GET', '/api/task', { key: bob });
      assert.deepEqual(list.body, []);
      assert.equal((await call('GET', '/api/task/not-a-uuid', { key: alice })).status, 404);
    });

    it('cancels a waiting task and retries a cancelled one; refuses to retry a waiting one', async () => {
      const t = (await call('POST', '/api/transcode', { key: alice, body: transcodeBody() })).body;
      const cancelled = await call('POST', `/api/task/${t.id}/cancel`, { key: alice });
      assert.equal(cancelled.status, 200);
      assert.equal(cancelled.body.status.phase, 'cancelled');
      const again = await call('POST', `/api/task/${t.id}/cancel`, { key: alice });
      assert.equal(again.status, 400);
      assert.match(again.body.errors[0], /is cancelled; only a task that is waiting or running can be cancelled/);
      const retried = await call('POST', `/api/task/${t.id}/retry`, {
        key: alice,
        raw: '',
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(retried.status, 200);
      assert.equal(retried.body.status.phase, 'waiting');
      const bad = await call('POST', `/api/task/${t.id}/retry`, { key: alice });
      assert.equal(bad.status, 400);
      assert.match(bad.body.errors[0], /only a task that is failed or cancelled can be retried/);
    });

    it('answers 429 when an owner has too many queued tasks', async () => {
      const dave = await server.key('dave');
      const codes: number[] = [];
      for (let i = 0; i < 8; i++)
        codes.push((await call('POST', '/api/transcode', { key: dave, body: transcodeBody() })).status);
      assert.deepEqual(codes, [200, 200, 200, 200, 200, 200, 429, 429]);
      const res = await call('POST', '/api/transcode', { key: dave, body: transcodeBody() });
      assert.match(res.body.errors[0], /too many queued tasks/);
      assert.equal(res.headers.get('retry-after'), '10', 'a 429 says when to try again (API.md)');
      // Other owners are not affected.
      assert.equal((await call('POST', '/api/transcode', { key: bob, body: transcodeBody() })).status, 200);
    });

    it('pages through tasks newest first with a Link header', async () => {
      const erin = await server.key('erin');
      const ids: string[] = [];
      for (let i = 0; i < 5; i++)
        ids.push((await call('POST', '/api/transcode', { key: erin, body: transcodeBody() })).body.id);
      const pages: string[][] = [];
      let path: string | null = '/api/task?limit=2';
      while (path) {
        const res = await call('GET', path, { key: erin });
        assert.equal(res.status, 200);
        pages.push(res.body.map((t: { id: string }) => t.id));
        const link = res.headers.get('link');
        // The link is relative (RFC 8288: resolved against the request's URL).
        const next: URL | null = link
          ? new URL(/<([^>]+)>; rel="next"/.exec(link)?.[1] ?? '', server.url + path)
          : null;
        path = next ? next.pathname + next.search : null;
      }
      assert.deepEqual(
        pages.map((p) => p.length),
        [2, 2, 1],
      );
      assert.deepEqual(pages.flat(), [...ids].reverse());
      assert.equal((await call('GET', '/api/task?limit=0', { key: erin })).status, 422);
    });

    it('serves health, readiness, metrics and the OpenAPI document', async () => {
      assert.deepEqual((await call('GET', '/healthz')).body, { status: 'ok' });
      assert.deepEqual((await call('GET', '/readyz')).body, { status: 'ok' });
      const metrics = await fetch(`${server.url}/metrics`).then((r) => r.text());
      assert.match(metrics, /mediaplane_tasks\{phase="waiting"\} \d+/);
      assert.match(metrics, /mediaplane_queue_depth \d+/);
      assert.match(metrics, /mediaplane_http_request_duration_seconds_bucket/);
      const doc = (await call('GET', '/api/openapi.json')).body;
      assert.equal(doc.openapi, '3.1.0');
      assert.ok(doc.paths['/api/transcode'].post.requestBody.content['application/json'].schema.properties.input);
      assert.ok(doc.paths['/api/task/{id}'].get);
      // Probes and scrapes come every few seconds: no request lines at the info level.
      const probeLines = server.logs.lines.filter((l) => /"url":"\/(healthz|readyz|metrics)"/.test(l));
      assert.deepEqual(probeLines, []);
      assert.ok(
        server.logs.lines.some((l) => l.includes('"url":"/api/openapi.json"')),
        'other requests are',
      );
    });

    it('never shows a credential in a response or a log line', () => {
      const everything = `${seen.join('\n')}\n${server.logs.text}`;
      assert.ok(server.logs.lines.length > 10, 'the server logged requests');
      assert.ok(!everything.includes(SECRET), 'the S3 secret leaked');
      assert.ok(!everything.includes(ACCESS_KEY), 'the S3 access key id leaked');
      assert.ok(!everything.includes(alice) && !everything.includes(bob), 'an API key leaked');
    });
  });
}
