import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { databaseKinds, startTestServer, type TestServer, transcodeBody, waitFor } from '../helpers/server.ts';
import { type Receiver, startReceiver, verifyWebhook } from './helpers.ts';

// The dispatcher as main.ts wires it into the service: the payload is the task as
// GET /api/task/{id} shows it (credentials redacted), and the metrics are on GET /metrics.

const SECRET = 'service-hook-secret-5c2d';

for (const { kind, skip } of await databaseKinds()) {
  describe(`webhooks in the service (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let receiver: Receiver;
    let key: string;
    before(async () => {
      // No worker: the task stays as created, so its event's task is the API's answer.
      server = await startTestServer({ database: kind, roles: { api: true, worker: false } });
      receiver = await startReceiver();
      key = await server.key('alice');
    });
    after(async () => {
      await server.stop();
      await receiver.close();
      assert.ok(!server.logs.text.includes(SECRET), 'the shared secret appears in the logs');
    });

    it('POST /api/transcode fires task.spawned with the task as the API shows it, signed', async () => {
      const { core } = server.running;
      const projectId = await core.accounts.ensureOwner('alice');
      await core.webhooks.create('alice', projectId, {
        name: 'all',
        url: receiver.url,
        events: ['task.spawned'],
        sharedSecret: SECRET,
      });
      const created = await server.call('POST', '/api/transcode', { key, body: transcodeBody() });
      assert.equal(created.status, 200);
      const got = await waitFor(async () => receiver.received[0], 10_000, 'the delivery');
      assert.ok(verifyWebhook(got.raw, String(got.headers['livepeer-signature']), SECRET));
      assert.equal(got.body.event, 'task.spawned');
      const shown = await server.call('GET', `/api/task/${created.body.id}`, { key });
      assert.deepEqual(got.body.payload, { task: shown.body });
      assert.ok(!got.raw.includes('sEcReT/do-not-leak+123'), 'no credential in the payload');
      assert.ok(!got.raw.includes('AKIATESTKEY'));
    });

    it('GET /metrics shows deliveries by outcome, the pending gauge and the latency histogram', async () => {
      // The delivery above is counted once its outcome is written, just after the receiver answered.
      const text = await waitFor(async () => {
        const t = await (await fetch(`${server.url}/metrics`)).text();
        return /mediaplane_webhook_deliveries_total\{outcome="delivered"\} [1-9]/.test(t) ? t : null;
      });
      assert.match(text, /mediaplane_webhook_deliveries_total\{outcome="failed"\} 0/);
      assert.match(text, /mediaplane_webhook_pending \d+/);
      assert.match(text, /mediaplane_webhook_delivery_seconds_bucket/);
    });
  });
}
