// The webhook routes through the real `livepeer` SDK (issue #18): Livepeer's shapes, owner
// scoping, the address guard on the URL, the secret never shown (only whether it signs), PATCH
// that keeps what it is not given (the secret too), and the delivery log
// (getLogs, getLog, resendLog) against a real receiver.

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import { Events } from 'livepeer/models/components/webhook.js';
import { refused } from '../helpers/sdk.ts';
import { databaseKinds, startTestServer, transcodeBody, waitFor, type TestServer } from '../helpers/server.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

const SECRET = 'whsec-do-not-leak-4f1c9e';
const SECOND_SECRET = 'whsec-second-do-not-leak-77aa';
const TASK_EVENTS = [Events.TaskSpawned, Events.TaskUpdated, Events.TaskCompleted, Events.TaskFailed];

interface Received {
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A webhook receiver on port 0 that keeps what it gets and answers 204. */
function startReceiver(): Promise<{ url: string; got: Received[]; server: Server }> {
  return startWebhookReceiver((req, body): Received => ({ headers: req.headers, body }));
}

for (const { kind, skip } of await databaseKinds()) {
  describe(`webhook routes (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let alice: string;
    let bob: string;
    let sdk: Livepeer;
    const seen: string[] = [];
    // Every response is kept, to check at the end that no secret ever came back.
    const call: TestServer['call'] = async (...args) => {
      const res = await server.call(...args);
      seen.push(JSON.stringify(res.body), JSON.stringify([...res.headers]));
      return res;
    };
    const keep = <T>(x: T): T => {
      seen.push(JSON.stringify(x));
      return x;
    };

    before(async () => {
      server = await startTestServer({ database: kind, roles: { api: true, worker: false } });
      alice = await server.key(`alice-${kind}`);
      bob = await server.key(`bob-${kind}`);
      sdk = new Livepeer({ apiKey: alice, serverURL: `${server.url}/api` });
    });
    after(() => server.stop());

    it('create two, list newest first, get, update, delete: through the livepeer SDK', async () => {
      const a = keep(
        await sdk.webhook.create({
          name: 'first',
          url: 'https://example.com/a',
          events: [Events.TaskCompleted, Events.TaskFailed],
          sharedSecret: SECRET,
        }),
      );
      assert.equal(a.statusCode, 200);
      const first = a.webhook;
      assert.ok(first?.id, 'the SDK parsed the webhook');
      assert.equal(first.name, 'first');
      assert.equal(first.url, 'https://example.com/a');
      assert.deepEqual(first.events, ['task.completed', 'task.failed']);
      assert.equal(first.kind, 'webhook');
      assert.equal(typeof first.createdAt, 'number');
      assert.match(first.projectId ?? '', /^[0-9a-f-]{36}$/);
      assert.equal('sharedSecret' in first, false);
      const b = keep(await sdk.webhook.create({ name: 'second', url: 'http://example.com/b', events: TASK_EVENTS }));
      const second = b.webhook;
      assert.ok(second?.id);

      const all = keep(await sdk.webhook.getAll());
      assert.deepEqual(
        all.data?.map((w) => w.id),
        [second.id, first.id],
        'newest first',
      );

      const got = keep(await sdk.webhook.get(first.id));
      assert.deepEqual(got.webhook, first);

      const updated = keep(
        await sdk.webhook.update(
          {
            name: 'first, renamed',
            url: 'https://example.com/a2',
            events: [Events.TaskSpawned],
            sharedSecret: SECOND_SECRET,
          },
          first.id,
        ),
      );
      assert.equal(updated.webhook?.name, 'first, renamed');
      assert.equal(updated.webhook?.url, 'https://example.com/a2');
      assert.deepEqual(updated.webhook?.events, ['task.spawned']);
      assert.equal(updated.webhook?.createdAt, first.createdAt);
      assert.equal((await sdk.webhook.get(first.id)).webhook?.name, 'first, renamed');

      const deleted = keep(await sdk.webhook.delete(second.id));
      assert.equal(deleted.webhook?.id, second.id);
      assert.equal((await refused(sdk.webhook.get(second.id))).statusCode, 404);
      assert.deepEqual(
        (await sdk.webhook.getAll()).data?.map((w) => w.id),
        [first.id],
      );
      assert.equal((await call('DELETE', `/api/webhook/${second.id}`, { key: alice })).status, 404);
    });

    it('PATCH changes only the fields given: the secret stays unless given, null removes it; `signed` says which', async () => {
      const made = await call('POST', '/api/webhook', {
        key: alice,
        body: { name: 'patched', url: 'https://example.com/p', events: ['task.completed'], sharedSecret: SECRET },
      });
      assert.equal(made.body.signed, true);
      const id = made.body.id;
      const patch = (body: unknown) => call('PATCH', `/api/webhook/${id}`, { key: alice, body });
      const moved = await patch({ url: 'https://example.com/p2' });
      assert.equal(moved.status, 200, JSON.stringify(moved.body));
      assert.deepEqual(
        [moved.body.name, moved.body.url, moved.body.events, moved.body.signed],
        ['patched', 'https://example.com/p2', ['task.completed'], true],
        'the URL changed, the rest stayed: the secret too',
      );
      assert.equal((await patch({ sharedSecret: SECOND_SECRET, name: 'patched 2' })).body.signed, true);
      const [stored] = await server.running.core.db.query<{ shared_secret: string | null }>(
        'SELECT shared_secret FROM webhooks WHERE id = $1',
        [id],
      );
      assert.equal(stored?.shared_secret, SECOND_SECRET, 'a secret given replaces it');
      const unsigned = await patch({ sharedSecret: null });
      assert.deepEqual([unsigned.body.name, unsigned.body.signed], ['patched 2', false], 'null removes it');
      assert.equal((await call('GET', `/api/webhook/${id}`, { key: alice })).body.signed, false);

      const bad = await patch({ url: 'ftp://example.com/p', sharedSecret: '' });
      assert.equal(bad.status, 422);
      assert.deepEqual(bad.body.errors, [
        'sharedSecret: must be a string of 1 to 1,024 characters, or null to remove the secret',
      ]);
      assert.deepEqual((await patch({ url: 'ftp://example.com/p' })).body.errors, [
        'url: must start with https:// or http://',
      ]);
      assert.equal((await call('PATCH', `/api/webhook/${id}`, { key: bob, body: { name: 'x' } })).status, 404);
      // PUT still replaces the whole webhook, as Livepeer's: a secret left out is removed.
      await patch({ sharedSecret: SECRET });
      const replaced = await call('PUT', `/api/webhook/${id}`, {
        key: alice,
        body: { name: 'replaced', url: 'https://example.com/p3', events: ['task.failed'] },
      });
      assert.equal(replaced.body.signed, false);
    });

    it("another owner's webhook is a 404 on every route, and not in their list", async () => {
      const mine = await call('POST', '/api/webhook', {
        key: alice,
        body: { name: 'mine', url: 'https://example.com/mine', events: ['task.completed'] },
      });
      assert.equal(mine.status, 200);
      const id = mine.body.id;
      const body = { name: 'taken', url: 'https://example.com/x', events: ['task.completed'] };
      for (const [method, path, withBody] of [
        ['GET', `/api/webhook/${id}`, false],
        ['PUT', `/api/webhook/${id}`, true],
        ['DELETE', `/api/webhook/${id}`, false],
        ['GET', `/api/webhook/${id}/log`, false],
        ['GET', `/api/webhook/${id}/log/00000000-0000-4000-8000-000000000000`, false],
        ['POST', `/api/webhook/${id}/log/00000000-0000-4000-8000-000000000000/resend`, false],
      ] as const) {
        const res = await call(method, path, { key: bob, ...(withBody ? { body } : {}) });
        assert.equal(res.status, 404, `${method} ${path}`);
        assert.deepEqual(res.body, { errors: ['not found'] });
      }
      assert.deepEqual((await call('GET', '/api/webhook', { key: bob })).body, []);
      assert.equal((await call('GET', `/api/webhook/${id}`, { key: alice })).body.name, 'mine', 'unchanged');
      assert.equal((await call('GET', '/api/webhook/not-a-uuid', { key: alice })).status, 404);
      assert.equal((await call('GET', '/api/webhook')).status, 401);
    });

    it('events other than the task, asset, stream, recording and multistream events are a 422 naming events[i], through the SDK too', async () => {
      const err = await refused(
        sdk.webhook.create({ name: 'detection', url: 'https://example.com/s', events: [Events.StreamDetection] }),
      );
      assert.equal(err.statusCode, 422);
      assert.deepEqual(JSON.parse(err.body), {
        errors: [
          'events[0]: must be one of "task.spawned", "task.updated", "task.completed", "task.failed", "asset.created", "asset.updated", "asset.ready", "asset.failed", "asset.deleted", "stream.started", "stream.idle", "recording.started", "recording.waiting", "recording.ready", "multistream.connected", "multistream.error", "multistream.disconnected" (this server sends task, asset, stream, recording and multistream events only; got "stream.detection")',
        ],
      });
      const cases: [unknown, string][] = [
        [['task.completed', 'task.nope'], 'events[1]: must be one of'],
        [[], 'events: must list at least one of'],
        [['task.failed', 'task.failed'], 'events: must not list an event twice'],
        [undefined, 'events: is required'],
      ];
      for (const [events, message] of cases) {
        const res = await call('POST', '/api/webhook', {
          key: alice,
          body: { name: 'bad', url: 'https://example.com/x', ...(events === undefined ? {} : { events }) },
        });
        assert.equal(res.status, 422, JSON.stringify(events));
        assert.equal(res.body.errors.length, 1);
        assert.ok(res.body.errors[0].startsWith(message), res.body.errors[0]);
      }
    });

    it('a URL that is not http(s), carries credentials or is not a URL is a 422 naming url', async () => {
      const cases: [string, string][] = [
        ['ftp://example.com/hook', 'url: must start with https:// or http://'],
        ['example.com/hook', 'url: must be an absolute URL'],
        ['https://user:pw@example.com/hook', 'url: must not carry a user name or password'],
        ['', 'url: must be an http:// or https:// URL of at most 2,048 characters'],
      ];
      for (const [url, message] of cases) {
        const res = await call('POST', '/api/webhook', {
          key: alice,
          body: { name: 'bad', url, events: ['task.completed'] },
        });
        assert.equal(res.status, 422, url);
        assert.ok(res.body.errors[0].startsWith(message), res.body.errors[0]);
      }
      const put = await call('POST', '/api/webhook', {
        key: alice,
        body: { name: 'ok', url: 'https://example.com/ok', events: ['task.completed'] },
      });
      const res = await call('PUT', `/api/webhook/${put.body.id}`, {
        key: alice,
        body: { name: 'ok', url: 'ftp://example.com/', events: ['task.completed'] },
      });
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.errors, ['url: must start with https:// or http://']);
    });

    it("another project's projectId and unknown fields are refused", async () => {
      const res = await call('POST', '/api/webhook', {
        key: alice,
        body: {
          name: 'p',
          url: 'https://example.com/p',
          events: ['task.completed'],
          projectId: '00000000-0000-4000-8000-000000000000',
        },
      });
      assert.equal(res.status, 422);
      assert.match(res.body.errors[0], /^projectId: must be the API key's project/);
      const own = (await call('GET', `/api/webhook`, { key: alice })).body[0].projectId;
      const ok = await call('POST', '/api/webhook', {
        key: alice,
        body: { name: 'p', url: 'https://example.com/p', events: ['task.completed'], projectId: own },
      });
      assert.equal(ok.status, 200);
      const extra = await call('POST', '/api/webhook', {
        key: alice,
        body: { name: 'p', url: 'https://example.com/p', events: ['task.completed'], streamId: 's' },
      });
      assert.equal(extra.status, 422);
      assert.deepEqual(extra.body.errors, ['streamId: is not a known property']);
    });

    it('lists page by page with a Link header, as GET /api/task does', async () => {
      const key = await server.key(`pager-${kind}`);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++)
        ids.unshift(
          (
            await call('POST', '/api/webhook', {
              key,
              body: { name: `w${i}`, url: 'https://example.com/w', events: ['task.completed'] },
            })
          ).body.id,
        );
      const seenIds: string[] = [];
      let path: string | undefined = '/api/webhook?limit=2';
      while (path) {
        const page = await call('GET', path, { key });
        assert.equal(page.status, 200);
        seenIds.push(...page.body.map((w: { id: string }) => w.id));
        path = /^<([^>]+)>; rel="next"$/.exec(page.headers.get('link') ?? '')?.[1];
      }
      assert.deepEqual(seenIds, ids);
    });

    it('delivers to a real receiver; getLogs, getLog and resendLog show and repeat the attempt', async () => {
      const receiver = await startReceiver();
      try {
        const key = await server.key(`logs-${kind}`);
        const owner = new Livepeer({ apiKey: key, serverURL: `${server.url}/api` });
        const hook = keep(
          await owner.webhook.create({
            name: 'logged',
            url: receiver.url,
            events: [Events.TaskSpawned],
            sharedSecret: SECRET,
          }),
        ).webhook;
        assert.ok(hook?.id);
        const task = await call('POST', '/api/transcode', { key, body: transcodeBody() });
        assert.equal(task.status, 200);
        await waitFor(async () => receiver.got.length >= 1, 15_000, 'the delivery');

        const logs = keep(await waitFor(async () => (await owner.webhook.getLogs(hook.id ?? '')).data?.[0]));
        assert.equal(logs.webhookId, hook.id);
        assert.equal(logs.event, 'task.spawned');
        assert.equal(logs.success, true);
        assert.equal(logs.response?.status, 204);
        assert.equal(typeof logs.duration, 'number');
        assert.equal(logs.request?.url, receiver.url);
        assert.equal(logs.request?.method, 'POST');
        const envelope = JSON.parse(logs.request?.body ?? '{}');
        assert.equal(envelope.event, 'task.spawned');
        assert.equal(envelope.webhookId, hook.id);
        assert.equal(envelope.payload.task.id, task.body.id);
        // The signature the receiver can check, and never the secret itself.
        const signature = Object.entries(logs.request?.headers ?? {}).find(
          ([name]) => name.toLowerCase() === 'livepeer-signature',
        )?.[1];
        const [t, v1] = /^t=(\d+),v1=([0-9a-f]+)$/.exec(signature ?? '')?.slice(1) ?? [];
        assert.ok(t && v1, `signature header: ${signature}`);
        assert.equal(
          v1,
          createHmac('sha256', SECRET)
            .update(logs.request?.body ?? '')
            .digest('hex'),
        );

        const one = keep(await owner.webhook.getLog(hook.id, logs.id));
        assert.deepEqual(one.webhookLog, logs);

        const resent = keep(await owner.webhook.resendLog(hook.id, logs.id));
        assert.ok(resent.webhookLog?.id);
        assert.notEqual(resent.webhookLog.id, logs.id, 'a new attempt');
        assert.equal(resent.webhookLog.success, true);
        await waitFor(async () => receiver.got.length >= 2, 15_000, 'the resent delivery');
        const ids = receiver.got.map((r) => JSON.parse(r.body).id);
        assert.equal(ids[0], ids[1], 'the same event id: receivers drop the duplicate');
        const after = keep(await owner.webhook.getLogs(hook.id)).data ?? [];
        assert.deepEqual(
          after.map((l) => l.id),
          [resent.webhookLog.id, logs.id],
          'newest first',
        );
        assert.equal(
          (await refused(owner.webhook.getLog(hook.id, '00000000-0000-4000-8000-000000000000'))).statusCode,
          404,
        );
      } finally {
        receiver.server.close();
      }
    });

    it('lists every webhook route in the OpenAPI document', async () => {
      const doc = (await call('GET', '/api/openapi.json')).body;
      const ops: [string, string][] = [
        ['/api/webhook', 'post'],
        ['/api/webhook', 'get'],
        ['/api/webhook/{id}', 'get'],
        ['/api/webhook/{id}', 'put'],
        ['/api/webhook/{id}', 'patch'],
        ['/api/webhook/{id}', 'delete'],
        ['/api/webhook/{id}/log', 'get'],
        ['/api/webhook/{id}/log/{logId}', 'get'],
        ['/api/webhook/{id}/log/{logId}/resend', 'post'],
      ];
      for (const [path, method] of ops) assert.ok(doc.paths[path]?.[method], `${method.toUpperCase()} ${path}`);
      const body = doc.paths['/api/webhook'].post.requestBody.content['application/json'].schema;
      assert.deepEqual(Object.keys(body.properties).sort(), ['events', 'name', 'projectId', 'sharedSecret', 'url']);
      const webhook = doc.paths['/api/webhook/{id}'].get.responses['200'].content['application/json'].schema;
      assert.equal('sharedSecret' in webhook.properties, false);
    });

    it('no response and no log line holds a shared secret', () => {
      const all = seen.join('\n');
      for (const secret of [SECRET, SECOND_SECRET]) {
        assert.ok(!all.includes(secret), 'not in a response');
        assert.ok(!server.logs.text.includes(secret), 'not in a log line');
      }
    });
  });
}

describe('webhook URLs on private addresses (MEDIAPLANE_ALLOW_PRIVATE_URLS off)', () => {
  let server: TestServer;
  let key: string;
  before(async () => {
    server = await startTestServer({ roles: { api: true, worker: false }, settings: { allowPrivateUrls: false } });
    key = await server.key('guarded');
  });
  after(() => server.stop());

  it('a metadata, private or loopback address is a 422 naming url, at creation, on replace and on change', async () => {
    const cases: [string, RegExp][] = [
      [
        'http://169.254.169.254/latest/meta-data/',
        /^url: address not allowed: 169\.254\.169\.254 is a link-local address/,
      ],
      ['http://10.1.2.3/hook', /^url: address not allowed: 10\.1\.2\.3 is a private address/],
      ['http://127.0.0.1:8080/hook', /^url: address not allowed: 127\.0\.0\.1 is a loopback address/],
      ['http://localhost:8080/hook', /^url: address not allowed: localhost is a loopback name/],
      ['http://[::ffff:169.254.169.254]/', /^url: address not allowed: /],
    ];
    for (const [url, message] of cases) {
      const res = await server.call('POST', '/api/webhook', {
        key,
        body: { name: 'ssrf', url, events: ['task.completed'] },
      });
      assert.equal(res.status, 422, url);
      assert.equal(res.body.errors.length, 1);
      assert.match(res.body.errors[0], message);
    }
    assert.deepEqual((await server.call('GET', '/api/webhook', { key })).body, [], 'none was created');
    const ok = await server.call('POST', '/api/webhook', {
      key,
      body: { name: 'public', url: 'https://93.184.215.14/hook', events: ['task.completed'] },
    });
    assert.equal(ok.status, 200);
    const moved = await server.call('PUT', `/api/webhook/${ok.body.id}`, {
      key,
      body: { name: 'public', url: 'http://169.254.169.254/', events: ['task.completed'] },
    });
    assert.equal(moved.status, 422);
    assert.match(moved.body.errors[0], /^url: address not allowed/);
    const patched = await server.call('PATCH', `/api/webhook/${ok.body.id}`, {
      key,
      body: { url: 'http://10.1.2.3/hook' },
    });
    assert.equal(patched.status, 422);
    assert.match(patched.body.errors[0], /^url: address not allowed: 10\.1\.2\.3 is a private address/);
    assert.equal(
      (await server.call('GET', `/api/webhook/${ok.body.id}`, { key })).body.url,
      'https://93.184.215.14/hook',
    );
  });
});

/** Sends `head` on a raw socket (so the request target goes as written) and reads the answer to its end. */
function rawRequest(url: string, head: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = connect(Number(new URL(url).port), '127.0.0.1', () => socket.write(head));
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
    socket.on('data', (d) => (text += d.toString('utf8')));
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}

// Issue #25: one owner must not slow the others' webhooks, nor reach a receiver without limit.
for (const { kind, skip } of await databaseKinds()) {
  describe(`webhook limits (${kind} database)`, { skip }, () => {
    let server: TestServer;
    const RESENDS_PER_MINUTE = 8;
    const SLOTS = 3;
    before(async () => {
      server = await startTestServer({
        database: kind,
        roles: { api: true, worker: false },
        settings: {
          maxWebhooksPerOwner: 3,
          webhookConcurrency: SLOTS,
          webhookTimeoutMs: 1000,
          webhookResendsPerMinute: RESENDS_PER_MINUTE,
        },
      });
    });
    after(() => server.stop());

    it('an owner may have MEDIAPLANE_MAX_WEBHOOKS_PER_OWNER webhooks; one more is a 422 naming the limit, through the SDK', async () => {
      const sdk = new Livepeer({ apiKey: await server.key(`many-${kind}`), serverURL: `${server.url}/api` });
      const made: string[] = [];
      for (let i = 0; i < 3; i++)
        made.push(
          (await sdk.webhook.create({ name: `w${i}`, url: 'https://example.com/w', events: TASK_EVENTS })).webhook
            ?.id ?? '',
        );
      const err = await refused(sdk.webhook.create({ name: 'w3', url: 'https://example.com/w', events: TASK_EVENTS }));
      assert.equal(err.statusCode, 422);
      assert.deepEqual(JSON.parse(err.body), {
        errors: ['an owner may have at most 3 webhooks; delete one before creating another'],
      });
      assert.equal((await sdk.webhook.getAll()).data?.length, 3, 'none was added');
      // Another owner has its own count, and deleting one makes room.
      const other = new Livepeer({ apiKey: await server.key(`few-${kind}`), serverURL: `${server.url}/api` });
      assert.ok((await other.webhook.create({ name: 'o', url: 'https://example.com/o', events: TASK_EVENTS })).webhook);
      await sdk.webhook.delete(made[0] ?? '');
      assert.ok((await sdk.webhook.create({ name: 'w4', url: 'https://example.com/w', events: TASK_EVENTS })).webhook);
    });

    it('a burst of resends never has more POSTs out than the delivery slots, and beyond the rate is a 429 with Retry-After', async () => {
      const open = { now: 0, peak: 0, got: 0 };
      // Answers the first delivery, then holds every request open (until the sender gives up).
      const receiver = createServer((req, res) => {
        open.now++;
        open.peak = Math.max(open.peak, open.now);
        res.on('close', () => open.now--);
        req.resume();
        req.on('end', () => {
          if (open.got++ === 0) res.writeHead(204).end();
        });
      });
      await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
      try {
        const key = await server.key(`resender-${kind}`);
        const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
        const hook = await server.call('POST', '/api/webhook', {
          key,
          body: { name: 'r', url, events: ['task.spawned'] },
        });
        assert.equal((await server.call('POST', '/api/transcode', { key, body: transcodeBody() })).status, 200);
        const log = await waitFor(
          async () => (await server.call('GET', `/api/webhook/${hook.body.id}/log`, { key })).body[0],
        );
        open.peak = 0;
        const answers = await Promise.all(
          Array.from({ length: 20 }, () =>
            server.call('POST', `/api/webhook/${hook.body.id}/log/${log.id}/resend`, { key }),
          ),
        );
        assert.ok(open.peak <= SLOTS, `${open.peak} POSTs were out at once, with ${SLOTS} slots`);
        const limited = answers.filter((a) => a.status === 429);
        assert.ok(limited.length >= 20 - RESENDS_PER_MINUTE, `${limited.length} answered 429`);
        for (const a of limited) {
          assert.match(a.headers.get('retry-after') ?? '', /^[1-9]\d*$/);
          assert.equal(a.body.errors.length, 1);
        }
        assert.ok(
          limited.some((a) =>
            a.body.errors[0].startsWith(`too many resends: an owner may resend ${RESENDS_PER_MINUTE}`),
          ),
        );
        for (const a of answers.filter((x) => x.status !== 429)) {
          assert.equal(a.status, 200);
          assert.equal(a.body.success, false);
          assert.match(a.body.error, /no answer within 1000 ms/);
        }
        // Another owner's resends are not counted against this one's rate.
        const other = await server.key(`resender-other-${kind}`);
        const theirs = await server.call('POST', `/api/webhook/${hook.body.id}/log/${log.id}/resend`, { key: other });
        assert.equal(theirs.status, 404);
      } finally {
        receiver.closeAllConnections();
        receiver.close();
      }
    });

    it('builds Link headers from the route, never from an absolute-form request target', async () => {
      const receiver = await startReceiver();
      try {
        const key = await server.key(`linked-${kind}`);
        const hook = await server.call('POST', '/api/webhook', {
          key,
          body: { name: 'l1', url: receiver.url, events: ['task.spawned'] },
        });
        await server.call('POST', '/api/webhook', {
          key,
          body: { name: 'l2', url: receiver.url, events: ['task.spawned'] },
        });
        for (let i = 0; i < 2; i++)
          assert.equal((await server.call('POST', '/api/transcode', { key, body: transcodeBody() })).status, 200);
        await waitFor(
          async () => (await server.call('GET', `/api/webhook/${hook.body.id}/log`, { key })).body.length >= 2,
          15_000,
          'two logged attempts',
        );
        for (const path of ['/api/task', '/api/webhook', `/api/webhook/${hook.body.id}/log`]) {
          const answer = await rawRequest(
            server.url,
            `GET http://evil.example${path}?limit=1 HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`,
          );
          assert.match(answer, /^HTTP\/1\.1 200 /, answer);
          const link = /\r\nlink: ([^\r]*)/i.exec(answer)?.[1];
          assert.ok(link, answer);
          assert.doesNotMatch(link, /evil/);
          const escaped = path.replaceAll('/', '\\/');
          assert.match(link, new RegExp(`^<${escaped}\\?limit=1&cursor=[0-9a-f-]{36}>; rel="next"$`));
        }
      } finally {
        receiver.server.close();
      }
    });
  });
}
