import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, test } from 'node:test';
import { startBrowserPlayer } from '../helpers/browser.ts';
import { publishTestSource, type TestPublish } from '../helpers/live.ts';
import { freePort } from '../helpers/ports.ts';
import { startTestServer, waitFor } from '../helpers/server.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// A recorded stream end to end: an RTMP publish cut off half way and resumed within the
// reconnect window is one session, and its recording one asset (the session's id) made by the
// worker from the live archive: as long as what was sent, `recording.ready` signed with the
// session's recording URLs (and no stream key in any delivery or log line), and it plays in Chromium.

const SECRET = 'recording-e2e-webhook-secret';
const FPS = 30;
const WINDOW_SECS = 4;

interface Delivery {
  event: string;
  signed: boolean;
  body: string;
  payload: { stream?: { id: string }; session?: { id: string; recordingUrl?: string; mp4Url?: string } };
}

/** Frames the publisher sent: what it had encoded when it went (its -progress reports every 0.1 s). */
async function publishFor(url: string, o: { seconds: number; cutAfterMs?: number }): Promise<number> {
  const publish: TestPublish = await publishTestSource({
    url,
    protocol: 'rtmp',
    seconds: o.seconds,
    width: 320,
    height: 240,
    fps: FPS,
  });
  after(() => publish.stop());
  if (o.cutAfterMs === undefined) {
    await publish.exited;
  } else {
    await sleep(o.cutAfterMs);
    // Cut: the connection drops, no FLV end, as when a network goes.
    publish.child.kill('SIGKILL');
    await publish.exited;
  }
  return publish.frames();
}

test('a recorded RTMP publish cut half way and resumed within the window is one session and one asset as long as what was sent, which plays', async (t) => {
  const player = await startBrowserPlayer();
  if ('skip' in player) return t.skip(player.skip);
  after(() => player.close());
  const rtmpPort = await freePort();
  const server = await startTestServer({
    settings: { rtmpPort, liveReconnectSecs: WINDOW_SECS },
    roles: { api: true, worker: true, ingest: true },
  });
  after(() => server.stop());
  const key = await server.key('recorder');
  const receiver = await startWebhookReceiver((req, body): Delivery => {
    const v1 = /v1=([0-9a-f]+)/.exec(String(req.headers['livepeer-signature'] ?? ''))?.[1];
    const envelope = JSON.parse(body) as { event: string; payload: Delivery['payload'] };
    return {
      event: envelope.event,
      body,
      payload: envelope.payload,
      signed: v1 === createHmac('sha256', SECRET).update(body).digest('hex'),
    };
  });
  after(() => receiver.server.close());
  const hook = await server.call('POST', '/api/webhook', {
    key,
    body: {
      name: 'rec',
      url: receiver.url,
      events: ['recording.started', 'recording.waiting', 'recording.ready'],
      sharedSecret: SECRET,
    },
  });
  assert.ok(hook.status === 200 || hook.status === 201, JSON.stringify(hook.body));
  // The source alone (no rungs): the recording is made of the publisher's own video, copied.
  const made = await server.call('POST', '/api/stream', {
    key,
    body: { name: 'recorded show', record: true, profiles: [] },
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const stream = made.body as { id: string; streamKey: string };
  const url = `rtmp://127.0.0.1:${rtmpPort}/live/${stream.streamKey}`;

  const first = await publishFor(url, { seconds: 10, cutAfterMs: 5000 });
  await sleep(1000);
  const second = await publishFor(url, { seconds: 4 });
  const sentSecs = (first + second) / FPS;
  t.diagnostic(`sent ${first} + ${second} frames (${sentSecs.toFixed(2)} s)`);

  const db = server.running.core.db;
  const sessions = await db.query<{ id: string }>('SELECT id::text AS id FROM stream_sessions WHERE stream_id = $1', [
    stream.id,
  ]);
  assert.equal(sessions.length, 1, 'the resumed publish continued the session');
  const sessionId = (sessions[0] as { id: string }).id;

  // The window closes, the session ends, its recording is queued and made by the worker.
  const asset = await waitFor(async () => {
    const got = await server.call('GET', `/api/asset/${sessionId}`, { key });
    const phase = got.status === 200 ? got.body.status.phase : undefined;
    assert.notEqual(phase, 'failed', JSON.stringify(got.body));
    return phase === 'ready' ? got.body : undefined;
  }, 180_000);
  assert.deepEqual(asset.source, { type: 'recording', sessionId });
  assert.equal(asset.name, 'recorded show');
  const duration = asset.videoSpec.duration as number;
  t.diagnostic(`recording lasts ${duration} s`);
  assert.ok(Math.abs(duration - sentSecs) <= 0.5, `the recording lasts ${duration} s, ${sentSecs} s were sent`);
  const all = await server.call('GET', '/api/asset', { key });
  assert.equal((all.body as { source: { type: string } }[]).filter((a) => a.source.type === 'recording').length, 1);

  const ready = await waitFor(async () => receiver.got.find((d) => d.event === 'recording.ready'), 30_000);
  assert.ok(ready.signed, 'recording.ready is signed');
  assert.equal(ready.payload.stream?.id, stream.id);
  assert.equal(ready.payload.session?.id, sessionId);
  assert.equal(ready.payload.session?.recordingUrl, asset.playbackUrl);
  assert.deepEqual(
    receiver.got.map((d) => d.event).filter((e) => e !== 'recording.ready'),
    ['recording.started', 'recording.waiting'],
  );

  const play = await player.playHls(asset.playbackUrl as string, { seconds: 2 });
  assert.equal(play.error, undefined, play.log.join('\n'));
  assert.ok(play.played > 1, `played ${play.played} s`);
  // The stream key (a secret) is in no delivery and no log line.
  assert.ok(!receiver.got.some((d) => d.body.includes(stream.streamKey)), 'no delivery shows the stream key');
  assert.ok(!server.logs.text.includes(stream.streamKey), 'no log line shows the stream key');
  const info = await server.call('GET', `/api/playback/${asset.playbackId}`);
  assert.equal(info.body.type, 'recording');
});
