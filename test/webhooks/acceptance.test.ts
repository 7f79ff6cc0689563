import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import { Events } from 'livepeer/models/components/webhook.js';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { makeClip } from '../helpers/media.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';
import { type Received, type Receiver, startReceiver, verifyWebhook } from './helpers.ts';

// Issue #18's acceptance, end to end: the real `livepeer` SDK against a service with the API
// and worker roles, real ffmpeg, the local S3 server and real receivers on port 0. A real
// transcode fires task.spawned, task.updated and task.completed, each signed as
// docs/webhooks.md shows (its verify code, as written); a 404 input fires task.failed; a
// receiver answering 500 twice gets the event on the third attempt, getLogs shows all
// three, and resendLog delivers it again.

const SECRET = 'whsec-acceptance-do-not-leak-3e9b1d';
const ALL_EVENTS = [Events.TaskSpawned, Events.TaskUpdated, Events.TaskCompleted, Events.TaskFailed];

interface WireTask {
  id: string;
  status: { phase: string; progress?: number; errorMessage?: string; updatedAt: number };
  output?: unknown;
}

let server: TestServer;
let s3: TestS3;
let web: TestHttp;
const receivers: Receiver[] = [];

before(async () => {
  let clip: string;
  [s3, clip] = await Promise.all([startS3(), makeClip({ width: 320, height: 240, seconds: 4 })]);
  web = await startHttp({ '/clip.mp4': serveFile(clip) });
  server = await startTestServer({
    roles: { api: true, worker: true },
    settings: {
      allowPrivateUrls: true,
      ffmpegThreads: 1,
      // Short retries, so a receiver answering 500 twice gets the third attempt within a second.
      webhookRetryMs: 50,
      webhookRetryMaxMs: 200,
      webhookPollMs: 50,
      // Progress becomes a task.updated event often enough to be seen during a short encode.
      taskProgressEventMs: 200,
    },
  });
});
after(async () => {
  await server?.stop();
  await Promise.all([s3?.close(), web?.close(), ...receivers.map((r) => r.close())]);
  assert.ok(!server.logs.text.includes(SECRET), 'the shared secret appears in the logs');
});

async function receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}

/** An SDK client of a fresh owner (owners do not see each other's webhooks or tasks). */
async function client(owner: string): Promise<{ sdk: Livepeer; key: string }> {
  const key = await server.key(owner);
  return { sdk: new Livepeer({ apiKey: key, serverURL: `${server.url}/api` }), key };
}

/** Creates a transcode of `inputUrl` to a fresh bucket through the SDK, with a one-rung ladder. */
async function transcode(sdk: Livepeer, inputUrl: string): Promise<{ id: string; bucket: string }> {
  const bucket = await s3.createBucket();
  const created = await sdk.transcode.create({
    input: { url: inputUrl },
    storage: {
      type: 's3',
      endpoint: s3.endpoint,
      bucket,
      credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: s3.credentials.secretAccessKey },
    },
    outputs: { hls: { path: 'out/hls' }, mp4: { path: 'out/mp4' } },
    profiles: [{ name: '240p', width: 320, height: 240, bitrate: 300_000 }],
  } as Parameters<typeof sdk.transcode.create>[0]);
  assert.equal(created.statusCode, 200);
  const id = created.task?.id;
  assert.ok(id, 'the SDK parsed a task id');
  return { id, bucket };
}

/** The envelope's task, typed. */
const taskOf = (r: Received): WireTask => (r.body.payload as unknown as { task: WireTask }).task;

/** Every received request verifies with the documented check and the secret. */
function assertSigned(got: Received[]): void {
  for (const r of got) {
    const header = r.headers['livepeer-signature'];
    assert.equal(typeof header, 'string', `${r.body.event}: no Livepeer-Signature header`);
    assert.match(String(header), /^t=\d+,v1=[0-9a-f]{64}$/);
    assert.ok(verifyWebhook(r.raw, String(header), SECRET), `${r.body.event}: the documented check refuses it`);
    assert.ok(!verifyWebhook(r.raw, String(header), 'another secret'));
  }
}

