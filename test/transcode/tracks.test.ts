import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config/index.ts';
import type { JobContext } from '../../src/tasks/types.ts';
import { createTranscodeHandler, type OutputFolders, type TranscodeFileOutput } from '../../src/transcode/index.ts';
import { parseMediaPlaylist } from '../../src/transcode/playlist.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { ffprobe, makeClip, sample } from '../helpers/media.ts';
import { makeTracksClip } from '../helpers/media-tracks.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';

// Issue #19 items 1, 3 and 4: the storyboard and poster; audio in its own rendition group
// (fMP4 always, TS with several tracks), every audio track kept with its language, text
// subtitles as WebVTT renditions, audio-only inputs.

const config = loadConfig({ env: {}, overrides: { allowPrivateUrls: true, x264Preset: 'ultrafast' } });
const handler = createTranscodeHandler({ config });
const ALL: OutputFolders = { hls: { path: '/hls' }, fmp4: { path: '/cmaf' }, mp4: { path: '/mp4' } };

let s3: TestS3;
let web: TestHttp;
const scratch: string[] = [];

before(async () => {
  const [s, tracks, single] = await Promise.all([
    startS3(),
    makeTracksClip({ width: 320, height: 240, seconds: 5 }),
    makeClip({ width: 320, height: 240, seconds: 3 }),
  ]);
  s3 = s;
  web = await startHttp({
    '/tracks.mkv': serveFile(tracks),
    '/single.mp4': serveFile(single),
    '/audio.m4a': serveFile(sample('11_audio_only_aac_lc_mono_8khz_fdkaac.m4a')),
  });
});
after(async () => {
  await Promise.all([s3?.close(), web?.close(), ...scratch.map((d) => rm(d, { recursive: true, force: true }))]);
});

async function transcode(url: string, outputs: OutputFolders): Promise<{ bucket: string; out: TranscodeFileOutput }> {
  const bucket = await s3.createBucket();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-tracks-'));
  scratch.push(dir);
  const ctx: JobContext = {
    taskId: 't',
    attempt: 1,
    signal: new AbortController().signal,
    scratchDir: dir,
    progress: () => undefined,
    log: pino({ level: 'silent' }),
  };
  const storage = { type: 's3' as const, endpoint: s3.endpoint, bucket, credentials: s3.credentials };
  const out = await handler({ input: { url: web.url(url) }, storage, outputs }, ctx);
  return { bucket, out };
}

async function text(bucket: string, key: string): Promise<string> {
  return (await s3.get(bucket, key)).body.toString('utf8');
}

/** ffprobe's streams of an object in the bucket: [codec_type, language tag]. */
async function streamsOf(bucket: string, key: string): Promise<string[][]> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-tracks-dl-'));
  scratch.push(dir);
  const file = path.join(dir, path.basename(key));
  await writeFile(file, (await s3.get(bucket, key)).body);
  const info = (await ffprobe(file)) as { streams: { codec_type: string; tags?: { language?: string } }[] };
  return info.streams.map((s) => [s.codec_type, s.tags?.language?.replace('und', '') ?? '']);
}

const mediaLines = (master: string, type: string): string[] =>
  master.split('\n').filter((l) => l.startsWith(`#EXT-X-MEDIA:TYPE=${type}`));

