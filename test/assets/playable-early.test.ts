// Playback before the end: an uploaded asset (PUT) of a 5-minute source with a stereo and a
// 5.1 track, split into pieces, plays in Chromium (hls.js) while it is still `processing`: as
// soon as the first chunk and the first audio piece are in, GET /api/asset/{id} and GET
// /api/task/{id} say `playableAt`, the asset's playbackUrl (an EVENT playlist that becomes
// VOD) and /api/playback/{id} answer, and the Livepeer SDK still parses the Asset. It then
// becomes `ready` with the playlists a single run of the same source makes (an asset from its
// URL on a server that does not split): the same renditions, segment counts and durations
// (within a frame; the audio's within an AAC frame). A small picture at 15 fps, ultrafast,
// 30 s pieces and one worker slot keep it cheap and the pieces in order, so the asset
// plays long before its last piece. An asset from a URL gets `playableAt` too
// (chunked-asset.test.ts).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Asset$inboundSchema } from 'livepeer/models/components/asset.js';
import { type BrowserPlayer, startBrowserPlayer } from '../helpers/browser.ts';
import { startHttp, type TestHttp } from '../helpers/http-input.ts';
import { makeLongClip, serveRanges } from '../helpers/seams.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

const SECONDS = 300;
const FPS = 15;
const FRAME = 1 / FPS;
const AAC_FRAME = 1024 / 48000;
const SEGMENT_SECS = 6;
const PROFILES = [
  { name: '180p0', width: 320, height: 180, bitrate: 300_000 },
  { name: '144p0', width: 256, height: 144, bitrate: 200_000 },
];
/** Split past 60 s into 30 s pieces (10 chunks of the film, its audio in 30 s pieces too). */
const CHUNKED = { chunkThresholdSecs: 60, chunkSecs: 30 };
const TIMEOUT_MS = 600_000;

interface Asset {
  id: string;
  playbackId: string;
  playbackUrl?: string;
  playableAt?: number;
  status: { phase: string; updatedAt: number; errorMessage?: string };
  [field: string]: unknown;
}

/** A media playlist as the comparison needs it: its segments' durations, and whether it ended. */
interface MediaPlaylist {
  uri: string;
  durations: number[];
  ended: boolean;
}

/** The master's variants (resolution and codecs) and audio renditions, each with its media playlist. */
interface Playlists {
  variants: string[];
  video: MediaPlaylist[];
  audio: MediaPlaylist[];
}

async function text(url: string): Promise<string> {
  const res = await fetch(url);
  assert.equal(res.status, 200, url);
  return res.text();
}