describe('webhooks acceptance (issue #18) through the livepeer SDK, API and worker', () => {
  it('a real transcode to S3 fires task.spawned, task.updated (running, progress) and task.completed, each signed', async () => {
    const r = await receiver();
    const { sdk, key } = await client('acceptance-complete');
    const hook = (await sdk.webhook.create({ name: 'all', url: r.url, events: ALL_EVENTS, sharedSecret: SECRET }))
      .webhook;
    assert.ok(hook?.id);
    const { id, bucket } = await transcode(sdk, web.url('/clip.mp4'));

    const completed = await waitFor(
      async () => r.received.find((x) => x.body.event === 'task.completed'),
      45_000,
      'task.completed',
    );
    // Deliveries run in parallel: give any straggling task.updated a moment to land.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const got = [...r.received];
    assertSigned(got);
    for (const x of got) {
      assert.equal(x.body.webhookId, hook.id);
      assert.equal(taskOf(x).id, id, `${x.body.event}: payload.task.id`);
      assert.equal(typeof x.body.createdAt, 'number');
      assert.equal(x.headers['user-agent'], 'mediaplane-webhooks');
    }
    assert.equal(new Set(got.map((x) => x.body.id)).size, got.length, 'every event id distinct (no duplicates here)');

    const byEvent = (e: string) => got.filter((x) => x.body.event === e);
    assert.equal(byEvent('task.spawned').length, 1);
    assert.equal(byEvent('task.completed').length, 1);
    assert.equal(byEvent('task.failed').length, 0);
    const spawned = byEvent('task.spawned')[0];
    assert.ok(spawned);
    assert.ok(['pending', 'waiting'].includes(taskOf(spawned).status.phase));
    const updated = byEvent('task.updated').map(taskOf);
    assert.ok(updated.length >= 1, 'at least one task.updated');
    assert.ok(
      updated.some((t) => t.status.phase === 'running'),
      'a task.updated for running',
    );
    // Progress while running: each running update carries it, rising (by the task's updatedAt).
    // Not asserted above 0: on a fast machine the short encode may end before a later write;
    // and 1 is a running state too: the last upload done, the completion not yet written.
    const running = updated
      .filter((t) => t.status.phase === 'running')
      .sort((a, b) => a.status.updatedAt - b.status.updatedAt);
    for (const t of running) {
      const p = t.status.progress;
      assert.ok(typeof p === 'number' && p >= 0 && p <= 1, `progress while running: ${JSON.stringify(t.status)}`);
    }
    const rising = running.map((t) => t.status.progress ?? 0);
    assert.deepEqual(
      rising,
      [...rising].sort((a, b) => a - b),
      'progress never goes back',
    );
    // In the task's own order (not arrival order): spawned first, completed last.
    const ordered = got.map((x) => [taskOf(x).status.updatedAt, x.body.event] as const).sort((a, b) => a[0] - b[0]);
    assert.equal(ordered[0]?.[1], 'task.spawned');
    assert.equal(ordered.at(-1)?.[1], 'task.completed');

    // The completed event's task is the task as GET /api/task/{id} shows it at the end.
    const shown = await server.call('GET', `/api/task/${id}`, { key });
    assert.equal(shown.status, 200);
    assert.equal(shown.body.status.phase, 'completed', shown.body.status.errorMessage);
    const final = taskOf(completed);
    assert.equal(final.status.phase, 'completed');
    assert.ok(final.output, 'payload.task.output present');
    assert.deepEqual(final, shown.body);
    assert.ok(!completed.raw.includes(s3.credentials.secretAccessKey), 'no S3 secret in the payload');

    // The outputs are really in the bucket, and the log shows every attempt as a success.
    const keys = await s3.keys(bucket);
    assert.ok(
      keys.some((k) => k.startsWith('out/hls/') && k.endsWith('.m3u8')),
      keys.join(' '),
    );
    assert.ok(
      keys.some((k) => k.startsWith('out/mp4/') && k.endsWith('.mp4')),
      keys.join(' '),
    );
    const logs = (await sdk.webhook.getLogs(hook.id)).data ?? [];
    assert.equal(logs.length, got.length);
    assert.ok(logs.every((l) => l.success === true && l.response?.status === 204));
    const after = (await sdk.webhook.get(hook.id)).webhook;
    assert.equal(typeof after?.status?.lastTriggeredAt, 'number');
    assert.equal(after?.status?.lastFailure, undefined);
  });

  it('a transcode whose input answers 404 fires task.failed with the error message', async () => {
    const r = await receiver();
    const { sdk } = await client('acceptance-failed');
    const hook = (await sdk.webhook.create({ name: 'all', url: r.url, events: ALL_EVENTS, sharedSecret: SECRET }))
      .webhook;
    assert.ok(hook?.id);
    const { id } = await transcode(sdk, web.url('/missing.mp4'));
    const failed = await waitFor(
      async () => r.received.find((x) => x.body.event === 'task.failed'),
      30_000,
      'task.failed',
    );
    assertSigned(r.received);
    const task = taskOf(failed);
    assert.equal(task.id, id);
    assert.equal(task.status.phase, 'failed');
    assert.match(task.status.errorMessage ?? '', /was not found \(HTTP 404/);
    assert.equal(failed.body.webhookId, hook.id);
    assert.ok(
      r.received.some((x) => x.body.event === 'task.spawned'),
      'task.spawned came too',
    );
    assert.ok(!r.received.some((x) => x.body.event === 'task.completed'));
    assert.equal(new Set(r.received.map((x) => x.body.id)).size, r.received.length, 'distinct event ids');
  });

  it('a receiver answering 500 twice gets the event on the third attempt; getLogs shows all three; resendLog delivers again', async () => {
    const r = await receiver((n) => (n < 2 ? { status: 500, body: `boom ${n}` } : 200));
    const { sdk } = await client('acceptance-retry');
    const hook = (
      await sdk.webhook.create({ name: 'flaky', url: r.url, events: [Events.TaskSpawned], sharedSecret: SECRET })
    ).webhook;
    assert.ok(hook?.id);
    const hookId = hook.id;
    const { id } = await transcode(sdk, web.url('/missing.mp4'));

    const logs = await waitFor(
      async () => {
        const data = (await sdk.webhook.getLogs(hookId)).data ?? [];
        return data.length >= 3 && data[0]?.success ? data : undefined;
      },
      15_000,
      'three attempts in the log',
    );
    assert.equal(r.received.length, 3);
    assertSigned(r.received);
    assert.equal(new Set(r.received.map((x) => x.body.id)).size, 1, 'one event, three attempts');
    assert.equal(taskOf(r.received[2] as Received).id, id);
    // Newest first: the success, then the two 500s.
    assert.deepEqual(
      logs.map((l) => [l.success, l.response?.status, l.response?.body, l.event]),
      [
        [true, 200, '', 'task.spawned'],
        [false, 500, 'boom 1', 'task.spawned'],
        [false, 500, 'boom 0', 'task.spawned'],
      ],
    );
    assert.equal(logs[1]?.response?.statusText, 'Internal Server Error');
    const eventId = r.received[0]?.body.id;
    for (const l of logs) assert.equal(JSON.parse(l.request?.body ?? '{}').id, eventId);
    const status = (await sdk.webhook.get(hook.id)).webhook?.status;
    assert.equal(status?.lastFailure?.statusCode, 500, 'the last failure stays after the success');
    assert.equal(typeof status?.lastTriggeredAt, 'number');

    const [latest] = logs;
    assert.ok(latest);
    const resent = (await sdk.webhook.resendLog(hook.id, latest.id)).webhookLog;
    assert.ok(resent?.id);
    assert.notEqual(resent.id, latest.id, 'a new log entry');
    assert.equal(resent.success, true);
    assert.equal(resent.response?.status, 200);
    await waitFor(async () => r.received.length >= 4, 10_000, 'the resent delivery');
    assert.equal(r.received.length, 4);
    const again = r.received[3];
    assert.ok(again);
    assert.equal(again.body.id, eventId, 'the same event id');
    assert.deepEqual(again.body.payload, r.received[2]?.body.payload);
    assertSigned([again]);
    const after = (await sdk.webhook.getLogs(hook.id)).data ?? [];
    assert.deepEqual(
      after.map((l) => l.id),
      [resent.id, ...logs.map((l) => l.id)],
    );
  });
});
