import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ffmpegPublish, type FfmpegRun, killAll } from '../helpers/rtmp.ts';
import { freePort } from '../helpers/ports.ts';
import { waitFor } from '../helpers/server.ts';
import { createStream, get, type LiveService, startLiveService, variantUrls, waitMultivariant } from './live-e2e.ts';

// A live session across its publisher's reconnects, over RTMP with real ffmpeg (the source
// alone: no encode): a publisher back within the window continues the same session (one
// EXT-X-DISCONTINUITY, no EXT-X-ENDLIST between, stream.started at each publish); a
// terminate ends it at once; a window that closes ends it, and the next publish opens a new one.

const runs: FfmpegRun[] = [];
after(() => killAll(runs));

async function service(windowSecs: number): Promise<{ s: LiveService; rtmp: number }> {
  const rtmp = await freePort();
  const s = await startLiveService({ rtmpPort: rtmp, srtPort: 0, liveReconnectSecs: windowSecs });
  return { s, rtmp };
}

/** Publishes `seconds` of the test source and resolves once ffmpeg exits. */
function publish(rtmp: number, key: string, seconds: number): FfmpegRun {
  const run = ffmpegPublish(`rtmp://127.0.0.1:${rtmp}/live/${key}`, seconds);
  runs.push(run);
  return run;
}

const discontinuities = (playlist: string): number => playlist.match(/^#EXT-X-DISCONTINUITY$/gm)?.length ?? 0;

async function sessionRow(s: LiveService, id: string): Promise<{ state: string; ended_at: Date | null }> {
  const rows = await s.server.running.core.db.query<{ state: string; ended_at: Date | null }>(
    'SELECT state, ended_at FROM stream_sessions WHERE id = $1',
    [id],
  );
  assert.ok(rows[0], `session ${id}`);
  return rows[0];
}

async function events(s: LiveService, streamId: string): Promise<string[]> {
  const rows = await s.server.running.core.db.query<{ event: string }>(
    'SELECT event FROM task_events WHERE task_id = $1 ORDER BY created_at, id',
    [streamId],
  );
  return rows.map((r) => r.event);
}

async function streamOf(s: LiveService, id: string): Promise<{ isActive: boolean; sessionId?: string }> {
  const res = await s.server.call('GET', `/api/stream/${id}`, { key: s.key });
  return res.body as { isActive: boolean };
}

describe('a reconnect within the window', () => {
  let svc: { s: LiveService; rtmp: number };
  before(async () => {
    svc = await service(20);
  });
  after(() => svc.s.stop());

  it('continues the same session with one discontinuity, and a terminate ends it at once', async (t) => {
    const { s, rtmp } = svc;
    const stream = await createStream(s, { name: 'comes back', profiles: [] });
    const base = `${s.server.url}/media/live/${stream.playbackId}/`;
    const first = publish(rtmp, stream.streamKey, 3);
    const multivariant = await waitMultivariant(`${base}index.m3u8`, 20_000);
    const [playlistUrl] = variantUrls(multivariant, base);
    assert.ok(playlistUrl);
    assert.equal(await first.exited, 0, first.stderr());
    await waitFor(async () => ((await streamOf(s, stream.id)).isActive ? undefined : true), 15_000, 'stream.idle');
    const sessions = await s.server.call('GET', `/api/stream/${stream.id}/sessions`, { key: s.key });
    const [session] = sessions.body as { id: string }[];
    assert.ok(session);
    assert.equal((await sessionRow(s, session.id)).state, 'waiting');
    const between = await get(playlistUrl);
    assert.equal(between.status, 200);
    assert.ok(!between.text.includes('#EXT-X-ENDLIST'), 'no ENDLIST while the session waits');

    const back = Date.now();
    const second = publish(rtmp, stream.streamKey, 12);
    await waitFor(
      async () => {
        const p = await get(playlistUrl);
        // Parts of the second run are listed after its discontinuity.
        return discontinuities(p.text) === 1 && /#EXT-X-DISCONTINUITY\n(?:.*\n)*#EXT-X-PART/.test(p.text)
          ? p.text
          : undefined;
      },
      20_000,
      'the second run in the playlist',
    );
    t.diagnostic(`the second run's parts listed ${Date.now() - back} ms after the publisher came back`);
    const during = await get(playlistUrl);
    assert.equal(discontinuities(during.text), 1, during.text);
    assert.ok(!during.text.includes('#EXT-X-ENDLIST'));
    const again = await s.server.call('GET', `/api/stream/${stream.id}/sessions`, { key: s.key });
    assert.deepEqual(
      (again.body as { id: string }[]).map((x) => x.id),
      [session.id],
      'one session',
    );
    assert.equal((await s.server.call('GET', `/api/stream/${stream.id}`, { key: s.key })).body.isActive, true);

    const t0 = Date.now();
    const cut = await s.server.call('DELETE', `/api/stream/${stream.id}/terminate`, { key: s.key });
    assert.equal(cut.status, 204);
    await waitFor(
      async () => ((await get(playlistUrl)).text.includes('#EXT-X-ENDLIST') ? true : undefined),
      10_000,
      'ENDLIST after the terminate',
    );
    await waitFor(
      async () => ((await sessionRow(s, session.id)).state === 'ended' ? true : undefined),
      10_000,
      'the session ended',
    );
    const endedIn = Date.now() - t0;
    t.diagnostic(`the session ended ${endedIn} ms after the terminate (window 20 s)`);
    assert.ok(endedIn < 20_000, `ended ${endedIn} ms after the terminate, not at the window's end`);
    await second.exited;
    assert.deepEqual(await events(s, stream.id), ['stream.started', 'stream.idle', 'stream.started', 'stream.idle']);
    assert.match(s.server.logs.text, /the publisher is back: session continued/);
    assert.ok(!s.server.logs.text.includes(stream.streamKey), 'no log line holds the stream key');
  });
});

describe('a window that closes', () => {
  let svc: { s: LiveService; rtmp: number };
  before(async () => {
    svc = await service(2);
  });
  after(() => svc.s.stop());

  it('ends the session (ENDLIST) when the publisher does not come back; the next publish opens a new one', async () => {
    const { s, rtmp } = svc;
    const stream = await createStream(s, { name: 'goes', profiles: [] });
    const base = `${s.server.url}/media/live/${stream.playbackId}/`;
    const first = publish(rtmp, stream.streamKey, 3);
    const [playlistUrl] = variantUrls(await waitMultivariant(`${base}index.m3u8`, 20_000), base);
    assert.ok(playlistUrl);
    await first.exited;
    const [session] = (await s.server.call('GET', `/api/stream/${stream.id}/sessions`, { key: s.key })).body as {
      id: string;
    }[];
    assert.ok(session);
    await waitFor(
      async () => ((await sessionRow(s, session.id)).state === 'ended' ? true : undefined),
      15_000,
      'the session ended',
    );
    assert.ok((await get(playlistUrl)).text.includes('#EXT-X-ENDLIST'));
    await sleep(100);
    const next = publish(rtmp, stream.streamKey, 2);
    await waitFor(
      async () => {
        const list = (await s.server.call('GET', `/api/stream/${stream.id}/sessions`, { key: s.key }))
          .body as unknown[];
        return list.length === 2 ? true : undefined;
      },
      15_000,
      'a second session',
    );
    await next.exited;
  });
});
