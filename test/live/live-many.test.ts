import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { publishTestSource, type TestPublish } from '../helpers/live.ts';
import { freePort } from '../helpers/ports.ts';
import {
  createStream,
  get,
  ladderEnded,
  laddersStarted,
  SMALL_RUNG,
  startLiveService,
  waitMultivariant,
} from './live-e2e.ts';

// Four streams at once on the embedded service, each with its own small ladder. One publisher
// is killed mid-stream, one sends garbage after a valid publish: the other two keep gaining
// parts at the live rate, as their players' blocking reloads see them.

/**
 * Follows a media playlist as an LL-HLS player does (a blocking reload for each hinted part)
 * for `ms`; the wall time each new part arrived.
 */
async function followParts(url: string, ms: number): Promise<number[]> {
  const arrivals: number[] = [];
  const until = Date.now() + ms;
  let playlist = await get(url);
  while (Date.now() < until) {
    const hint = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="(\d+)\.(\d+)\.m4s"/.exec(playlist.text);
    assert.ok(hint, `no preload hint: ${playlist.status} ${playlist.text}`);
    playlist = await get(`${url}?_HLS_msn=${hint[1]}&_HLS_part=${hint[2]}`);
    assert.equal(playlist.status, 200, playlist.text);
    arrivals.push(Date.now());
  }
  return arrivals;
}

function longestGap(times: readonly number[]): number {
  return times.slice(1).reduce((max, t, i) => Math.max(max, t - (times[i] ?? t)), 0);
}

test('four streams at once: one publisher killed, one sending garbage, the other two keep playing without a stall', async (t) => {
  const rtmpPort = await freePort();
  const service = await startLiveService({ rtmpPort });
  after(() => service.stop());
  const streams = await Promise.all(
    ['steady one', 'steady two', 'killed', 'garbage'].map((name) =>
      createStream(service, { name, profiles: [SMALL_RUNG] }),
    ),
  );
  const publishes: TestPublish[] = [];
  for (const [i, s] of streams.entries()) {
    const publish = await publishTestSource({
      url: `rtmp://127.0.0.1:${rtmpPort}/live/${s.streamKey}`,
      protocol: 'rtmp',
      seconds: 15,
      width: 320,
      height: 240,
      fps: 15,
      ...(i === 3 ? { garbageAfterSeconds: 6 } : {}),
    });
    after(() => publish.stop());
    publishes.push(publish);
  }
  const media = (i: number) => `${service.server.url}/media/live/${streams[i]?.playbackId}/`;
  for (const i of [0, 1, 2, 3]) await waitMultivariant(`${media(i)}index.m3u8`, 15_000);
  assert.equal(await laddersStarted(service.server.url), 4);

  const followed = Promise.all([0, 1].map((i) => followParts(`${media(i)}160p0/index.m3u8`, 7000)));
  await sleep(1000);
  publishes[2]?.child.kill('SIGKILL');
  const [one = [], two = []] = await followed;
  const garbage = await publishes[3]?.garbageSent;
  assert.ok(garbage && garbage > 0, 'the garbage was sent during the watch');

  t.diagnostic(`parts in 7 s: ${one.length}, ${two.length}; longest gaps ${longestGap(one)}, ${longestGap(two)} ms`);
  for (const [name, arrivals] of [
    ['steady one', one],
    ['steady two', two],
  ] as const) {
    // 7 s of 0.27 s parts (15 fps: 4 frames each); a stall is a second and a half without one.
    assert.ok(arrivals.length >= 15, `${name}: ${arrivals.length} parts in 7 s`);
    assert.ok(longestGap(arrivals) < 1500, `${name}: ${longestGap(arrivals)} ms without a new part`);
  }
  // The two broken publishes ended alone: their streams are idle, the steady ones live.
  const state = async (i: number) =>
    (await service.server.call('GET', `/api/stream/${streams[i]?.id}`, { key: service.key })).body.isActive;
  for (let t = 0; t < 100 && ((await state(2)) || (await state(3))); t++) await sleep(100);
  assert.deepEqual(await Promise.all([0, 1, 2, 3].map(state)), [true, true, false, false]);
  assert.ok(await ladderEnded(media(2)), "the killed publish's playlists end");
  assert.equal((await get(`${media(0)}index.m3u8`)).status, 200);
  const logs = service.server.logs.text;
  for (const s of streams) assert.ok(!logs.includes(s.streamKey), 'a stream key was logged');
});
