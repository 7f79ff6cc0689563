import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import { type BrowserPlayer, type PlayResult, startBrowserPlayer } from '../helpers/browser.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { makeClip, sample } from '../helpers/media.ts';
import { makeTracksClip } from '../helpers/media-tracks.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

// Issue #19 acceptance: the outputs play in a real browser. Each case is one transcode
// through the API and a worker into the local S3 server; headless Chromium then plays what
// landed in the bucket with hls.js (every HLS output, every rendition), shaka-player (the
// DASH manifest) or a bare <video> (MP4, M4A). Clips are short and small: a play lasts
// about a second of media, and the four transcodes queue up while the first case plays.
// Without a Chromium that starts, every test skips and nothing is transcoded.

const SECONDS = 4;
/** Two small H.264 rungs: enough to prove that hls.js plays each level, not only the first. */
const LOW = { name: '144p0', width: 256, height: 144, bitrate: 200_000 };
const HIGH = { name: '216p0', width: 384, height: 216, bitrate: 400_000 };
const H264_LADDER = [LOW, HIGH];

interface Case {
  input: string;
  outputs: Record<string, { path: string }>;
  profiles?: Record<string, unknown>[];
}

const CASES = {
  h264: {
    input: '/clip.mp4',
    outputs: { hls: { path: '/v/hls' }, fmp4: { path: '/v/fmp4' }, mp4: { path: '/v/mp4' } },
    profiles: H264_LADDER,
  },
  tracks: {
    input: '/tracks.mkv',
    outputs: { hls: { path: '/t/hls' }, fmp4: { path: '/t/fmp4' } },
    profiles: [HIGH],
  },
  audioOnly: {
    input: '/audio.m4a',
    outputs: { hls: { path: '/s/hls' }, fmp4: { path: '/s/fmp4' }, mp4: { path: '/s/mp4' } },
  },
  // A mixed ladder (issue #19): H.264 at the bottom, AV1 above; AV1 is fMP4, DASH and MP4 only.
  av1: {
    input: '/clip.mp4',
    outputs: { fmp4: { path: '/a/fmp4' }, mp4: { path: '/a/mp4' } },
    profiles: [LOW, { ...HIGH, bitrate: 300_000, encoder: 'AV1' }],
  },
} satisfies Record<string, Case>;
type CaseName = keyof typeof CASES;

let s3: TestS3 | undefined;
let web: TestHttp | undefined;
let server: TestServer | undefined;
let player: BrowserPlayer | undefined;
let skipReason = '';
/** Each case's bucket once its task completed; a rejection says why it did not. */
const done = new Map<CaseName, Promise<string>>();

before(async () => {
  s3 = await startS3();
  const started = await startBrowserPlayer(s3);
  if ('skip' in started) {
    skipReason = started.skip;
    return;
  }
  player = started;
  const [clip, tracks] = await Promise.all([
    makeClip({ width: 640, height: 360, seconds: SECONDS }),
    makeTracksClip({ width: 640, height: 360, seconds: SECONDS }),
  ]);
  web = await startHttp({
    '/clip.mp4': serveFile(clip),
    '/tracks.mkv': serveFile(tracks, 'video/x-matroska'),
    '/audio.m4a': serveFile(sample('11_audio_only_aac_lc_mono_8khz_fdkaac.m4a'), 'audio/mp4'),
  });
  server = await startTestServer({ settings: { allowPrivateUrls: true, x264Preset: 'ultrafast' } });
  const key = await server.key('viewer');
  // Posted one after the other so the worker takes them in this order; each test awaits its own.
  for (const name of Object.keys(CASES) as CaseName[]) {
    let completed: Promise<string>;
    try {
      ({ completed } = await transcode(key, CASES[name]));
    } catch (e) {
      completed = Promise.reject(e);
    }
    completed.catch(() => undefined);
    done.set(name, completed);
  }
});
after(async () => {
  await player?.close();
  await server?.stop();
  await Promise.all([s3?.close(), web?.close()]);
});