describe('audio tracks and subtitles', () => {
  it('keeps both audio tracks with their languages and the subtitle track, in every output', async () => {
    const { bucket, out } = await transcode('/tracks.mkv', ALL);
    for (const tree of ['hls', 'cmaf']) {
      const master = await text(bucket, `${tree}/index.m3u8`);
      const audio = mediaLines(master, 'AUDIO');
      assert.equal(audio.length, 2, master);
      assert.match(audio[0] ?? '', /LANGUAGE="eng",DEFAULT=YES.*URI="audio\/0\/index.m3u8"/);
      assert.match(audio[1] ?? '', /LANGUAGE="fra",DEFAULT=NO.*URI="audio\/1\/index.m3u8"/);
      const subs = mediaLines(master, 'SUBTITLES');
      assert.equal(subs.length, 1, master);
      assert.match(subs[0] ?? '', /LANGUAGE="eng".*URI="subtitles\/0\/index.m3u8"/);
      assert.match(
        master,
        /#EXT-X-STREAM-INF:.*CODECS="avc1\.[0-9A-Fa-f]+,mp4a\.40\.2".*AUDIO="audio",SUBTITLES="subs"/,
      );
      const vtt = await text(bucket, `${tree}/subtitles/0/0.vtt`);
      assert.match(vtt, /^WEBVTT\nX-TIMESTAMP-MAP=MPEGTS=0,LOCAL=00:00:00.000\n/);
      assert.match(vtt, /Line 1/);
      const subPlaylist = parseMediaPlaylist(await text(bucket, `${tree}/subtitles/0/index.m3u8`));
      assert.deepEqual(
        subPlaylist.segments.map((s) => s.uri),
        ['0.vtt'],
      );
      const audioPlaylist = parseMediaPlaylist(await text(bucket, `${tree}/audio/1/index.m3u8`));
      assert.ok(audioPlaylist.segments.length > 0);
    }
    // The video renditions carry no audio: it is in the group.
    assert.deepEqual(await streamsOf(bucket, 'hls/240p0/0.ts'), [['video', '']]);
    assert.deepEqual(await streamsOf(bucket, 'cmaf/240p0/init.mp4'), [['video', '']]);
    // Each group's track keeps its language, as in the MP4.
    assert.deepEqual(await streamsOf(bucket, 'cmaf/audio/1/init.mp4'), [['audio', 'fra']]);
    assert.deepEqual(await streamsOf(bucket, 'mp4/240p0.mp4'), [
      ['video', ''],
      ['audio', 'eng'],
      ['audio', 'fra'],
    ]);
    assert.deepEqual(
      out.hls?.audio?.map((a) => [a.path, a.language, a.default]),
      [
        ['/hls/audio/0/index.m3u8', 'eng', true],
        ['/hls/audio/1/index.m3u8', 'fra', false],
      ],
    );
    assert.deepEqual(
      out.fmp4?.subtitles?.map((s) => [s.path, s.file, s.language]),
      [['/cmaf/subtitles/0/index.m3u8', '/cmaf/subtitles/0/0.vtt', 'eng']],
    );
  });

  it('one track stays muxed in the TS renditions and goes in its own group in fMP4', async () => {
    const { bucket } = await transcode('/single.mp4', { hls: { path: '/hls' }, fmp4: { path: '/cmaf' } });
    const hls = await text(bucket, 'hls/index.m3u8');
    assert.equal(mediaLines(hls, 'AUDIO').length, 0, hls);
    assert.deepEqual(
      (await streamsOf(bucket, 'hls/240p0/0.ts')).map((s) => s[0]),
      ['video', 'audio'],
    );
    const cmaf = await text(bucket, 'cmaf/index.m3u8');
    assert.equal(mediaLines(cmaf, 'AUDIO').length, 1, cmaf);
    assert.match(cmaf, /CODECS="avc1\.[0-9A-Fa-f]+,mp4a\.40\.2"/);
    assert.deepEqual(await streamsOf(bucket, 'cmaf/240p0/init.mp4'), [['video', '']]);
  });

  it('an audio-only input completes with AAC renditions and audio.m4a', async () => {
    const { bucket, out } = await transcode('/audio.m4a', ALL);
    for (const tree of ['hls', 'cmaf']) {
      const master = await text(bucket, `${tree}/index.m3u8`);
      assert.match(
        master,
        /#EXT-X-STREAM-INF:BANDWIDTH=\d+,AVERAGE-BANDWIDTH=\d+,CODECS="mp4a\.40\.2"\naudio\/0\/index.m3u8/,
      );
      assert.doesNotMatch(master, /RESOLUTION|#EXT-X-MEDIA/);
      assert.ok(parseMediaPlaylist(await text(bucket, `${tree}/audio/0/index.m3u8`)).segments.length > 0);
    }
    assert.deepEqual(await streamsOf(bucket, 'mp4/audio.m4a'), [['audio', '']]);
    assert.deepEqual(
      out.mp4?.map((m) => m.path),
      ['/mp4/audio.m4a'],
    );
    assert.deepEqual(out.hls?.renditions, []);
    assert.ok(out.input_video.duration > 0);
  });
});

/** WebVTT cue times in seconds, [start, end] per cue, and each cue's text. */
function cues(vtt: string): { start: number; end: number; text: string }[] {
  const secs = (t: string): number => t.split(':').reduce((a, p) => a * 60 + Number(p), 0);
  return [...vtt.matchAll(/([\d:.]+) --> ([\d:.]+)\n(.+)/g)].map((m) => ({
    start: secs(m[1] ?? ''),
    end: secs(m[2] ?? ''),
    text: m[3] ?? '',
  }));
}

describe('thumbnails', () => {
  for (const [what, outputs, under] of [
    ['under the HLS output', { hls: { path: '/hls' }, fmp4: { path: '/cmaf' } }, 'hls'],
    ['under the fMP4 output when there is no HLS', { fmp4: { path: '/cmaf' } }, 'cmaf'],
  ] as const) {
    it(`writes a storyboard whose cues cover the duration and a poster, ${what}`, async () => {
      const { bucket, out } = await transcode('/tracks.mkv', outputs);
      assert.deepEqual(out.thumbnails, {
        path: `/${under}/thumbnails/thumbnails.vtt`,
        poster: `/${under}/thumbnails/poster.jpg`,
      });
      const list = cues(await text(bucket, `${under}/thumbnails/thumbnails.vtt`));
      assert.ok(list.length >= 2, `${list.length} cues`);
      assert.equal(list[0]?.start, 0);
      for (const [i, c] of list.entries()) if (i > 0) assert.equal(c.start, list[i - 1]?.end, 'contiguous');
      assert.ok(Math.abs((list.at(-1)?.end ?? 0) - out.input_video.duration) < 0.05, 'the last cue ends at the end');
      const sheets = new Set(list.map((c) => c.text.split('#')[0] ?? ''));
      for (const sheet of sheets) {
        const [[kind]] = (await streamsOf(bucket, `${under}/thumbnails/${sheet}`)) as [[string]];
        assert.equal(kind, 'video', `${sheet} decodes as an image`);
      }
      for (const c of list) assert.match(c.text, /^sprite-\d+\.jpg#xywh=\d+,\d+,\d+,\d+$/);
      assert.equal((await streamsOf(bucket, `${under}/thumbnails/poster.jpg`))[0]?.[0], 'video');
    });
  }

  it('an MP4-only job and an audio-only input have none', async () => {
    const { out } = await transcode('/single.mp4', { mp4: { path: '/mp4' } });
    assert.equal(out.thumbnails, undefined);
    const audio = await transcode('/audio.m4a', { hls: { path: '/hls' } });
    assert.equal(audio.out.thumbnails, undefined);
  });
});
