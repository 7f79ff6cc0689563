import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { ffmpegPublish, type FfmpegRun, killAll } from '../helpers/rtmp.ts';
import { freePort } from '../helpers/ports.ts';
import { startRtmpReceiver } from '../helpers/restream-receiver.ts';
import { waitFor } from '../helpers/server.ts';
import { createStream, type LiveService, startLiveService } from './live-e2e.ts';

// Restreaming across a publisher's reconnect within the window (the source alone, no encode):
// the session goes on, and so does the push to its target: the ladder's new run is pushed by
// a new ffmpeg with its own init, to a receiver that took the first connection and another
// that takes the second (ffmpeg's listen mode takes one publish each). 4 s, then 6 s of publish.

const runs: FfmpegRun[] = [];
after(() => killAll(runs));

/** The restream events of the stream, in order, from the outbox. */
async function targetEvents(s: LiveService, streamId: string): Promise<string[]> {
  const rows = await s.server.running.core.db.query<{ event: string }>(
    `SELECT event FROM task_events WHERE task_id = $1 AND event LIKE 'multistream.%' ORDER BY created_at, id`,
    [streamId],
  );
  return rows.map((r) => r.event);
}

test('a publisher back within the window: the push goes on with the new run, in the same session', async (t) => {
  const rtmp = await freePort();
  const s = await startLiveService({ rtmpPort: rtmp, srtPort: 0, liveReconnectSecs: 10 });
  after(() => s.stop());
  const port = await freePort();
  const first = await startRtmpReceiver(port);
  const stream = await createStream(s, { name: 'comes back, restreamed', profiles: [] });
  const added = await s.server.call('POST', `/api/stream/${stream.id}/create-multistream-target`, {
    key: s.key,
    body: { profile: 'source', spec: { name: 'elsewhere', url: first.url } },
  });
  assert.equal(added.status, 204);
  const url = `rtmp://127.0.0.1:${rtmp}/live/${stream.streamKey}`;

  const one = ffmpegPublish(url, 4);
  runs.push(one);
  await first.receiving({ minBytes: 1 });
  assert.equal(await one.exited, 0, one.stderr());

  const two = ffmpegPublish(url, 6);
  runs.push(two);
  // The new run's ffmpeg replaces the first connection; the first receiver then writes out and exits.
  await first.exited;
  const second = await startRtmpReceiver(port);
  await second.receiving({ minBytes: 1, timeoutMs: 15_000 });
  assert.equal(await two.exited, 0, two.stderr());
  const cut = await s.server.call('DELETE', `/api/stream/${stream.id}/terminate`, { key: s.key });
  assert.ok(cut.status === 204 || cut.status === 409, `terminate: ${cut.status}`);
  await waitFor(
    async () => ((await targetEvents(s, stream.id)).includes('multistream.disconnected') ? true : undefined),
    15_000,
    'multistream.disconnected',
  );

  const sessions = await s.server.call('GET', `/api/stream/${stream.id}/sessions`, { key: s.key });
  assert.equal((sessions.body as unknown[]).length, 1, 'one session');
  const events = await targetEvents(s, stream.id);
  // An error may come between: the second connection can come before the second receiver listens.
  t.diagnostic(`restream events: ${events.join(', ')}`);
  assert.equal(events.filter((e) => e === 'multistream.connected').length, 2, events.join(', '));
  assert.equal(events.at(-1), 'multistream.disconnected');
  const [a, b] = await Promise.all([first.bytes(), second.bytes()]);
  assert.ok(a > 0 && b > 0, `${a} and ${b} bytes received`);
  assert.equal(s.server.logs.text.includes('target-secret-key'), false, 'no target url in the log');
});
