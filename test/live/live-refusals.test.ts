import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { publishTestSource, type TestPublish } from '../helpers/live.ts';
import { freePort } from '../helpers/ports.ts';
import {
  createStream,
  ladderEnded,
  laddersStarted,
  SMALL_RUNG,
  startLiveService,
  waitMultivariant,
} from './live-e2e.ts';

// Publishes the gate refuses: each publisher's ffmpeg fails, sees why (OBS shows the same
// onStatus description), and no ladder process starts for it (counted on /metrics).

/** A publisher that should be refused: its exit and what it printed. */
async function refusedPublish(url: string): Promise<{ code: number | null; stderr: string }> {
  const publish: TestPublish = await publishTestSource({ url, protocol: 'rtmp', seconds: 5, fps: 15 });
  after(() => publish.stop());
  const exit = await publish.exited;
  return { code: exit.code, stderr: publish.stderr() };
}

test('a wrong key, a suspended stream, a second publisher and a stream past MEDIAPLANE_LIVE_MAX_STREAMS are refused; no ladder starts for them', async () => {
  const rtmpPort = await freePort();
  const service = await startLiveService({ rtmpPort, liveMaxStreams: 1 });
  after(() => service.stop());
  const rtmp = (key: string) => `rtmp://127.0.0.1:${rtmpPort}/live/${key}`;
  const live = await createStream(service, { name: 'live one', profiles: [SMALL_RUNG] });
  const suspended = await createStream(service, { name: 'suspended', profiles: [] });
  const patched = await service.server.call('PATCH', `/api/stream/${suspended.id}`, {
    key: service.key,
    body: { suspended: true },
  });
  assert.equal(patched.status, 204);
  const other = await createStream(service, { name: 'one too many', profiles: [] });

  const wrong = await refusedPublish(rtmp('no-such-key-0123456789'));
  assert.notEqual(wrong.code, 0);
  const barred = await refusedPublish(rtmp(suspended.streamKey));
  assert.notEqual(barred.code, 0);
  assert.equal(await laddersStarted(service.server.url), 0);

  const publish = await publishTestSource({ url: rtmp(live.streamKey), protocol: 'rtmp', seconds: 15, fps: 15 });
  after(() => publish.stop());
  await waitMultivariant(`${service.server.url}/media/live/${live.playbackId}/index.m3u8`, 10_000);
  const second = await refusedPublish(rtmp(live.streamKey));
  assert.notEqual(second.code, 0);
  const capped = await refusedPublish(rtmp(other.streamKey));
  assert.notEqual(capped.code, 0);
  assert.equal(await laddersStarted(service.server.url), 1, 'only the accepted publish started a ladder');
  // The first publisher went on through the refusals.
  assert.equal(publish.child.exitCode, null);

  const logs = service.server.logs.text;
  for (const reason of [
    'no stream has this stream key',
    'this stream is suspended',
    'this stream is already live from another publisher',
    'this node takes at most 1 live streams',
  ])
    assert.ok(logs.includes(reason), `the refusal "${reason}" is logged`);
  for (const s of [live, suspended, other]) assert.ok(!logs.includes(s.streamKey), 'a stream key was logged');

  // Terminate cuts the publisher off; the stream goes idle.
  const cut = await service.server.call('DELETE', `/api/stream/${live.id}/terminate`, { key: service.key });
  assert.equal(cut.status, 204);
  const ended = await Promise.race([publish.exited, new Promise((r) => setTimeout(() => r('running'), 10_000))]);
  assert.notEqual(ended, 'running', 'the terminated publisher was cut off');
  for (let i = 0; i < 50; i++) {
    const s = await service.server.call('GET', `/api/stream/${live.id}`, { key: service.key });
    if (s.body.isActive === false) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal((await service.server.call('GET', `/api/stream/${live.id}`, { key: service.key })).body.isActive, false);
  assert.ok(await ladderEnded(`${service.server.url}/media/live/${live.playbackId}/`), 'its playlists end');
});
