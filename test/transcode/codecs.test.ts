import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/config/index.ts';
import { FileInput, LocalDirStore } from '../../src/storage/index.ts';
import { type ProfileSpec, runPipeline, type TranscodeFileOutput } from '../../src/transcode/index.ts';
import { parseMediaPlaylist } from '../../src/transcode/playlist.ts';
import { decodeErrors, ffprobe, makeClip, sample } from '../helpers/media.ts';
import { startTestServer, type TestServer, transcodeBody } from '../helpers/server.ts';

// Issue #19 items 5-7: AV1 and VP9 renditions in fMP4 and MP4 outputs, beside H.264 in one
// ladder; segment cuts within the target for a variable-frame-rate screen recording; and
// the request rules that go with them, as a client meets them (422 from POST /api/transcode).

const run = promisify(execFile);
const dirs: string[] = [];
/** What the file started before its tests: each is awaited (settled) before the folders go. */
const pending: Promise<unknown>[] = [];
after(async () => {
  await Promise.allSettled(pending);
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** `work`, started now and awaited by the tests that read it; a failure fails those tests. */
function begin<T>(work: Promise<T>): Promise<T> {
  pending.push(work);
  work.catch(() => undefined);
  return work;
}

async function transcode(o: {
  input: string;
  outputs: Parameters<typeof runPipeline>[1]['outputs'];
  profiles: ProfileSpec[];
  segmentSecs: number;
  preset: 'ultrafast' | 'veryfast';
}): Promise<{ out: TranscodeFileOutput; dir: string }> {
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'mp-codecs-'));
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-codecs-out-'));
  dirs.push(scratch, dir);
  const out = await runPipeline(loadConfig({ env: {}, overrides: { x264Preset: o.preset } }), {
    source: new FileInput(o.input),
    store: new LocalDirStore(dir),
    outputs: o.outputs,
    profiles: o.profiles,
    segmentSecs: o.segmentSecs,
    scratchDir: scratch,
    signal: new AbortController().signal,
    progress: () => undefined,
  });
  return { out, dir };
}

/** Each variant of a master playlist: its URI and CODECS attribute. */
function variants(master: string): { uri: string; codecs: string }[] {
  const lines = master.split('\n');
  return lines.flatMap((line, i) =>
    line.startsWith('#EXT-X-STREAM-INF:')
      ? [{ uri: lines[i + 1]?.trim() ?? '', codecs: /CODECS="([^"]*)"/.exec(line)?.[1] ?? '' }]
      : [],
  );
}

async function segmentDurations(file: string): Promise<number[]> {
  return parseMediaPlaylist(await readFile(file, 'utf8')).segments.map((s) => s.duration);
}

/**
 * A segment behind its init segment, as a player that switches to it reads it: whether its
 * first packet is a keyframe, and ffmpeg's complaints decoding it (empty when clean).
 */
async function fragmentCheck(init: string, fragment: string): Promise<{ keyFirst: boolean; errors: string }> {
  const joined = `${fragment}.joined.mp4`;
  await run('sh', ['-c', 'cat "$1" "$2" > "$3"', 'sh', init, fragment, joined]);
  const args = ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'packet=flags', '-of', 'csv=p=0'];
  const { stdout } = await run('ffprobe', [...args, '-read_intervals', '%+#1', joined]);
  return { keyFirst: stdout.trim().startsWith('K'), errors: await decodeErrors(joined) };
}

// The file's heavy work starts at once and runs side by side (issue 41): the test server, and
// the two encodes of the variable-frame-rate input (the segment durations below). The H.264
// rendition is encoded once and written to HLS (TS) and fMP4 by the tee muxer, each format
// with its own segmenter; AV1 (never in TS) goes to fMP4 by itself.
const vfrInput = sample('07_chrome_screen_recording_h264_annexb_vfr_no_audio.mkv');
let vfrH264: Promise<{ dir: string }>;
let vfrAv1: Promise<{ dir: string }>;
let serverStarted: Promise<TestServer>;
before(() => {
  serverStarted = begin(startTestServer({ roles: { api: true, worker: false } }));
  vfrH264 = begin(
    transcode({
      input: vfrInput,
      outputs: { hls: { path: '/hls' }, fmp4: { path: '/fmp4' } },
      profiles: [{ name: 'sd', width: 640, height: 360, bitrate: 1_000_000 }],
      segmentSecs: 4,
      preset: 'veryfast',
    }),
  );
  vfrAv1 = begin(
    transcode({
      input: vfrInput,
      outputs: { fmp4: { path: '/fmp4' } },
      profiles: [{ name: 'av1', width: 426, height: 240, bitrate: 400_000, encoder: 'AV1' }],
      segmentSecs: 4,
      preset: 'veryfast',
    }),
  );
});
after(async () => {
  const server = await serverStarted?.catch(() => undefined);
  await server?.stop();
});