/** POSTs the case; resolves once posted, with a promise of the bucket for when the task completes. */
async function transcode(key: string, c: Case): Promise<{ completed: Promise<string> }> {
  if (!s3 || !server || !web) throw new Error('not started');
  const api = server;
  const bucket = await s3.createBucket();
  const res = await server.call('POST', '/api/transcode', {
    key,
    body: {
      input: { url: web.url(c.input) },
      storage: {
        type: 's3',
        endpoint: s3.endpoint,
        bucket,
        credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: s3.credentials.secretAccessKey },
      },
      outputs: c.outputs,
      targetSegmentSizeSecs: 2,
      ...(c.profiles ? { profiles: c.profiles } : {}),
    },
  });
  if (res.status !== 200) throw new Error(`POST /api/transcode answered ${res.status}: ${JSON.stringify(res.body)}`);
  const id: string = res.body.id;
  const completed = (async () => {
    // Long enough for the cases queued before this one; only a broken build waits it out.
    const task = await waitFor(
      async () => {
        const got = await api.call('GET', `/api/task/${id}`, { key });
        return ['completed', 'failed', 'cancelled'].includes(got.body.status?.phase) ? got.body : undefined;
      },
      180_000,
      `task ${id}`,
    );
    if (task.status.phase !== 'completed')
      throw new Error(`the transcode ${task.status.phase}: ${task.status.errorMessage ?? ''}`);
    return bucket;
  })();
  return { completed };
}

/** The player and a URL maker for the case's bucket, or undefined after skipping `t`. */
async function ready(
  t: TestContext,
  name: CaseName,
): Promise<{ play: BrowserPlayer; url: (key: string) => string } | undefined> {
  const play = player;
  if (!play) {
    t.skip(skipReason);
    return undefined;
  }
  const bucket = await (done.get(name) ?? Promise.reject(new Error(`case ${name} was not posted`)));
  return { play, url: (key) => play.mediaUrl(bucket, key) };
}

/** Asserts the play got going: no error, and past a second (or to the end of a shorter clip). */
function assertPlayed(r: PlayResult, what: string): void {
  const context = `${what}: ${JSON.stringify({ ...r, levels: r.levels.length })}`;
  assert.equal(r.error, undefined, context);
  assert.ok(r.played >= 1 || r.ended, `played ${r.played} s, ${context}`);
}

/** hls.js plays every level of the master, each locked, and the picture has the level's height. */
async function playEveryLevel(play: BrowserPlayer, master: string, heights: number[]): Promise<PlayResult[]> {
  const first = await play.playHls(master, { level: 0 });
  assert.deepEqual(
    first.levels.map((l) => l.height),
    heights,
    `levels of ${master}`,
  );
  const results = [first];
  for (let i = 1; i < first.levels.length; i++) results.push(await play.playHls(master, { level: i }));
  results.forEach((r, i) => {
    assertPlayed(r, `${master} level ${i}`);
    assert.deepEqual(r.fragmentLevels, [i], `only level ${i}'s fragments buffered`);
    assert.equal(r.videoHeight, heights[i], `level ${i} decoded at its height`);
  });
  return results;
}

/** ISO 639-2 codes as players may shorten them (shaka-player writes "en" for "eng"). */
const language = (tag: string): string => ({ eng: 'en', fra: 'fr', fre: 'fr' })[tag] ?? tag;

function assertTracks(r: PlayResult, what: string): void {
  assert.deepEqual(
    r.audioTracks.map((a) => language(a.lang)),
    ['en', 'fr'],
    `${what}: audio tracks ${JSON.stringify(r.audioTracks)}`,
  );
  assert.deepEqual(
    r.audioTracks.map((a) => a.default),
    [true, false],
    `${what}: English is the default`,
  );
  assert.deepEqual(
    r.textTracks.map((s) => `${language(s.lang)} ${s.kind}`),
    ['en subtitles'],
    `${what}: text tracks`,
  );
  assert.ok(r.cues > 0, `${what}: subtitle cues loaded (${r.cues})`);
}

describe('H.264 ladder: HLS (TS), fMP4 with DASH, MP4', () => {
  it('hls.js plays every rendition of the TS HLS output', async (t) => {
    const c = await ready(t, 'h264');
    if (!c) return;
    await playEveryLevel(c.play, c.url('v/hls/index.m3u8'), [144, 216]);
  });

  it("hls.js plays every rendition of the fMP4 output's master", async (t) => {
    const c = await ready(t, 'h264');
    if (!c) return;
    await playEveryLevel(c.play, c.url('v/fmp4/index.m3u8'), [144, 216]);
  });

  it('shaka-player plays <fmp4>/index.mpd', async (t) => {
    const c = await ready(t, 'h264');
    if (!c) return;
    const r = await c.play.playDash(c.url('v/fmp4/index.mpd'));
    assertPlayed(r, 'index.mpd');
    assert.deepEqual(
      r.levels.map((l) => l.height).sort((a, b) => (a ?? 0) - (b ?? 0)),
      [144, 216],
    );
  });

  it('each MP4 rendition plays in a bare <video>', async (t) => {
    const c = await ready(t, 'h264');
    if (!c) return;
    for (const { name, height } of H264_LADDER) {
      const r = await c.play.playFile(c.url(`v/mp4/${name}.mp4`));
      assertPlayed(r, `${name}.mp4`);
      assert.equal(r.videoHeight, height);
    }
  });
});