async function mediaPlaylist(url: string): Promise<MediaPlaylist> {
  const body = await text(url);
  const durations = [...body.matchAll(/#EXTINF:([\d.]+)/g)].map((m) => Number(m[1]));
  return {
    uri: new URL(url).pathname.split('/').slice(-2).join('/'),
    durations,
    ended: body.includes('#EXT-X-ENDLIST'),
  };
}

/** Reads a master playlist and every media playlist it names, over HTTP. */
async function playlists(masterUrl: string): Promise<Playlists> {
  const lines = (await text(masterUrl)).split('\n').map((l) => l.trim());
  const at = (uri: string) => new URL(uri, masterUrl).toString();
  const variants: string[] = [];
  const video: MediaPlaylist[] = [];
  for (const [i, l] of lines.entries()) {
    if (!l.startsWith('#EXT-X-STREAM-INF')) continue;
    variants.push([/RESOLUTION=([^,]+)/.exec(l)?.[1], /CODECS="([^"]+)"/.exec(l)?.[1]].join(' '));
    video.push(await mediaPlaylist(at(lines[i + 1] ?? '')));
  }
  const audio: MediaPlaylist[] = [];
  for (const l of lines) {
    const uri = /#EXT-X-MEDIA:TYPE=AUDIO.*URI="([^"]+)"/.exec(l)?.[1];
    if (uri) audio.push(await mediaPlaylist(at(uri)));
  }
  return { variants, video, audio };
}

/** Where two media playlists' segment durations differ by more than `tolerance` seconds (or in count). */
function durationProblems(got: MediaPlaylist, want: MediaPlaylist | undefined, tolerance: number): string[] {
  const [g, w] = [got.durations, want?.durations ?? []];
  if (g.length !== w.length)
    return [`${got.uri}: ${g.length} segments, the single run ${w.length} (last: ${g.slice(-2)}; ${w.slice(-2)})`];
  return g.flatMap((d, i) => {
    const single = w[i] ?? 0;
    return Math.abs(d - single) > tolerance + 1e-6
      ? [`${got.uri} segment ${i}: ${d} s, the single run ${single} s`]
      : [];
  });
}

describe('an asset plays before its last piece is done', () => {
  let film: string;
  let web: TestHttp;
  let server: TestServer;
  let key: string;
  let player: BrowserPlayer | undefined;
  let skip: string | undefined;
  /** The asset as first seen playable, while processing. */
  let early: Asset;
  let earlyPlaylists: Playlists;
  let taskId: string;
  let ready: Asset;

  const getAsset = async (id: string): Promise<Asset> => (await server.call('GET', `/api/asset/${id}`, { key })).body;
  /** Polls the asset until `want` says yes; fails at once if it failed. */
  const assetUntil = (id: string, want: (a: Asset) => boolean, what: string): Promise<Asset> =>
    waitFor(
      async () => {
        const a = await getAsset(id);
        if (a.status.phase === 'failed') throw new Error(`the asset failed: ${a.status.errorMessage ?? ''}`);
        return want(a) ? a : undefined;
      },
      TIMEOUT_MS,
      what,
    );
  const body = (name: string) => ({ name, profiles: PROFILES, targetSegmentSizeSecs: SEGMENT_SECS });

  before(async () => {
    // A stereo and a 5.1 track, as a film has them: a single run then gives its audio a rendition
    // group too (one track it would mux into the variants), so the playlists compare one to one.
    film = await makeLongClip({ width: 320, height: 180, seconds: SECONDS, fps: FPS, surround: true });
    web = await startHttp({ '/film.mp4': serveRanges(film).route });
    const started = await startBrowserPlayer();
    if ('skip' in started) skip = started.skip;
    else player = started;
    server = await startTestServer({ settings: CHUNKED });
    key = await server.key('alice');
    const res = await server.call('POST', '/api/asset/request-upload', { key, body: body('film') });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    taskId = res.body.task.id;
    const put = await fetch(res.body.url, { method: 'PUT', body: readFileSync(film) });
    assert.ok(put.ok, `PUT answered ${put.status}`);
    early = await assetUntil(
      res.body.asset.id,
      (a) => a.playableAt !== undefined || a.status.phase === 'ready',
      'playable',
    );
    earlyPlaylists = await playlists(early.playbackUrl ?? '');
  });

  after(async () => {
    await player?.close();
    await server?.stop();
    await web?.close();
  });

  it('says playableAt while processing: its playbackUrl, the playback info and the task', async () => {
    assert.equal(early.status.phase, 'processing', 'playable before the end');
    assert.equal(typeof early.playableAt, 'number');
    assert.ok(early.playbackUrl?.endsWith(`/asset/${early.playbackId}/hls/index.m3u8`), early.playbackUrl);
    assert.doesNotThrow(() => Asset$inboundSchema.parse(early), "the SDK's Asset parses it");
    const info = (await server.call('GET', `/api/playback/${early.playbackId}`)).body;
    assert.deepEqual(info.meta.source, [
      { hrn: 'HLS (TS)', type: 'html5/application/vnd.apple.mpegurl', url: early.playbackUrl },
    ]);
    const task = (await server.call('GET', `/api/task/${taskId}`, { key })).body;
    assert.equal(task.playableAt, early.playableAt, 'the task says it too');
    const events = await server.running.core.db.query<{ event: string; playable: string | null }>(
      `SELECT event, task ->> 'playable_at' AS playable FROM task_events WHERE task_id = $1 ORDER BY created_at, id`,
      [early.id],
    );
    assert.ok(
      events.some((e) => e.event === 'asset.updated' && e.playable !== null),
      `an asset.updated event says so: ${JSON.stringify(events)}`,
    );
  });

  it('its early playlists hold every rendition and the audio, not ended', () => {
    assert.equal(earlyPlaylists.variants.length, PROFILES.length);
    assert.ok(earlyPlaylists.audio.length >= 1, 'the audio rendition');
    for (const p of [...earlyPlaylists.video, ...earlyPlaylists.audio]) {
      assert.ok(p.durations.length > 0, `${p.uri} has segments`);
      assert.equal(p.ended, false, `${p.uri} is an EVENT playlist still growing`);
    }
  });

  it('plays in Chromium (hls.js) while the asset is still processing', async (t) => {
    if (!player) return t.skip(skip);
    const played = await player.playHls(early.playbackUrl ?? '', { start: 0, seconds: 2, level: 0 });
    assert.equal(played.error, undefined, played.log.join('\n'));
    assert.ok(played.played >= 1.5, `played to ${played.played} s`);
    assert.equal(played.levels.length, PROFILES.length);
    assert.equal((await getAsset(early.id)).status.phase, 'processing', 'played before the end');
  });

  it('becomes ready with the same playbackUrl (now VOD) and keeps its playableAt', async (t) => {
    ready = await assetUntil(early.id, (a) => a.status.phase === 'ready', 'ready');
    const since = (ms: number) => ((ms - Number(early.createdAt)) / 1000).toFixed(1);
    t.diagnostic(
      `playable ${since(early.playableAt ?? 0)} s, ready ${since(ready.status.updatedAt)} s after the upload`,
    );
    assert.equal(ready.playbackUrl, early.playbackUrl);
    assert.equal(ready.playableAt, early.playableAt);
    assert.ok((early.playableAt ?? 0) < ready.status.updatedAt, 'playable before ready');
    const final = await playlists(ready.playbackUrl ?? '');
    for (const p of [...final.video, ...final.audio]) assert.ok(p.ended, `${p.uri} ended`);
  });

  it('its playlists are those of a single run of the same source', async () => {
    const single = await startTestServer({ settings: { chunkThresholdSecs: 0 } });
    try {
      const k = await single.key('alice');
      const res = await single.call('POST', '/api/asset/upload/url', {
        key: k,
        body: { ...body('single'), url: web.url('/film.mp4') },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const id: string = res.body.asset.id;
      const done: Asset = await waitFor(
        async () => {
          const a: Asset = (await single.call('GET', `/api/asset/${id}`, { key: k })).body;
          if (a.status.phase === 'failed') throw new Error(`the single run failed: ${a.status.errorMessage ?? ''}`);
          return a.status.phase === 'ready' ? a : undefined;
        },
        TIMEOUT_MS,
        'the single run',
      );
      assert.equal(done.playableAt, undefined, 'a single run is playable when ready');
      const want = await playlists(done.playbackUrl ?? '');
      const got = await playlists(ready.playbackUrl ?? '');
      assert.deepEqual(got.variants, want.variants, 'the same renditions');
      assert.equal(got.audio.length, 2, 'both audio tracks');
      assert.equal(want.audio.length, 2, "the single run's audio group");
      const problems = [
        ...got.video.flatMap((p, i) => durationProblems(p, want.video[i], FRAME)),
        ...got.audio.flatMap((p, i) => durationProblems(p, want.audio[i], AAC_FRAME)),
      ];
      assert.deepEqual(problems, []);
    } finally {
      await single.stop();
    }
  });
});