describe('AV1 and VP9 renditions (fMP4 and MP4 outputs)', () => {
  let result: { out: TranscodeFileOutput; dir: string };
  before(async () => {
    const clip = await makeClip({ width: 320, height: 240, seconds: 2 });
    result = await transcode({
      input: clip,
      outputs: { fmp4: { path: '/fmp4' }, mp4: { path: '/mp4' } },
      // A mixed ladder: H.264 low, AV1 and VP9 above it.
      profiles: [
        { name: 'low', width: 160, height: 120, bitrate: 150_000 },
        { name: 'av1', width: 320, height: 240, bitrate: 300_000, encoder: 'AV1' },
        { name: 'vp9', width: 320, height: 240, bitrate: 300_000, encoder: 'VP9' },
      ],
      segmentSecs: 1,
      preset: 'ultrafast',
    });
  });

  it('lists each rendition in the fMP4 master with its own CODECS', async () => {
    const master = await readFile(path.join(result.dir, 'fmp4/index.m3u8'), 'utf8');
    const byUri = new Map(variants(master).map((v) => [v.uri, v.codecs]));
    assert.match(byUri.get('av1/index.m3u8') ?? '', /^av01\.0\.\d\dM\.08(,|$)/, master);
    assert.match(byUri.get('vp9/index.m3u8') ?? '', /^vp09\.00\.\d\d\.08(,|$)/, master);
    assert.match(byUri.get('low/index.m3u8') ?? '', /^avc1\./, master);
  });

  it('says the same codecs in the DASH manifest over those segments', async (t) => {
    const file = path.join(result.dir, 'fmp4/index.mpd');
    // DASH (issue #19 item 2) lands beside this work; until then there is nothing to read.
    if (!existsSync(file)) return t.skip('no fmp4/index.mpd written');
    const mpd = await readFile(file, 'utf8');
    for (const codec of [/codecs="av01\.0\.\d\dM\.08"/, /codecs="vp09\.00\.\d\d\.08"/, /codecs="avc1\./])
      assert.match(mpd, codec);
  });

  it('writes segments that start with a keyframe and decode behind their init segment', async () => {
    for (const name of ['av1', 'vp9', 'low']) {
      const dir = path.join(result.dir, 'fmp4', name);
      const playlist = parseMediaPlaylist(await readFile(path.join(dir, 'index.m3u8'), 'utf8'));
      assert.ok(playlist.map, `${name} has an init segment`);
      assert.equal(playlist.segments.length, 2, `${name}: 2 s in 1 s segments`);
      for (const s of playlist.segments) {
        assert.ok(s.duration <= 1.0005, `${name}/${s.uri} lasts ${s.duration} s`);
        const got = await fragmentCheck(path.join(dir, playlist.map), path.join(dir, s.uri));
        assert.deepEqual(got, { keyFirst: true, errors: '' }, `${name}/${s.uri}`);
      }
    }
  });

  it('writes MP4s that play with the codec asked', async () => {
    const want: Record<string, string> = { low: 'h264', av1: 'av1', vp9: 'vp9' };
    assert.deepEqual(
      result.out.mp4?.map((m) => m.name),
      ['low', 'av1', 'vp9'],
    );
    for (const m of result.out.mp4 ?? []) {
      const file = path.join(result.dir, m.path);
      const video = (await ffprobe(file)).streams.find((s) => s.codec_type === 'video');
      assert.equal(video?.codec_name, want[m.name], m.name);
      assert.ok('width' in m, `${m.name} is a video rendition`);
      assert.equal(`${video?.width}x${video?.height}`, `${m.width}x${m.height}`);
      assert.equal(await decodeErrors(file), '', m.name);
    }
  });
});

describe('segment durations of a variable-frame-rate input', () => {
  // Sample 07 (a Chrome screen recording) with 4 s segments gave a 4.034 s segment: an x264
  // scene-cut keyframe one frame before a cut, where hlsenc's drifting cut time let it start
  // the segment early, so the next one ran long. The default preset (veryfast) has scene cuts.
  const within = (durations: number[], what: string) => {
    assert.ok(durations.length >= 8, `${what}: ${durations.length} segments`);
    for (const [i, d] of durations.slice(0, -1).entries())
      assert.ok(d <= 4.0005, `${what}: segment ${i} lasts ${d} s of a 4 s target (${durations.join(', ')})`);
  };

  it('keeps every segment but the last within the target in HLS (TS)', async () => {
    const { dir } = await vfrH264;
    within(await segmentDurations(path.join(dir, 'hls/sd/index.m3u8')), 'hls sd');
  });

  it('keeps every segment but the last within the target in fMP4, for H.264 and AV1', async () => {
    const [sd, other] = await Promise.all([vfrH264, vfrAv1]);
    within(await segmentDurations(path.join(sd.dir, 'fmp4/sd/index.m3u8')), 'fmp4 sd');
    within(await segmentDurations(path.join(other.dir, 'fmp4/av1/index.m3u8')), 'fmp4 av1');
  });
});

describe('POST /api/transcode: the codec, name and C2PA rules', () => {
  let server: TestServer;
  let key: string;
  before(async () => {
    server = await serverStarted;
    key = await server.key('alice');
  });

  const profile = (over: Record<string, unknown>) => ({ name: 'p', width: 640, height: 360, bitrate: 1e6, ...over });
  const post = (body: Record<string, unknown>) => server.call('POST', '/api/transcode', { key, body });

  const refused: { name: string; body: Record<string, unknown>; expect: RegExp }[] = [
    {
      name: 'AV1 with an HLS (TS) output',
      body: transcodeBody({ profiles: [profile({}), profile({ name: 'hd', encoder: 'AV1' })] }),
      expect:
        /^profiles\[1\]\.encoder: AV1 is only available in fMP4 \(HLS and DASH\) and MP4 outputs, not in HLS with TS segments \(outputs\.hls\)$/,
    },
    {
      name: 'VP9 with an HLS (TS) output',
      body: transcodeBody({
        outputs: { hls: { path: '/h' }, fmp4: { path: '/f' } },
        profiles: [profile({ encoder: 'VP9' })],
      }),
      expect: /^profiles\[0\]\.encoder: VP9 is only available in fMP4/,
    },
    {
      name: 'VP8',
      body: transcodeBody({ outputs: { mp4: { path: '/m' } }, profiles: [profile({ encoder: 'VP8' })] }),
      expect: /^profiles\[0\]\.encoder: VP8 is not supported; use H\.264, HEVC, AV1 or VP9$/,
    },
    {
      name: 'a rendition named audio',
      body: transcodeBody({ profiles: [profile({ name: 'audio' })] }),
      expect: /^profiles\[0\]\.name: audio, subtitles, thumbnails are reserved/,
    },
    {
      name: 'a rendition named Thumbnails',
      body: transcodeBody({ profiles: [profile({}), profile({ name: 'Thumbnails' })] }),
      expect: /^profiles\[1\]\.name: audio, subtitles, thumbnails are reserved/,
    },
    {
      name: 'AV1 with gop "intra"',
      body: transcodeBody({ outputs: { mp4: { path: '/m' } }, profiles: [profile({ encoder: 'AV1', gop: 'intra' })] }),
      expect: /^profiles\[0\]\.gop: "intra" \(every frame a keyframe\) is not available with AV1/,
    },
    {
      name: 'c2pa with an fMP4 output alone',
      body: transcodeBody({ outputs: { fmp4: { path: '/f' } }, c2pa: true }),
      expect: /^c2pa: signing applies to MP4 outputs; add outputs\.mp4$/,
    },
  ];
  for (const c of refused) {
    it(`refuses ${c.name} with 422 naming the field and the rule`, async () => {
      const res = await post(c.body);
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.ok(
        (res.body.errors as string[]).some((m) => c.expect.test(m)),
        `${JSON.stringify(res.body.errors)} should match ${c.expect}`,
      );
    });
  }

  it('takes AV1 and VP9 beside H.264 with fMP4 and MP4 outputs', async () => {
    const res = await post(
      transcodeBody({
        outputs: { fmp4: { path: '/f' }, mp4: { path: '/m' } },
        profiles: [
          profile({ name: 'sd' }),
          profile({ name: 'av1', encoder: 'AV1' }),
          profile({ name: 'vp9', encoder: 'VP9' }),
        ],
      }),
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
  });

  it('says nothing of MP4s when c2pa comes with an MP4 output', async () => {
    const res = await post(transcodeBody({ outputs: { fmp4: { path: '/f' }, mp4: { path: '/m' } }, c2pa: true }));
    // This server cannot sign: that is the one complaint.
    assert.equal(res.status, 422);
    assert.deepEqual(res.body.errors, ['c2pa: C2PA signing is not configured on this server']);
  });
});