describe('two audio tracks (eng, fra) and SRT subtitles', () => {
  it('hls.js lists 2 audio tracks and 1 subtitle track in the TS output, and plays with subtitles on', async (t) => {
    const c = await ready(t, 'tracks');
    if (!c) return;
    const r = await c.play.playHls(c.url('t/hls/index.m3u8'), { subtitles: true });
    assertPlayed(r, 'TS master');
    assertTracks(r, 'hls.js, TS');
  });

  it('hls.js lists the same tracks in the fMP4 output', async (t) => {
    const c = await ready(t, 'tracks');
    if (!c) return;
    const r = await c.play.playHls(c.url('t/fmp4/index.m3u8'), { subtitles: true });
    assertPlayed(r, 'fMP4 master');
    assertTracks(r, 'hls.js, fMP4');
  });

  it('shaka-player lists them in the DASH manifest', async (t) => {
    const c = await ready(t, 'tracks');
    if (!c) return;
    const r = await c.play.playDash(c.url('t/fmp4/index.mpd'), { subtitles: true });
    assertPlayed(r, 'index.mpd');
    assertTracks(r, 'shaka-player, DASH');
  });
});

describe('audio-only input (AAC mono 8 kHz)', () => {
  const audioOnly = (r: PlayResult, what: string): void => {
    assertPlayed(r, what);
    assert.equal(r.videoHeight, 0, `${what}: no picture`);
    assert.ok(
      r.levels.length > 0 && r.levels.every((l) => /mp4a/.test(l.codecs) && !/avc1|av01|hvc1|vp09/.test(l.codecs)),
      `${what}: AAC-only levels ${JSON.stringify(r.levels)}`,
    );
  };

  it('hls.js plays the TS HLS output', async (t) => {
    const c = await ready(t, 'audioOnly');
    if (!c) return;
    audioOnly(await c.play.playHls(c.url('s/hls/index.m3u8')), 'TS master');
  });

  it('hls.js plays the fMP4 output', async (t) => {
    const c = await ready(t, 'audioOnly');
    if (!c) return;
    audioOnly(await c.play.playHls(c.url('s/fmp4/index.m3u8')), 'fMP4 master');
  });

  it('shaka-player plays the DASH manifest', async (t) => {
    const c = await ready(t, 'audioOnly');
    if (!c) return;
    audioOnly(await c.play.playDash(c.url('s/fmp4/index.mpd')), 'index.mpd');
  });

  it('<mp4>/audio.m4a plays', async (t) => {
    const c = await ready(t, 'audioOnly');
    if (!c) return;
    const r = await c.play.playFile(c.url('s/mp4/audio.m4a'));
    assertPlayed(r, 'audio.m4a');
    assert.equal(r.videoHeight, 0);
  });
});

describe('AV1 rendition in a mixed ladder (fMP4, DASH, MP4)', () => {
  it('hls.js plays both levels of the fMP4 master, the AV1 one with CODECS av01', async (t) => {
    const c = await ready(t, 'av1');
    if (!c) return;
    const [low, high] = await playEveryLevel(c.play, c.url('a/fmp4/index.m3u8'), [144, 216]);
    assert.match(low?.levels[0]?.codecs ?? '', /avc1\./);
    assert.match(high?.levels[1]?.codecs ?? '', /av01\./);
  });

  it('shaka-player plays the AV1 variant of the DASH manifest', async (t) => {
    const c = await ready(t, 'av1');
    if (!c) return;
    const r = await c.play.playDash(c.url('a/fmp4/index.mpd'), { videoCodec: 'av01' });
    assertPlayed(r, 'index.mpd');
    assert.match(r.playing?.codecs ?? '', /av01\./, `the active variant ${JSON.stringify(r.playing)}`);
    assert.equal(r.videoHeight, 216);
  });

  it('the AV1 MP4 plays in a bare <video>', async (t) => {
    const c = await ready(t, 'av1');
    if (!c) return;
    const r = await c.play.playFile(c.url('a/mp4/216p0.mp4'));
    assertPlayed(r, '216p0.mp4');
    assert.equal(r.videoHeight, 216);
  });
});
