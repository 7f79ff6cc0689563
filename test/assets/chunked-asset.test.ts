// An asset takes the road every video takes (transcode/job.ts): one uploaded from a URL and
// longer than the chunk threshold is split into pieces like a transcode (its task shows
// `pieces` on GET /api/task/{id}), its outputs written under asset/<playbackId>/ pass the
// chunked acceptance's checks (test/transcode/chunked-acceptance.test.ts, helpers/seams.ts),
// and it becomes ready with the same fields a single-run asset has. A short input with small
// chunks and the fastest settings keeps it quick; the long acceptance is the transcode's.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { VideoSpec$inboundSchema } from 'livepeer/models/components/asset.js';
import { startHttp, type TestHttp } from '../helpers/http-input.ts';
import { decodeErrors, makeClip, moovBeforeMdat } from '../helpers/media.ts';
import { packetGaps, packetSpan, packetTimes, segmentProblems, segmentSpans, serveRanges } from '../helpers/seams.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

const SECONDS = 12;
const FPS = 30;
const FRAME = 1 / FPS;
const AAC_FRAME = 1024 / 48000;
const SEGMENT_SECS = 2;
// 12 s over a 6 s threshold in 4 s chunks: three chunks, the audio and the stitch.
const SETTINGS = { chunkThresholdSecs: 6, chunkSecs: 4, x264Preset: 'ultrafast', perTitle: false };
const PROFILES = [
  { name: '180p0', width: 320, height: 180, bitrate: 400_000 },
  { name: '144p0', width: 256, height: 144, bitrate: 200_000 },
];

interface WireAsset {
  id: string;
  playbackId: string;
  status: { phase: string; errorMessage?: string };
  videoSpec?: Record<string, unknown> & { tracks?: Record<string, unknown>[] };
  size?: number;
  hash?: { hash: string; algorithm: string }[];
  downloadUrl?: string;
  [field: string]: unknown;
}
interface Pieces {
  total: number;
  completed: number;
  items: { label: string; phase: string }[];
}

describe('an asset from a URL longer than the chunk threshold', () => {
  let server: TestServer;
  let web: TestHttp;
  let key: string;
  let long: string;
  let short: string;
  let asset: WireAsset;
  let single: WireAsset;
  let taskId: string;
  let pieces: Pieces | undefined;
  /** The asset's folder in the built-in store. */
  let dir: string;

  /** Creates an asset from `url` and waits until it is ready; its task id too. */
  async function ready(url: string, name: string): Promise<{ asset: WireAsset; taskId: string }> {
    const body = { name, url, staticMp4: true, profiles: PROFILES, targetSegmentSizeSecs: SEGMENT_SECS };
    const res = await server.call('POST', '/api/asset/upload/url', { key, body });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const id: string = res.body.asset.id;
    const done = await waitFor(
      async () => {
        const a: WireAsset = (await server.call('GET', `/api/asset/${id}`, { key })).body;
        if (a.status.phase === 'failed') throw new Error(`the asset failed: ${a.status.errorMessage ?? ''}`);
        return a.status.phase === 'ready' ? a : undefined;
      },
      300_000,
      `asset ${name} to be ready`,
    );
    return { asset: done, taskId: res.body.task.id };
  }

  before(async () => {
    [long, short] = await Promise.all([
      makeClip({ width: 320, height: 180, seconds: SECONDS }),
      makeClip({ width: 320, height: 180, seconds: 4 }),
    ]);
    web = await startHttp({ '/long.mp4': serveRanges(long).route, '/short.mp4': serveRanges(short).route });
    server = await startTestServer({ settings: SETTINGS });
    key = await server.key('alice');
    const made = await ready(web.url('/long.mp4'), 'long');
    asset = made.asset;
    taskId = made.taskId;
    pieces = (await server.call('GET', `/api/task/${taskId}`, { key })).body.pieces;
    single = (await ready(web.url('/short.mp4'), 'short')).asset;
    dir = path.join(server.dataDir, 'media', 'asset', asset.playbackId);
  });

  after(async () => {
    await server?.stop();
    await web?.close();
  });

  it('was split into chunks, the audio pieces and the stitch, all completed (GET /api/task/{id} shows the pieces)', () => {
    assert.ok(pieces, 'the asset task shows its pieces');
    const labels = pieces.items.map((p) => p.label);
    assert.equal(labels.filter((l) => /chunk/.test(l)).length, 3, labels.join('; '));
    // The audio in pieces of their own, each label beginning `audio`.
    assert.ok(labels.some((l) => l.startsWith('audio')) && labels.includes('stitch'), labels.join('; '));
    assert.equal(pieces.completed, pieces.total);
    assert.equal(existsSync(path.join(server.dataDir, 'media', 'pieces', taskId)), false, 'its pieces are removed');
  });

  it('has the fields of a single-run asset: videoSpec, size and hashes of the source, its download', async () => {
    const bytes = readFileSync(long);
    assert.equal(asset.size, bytes.length);
    assert.deepEqual(asset.hash, [
      { hash: createHash('md5').update(bytes).digest('hex'), algorithm: 'md5' },
      { hash: createHash('sha256').update(bytes).digest('hex'), algorithm: 'sha256' },
    ]);
    assert.deepEqual(VideoSpec$inboundSchema.parse(asset.videoSpec), asset.videoSpec);
    assert.ok(Math.abs(Number(asset.videoSpec?.duration) - SECONDS) < 0.1, `duration ${asset.videoSpec?.duration}`);
    // Its early playlists played before the end (playableAt, ms); a single run's play when ready.
    assert.equal(typeof asset.playableAt, 'number', 'playable before the end');
    const fields = (a: WireAsset) => Object.keys(a).filter((k) => k !== 'playableAt');
    assert.deepEqual(fields(asset).sort(), fields(single).sort(), 'the same fields as a single-run asset');
    assert.deepEqual(Object.keys(asset.videoSpec ?? {}).sort(), Object.keys(single.videoSpec ?? {}).sort());
    assert.deepEqual(
      asset.videoSpec?.tracks?.map((t) => Object.keys(t).sort()),
      single.videoSpec?.tracks?.map((t) => Object.keys(t).sort()),
    );
    const download = await fetch(asset.downloadUrl ?? '');
    assert.deepEqual(Buffer.from(await download.arrayBuffer()), bytes, 'the source is kept byte for byte');
  });

  it('plays: the playback info lists its HLS, MP4s, storyboard and poster, and they are served', async () => {
    const info = (await server.call('GET', `/api/playback/${asset.playbackId}`)).body;
    const hrns = info.meta.source.map((s: { hrn: string }) => s.hrn);
    assert.deepEqual(hrns, ['HLS (TS)', 'MP4', 'MP4', 'Thumbnails', 'Thumbnail (JPEG)']);
    for (const s of info.meta.source as { url: string; hrn: string }[]) {
      const res = await fetch(s.url);
      assert.equal(res.status, 200, `${s.hrn} ${s.url}`);
      await res.arrayBuffer();
    }
  });

  /** The master's media playlists: each video variant's, each audio rendition's. */
  function masterOf(): { video: string[]; audio: string[] } {
    const lines = readFileSync(path.join(dir, 'hls', 'index.m3u8'), 'utf8').split('\n');
    const video = lines.flatMap((l, i) => (l.startsWith('#EXT-X-STREAM-INF') ? [lines[i + 1]?.trim() ?? ''] : []));
    const audio = lines.flatMap((l) => /#EXT-X-MEDIA:TYPE=AUDIO[^\n]*URI="([^"]+)"/.exec(l)?.[1] ?? []);
    return { video, audio };
  }

  it('HLS: every segment within the target, timestamps continuous across every seam, audio ending with the video', async () => {
    const { video, audio } = masterOf();
    assert.equal(video.length, PROFILES.length);
    assert.ok(audio.length >= 1, 'audio is its own rendition group, as in a chunked transcode');
    const problems: string[] = [];
    const ends: number[] = [];
    for (const v of video) {
      const p = await segmentSpans(path.join(dir, 'hls', v), 'v');
      assert.ok(p.ended, `${v} has EXT-X-ENDLIST`);
      problems.push(...segmentProblems(p, FRAME).map((x) => `${v}: ${x}`));
      const total = p.segments.reduce((s, x) => s + x.extinf, 0);
      assert.ok(Math.abs(total - SECONDS) <= FRAME, `${v}: ${total} s of segments`);
      ends.push(p.segments.at(-1)?.end ?? 0);
    }
    for (const a of audio) {
      const p = await segmentSpans(path.join(dir, 'hls', a), 'a');
      problems.push(...segmentProblems(p, AAC_FRAME).map((x) => `${a}: ${x}`));
      const end = p.segments.at(-1)?.end ?? 0;
      for (const e of ends) assert.ok(Math.abs(end - e) <= FRAME, `${a} ends at ${end}, the video at ${e}`);
    }
    assert.deepEqual(problems, []);
  });

  it('MP4: every frame and audio packet follows the last without a gap, faststart, audio ends with the video', async () => {
    for (const { name } of PROFILES) {
      const file = path.join(dir, 'mp4', `${name}.mp4`);
      const v = await packetTimes(file, 'v');
      assert.equal(v.length, SECONDS * FPS, `${name}.mp4: frames`);
      assert.deepEqual(packetGaps(v, FRAME / 2), [], `${name}.mp4 video`);
      assert.deepEqual(packetGaps(await packetTimes(file, 'a'), AAC_FRAME / 2), [], `${name}.mp4 audio`);
      const [vs, as] = [await packetSpan(file, 'v'), await packetSpan(file, 'a')];
      assert.ok(Math.abs(vs.end - as.end) <= FRAME, `${name}.mp4: video ends at ${vs.end}, audio at ${as.end}`);
      assert.ok(moovBeforeMdat(readFileSync(file)), `${name}.mp4 is faststart`);
    }
  });

  it('every output decodes without an error; the storyboard and poster are there', async () => {
    const { video, audio } = masterOf();
    const files = [
      ...[...video, ...audio].map((p) => path.join(dir, 'hls', p)),
      ...PROFILES.map((p) => path.join(dir, 'mp4', `${p.name}.mp4`)),
    ];
    for (const f of files) assert.equal(await decodeErrors(f), '', path.relative(dir, f));
    assert.ok(existsSync(path.join(dir, 'hls', 'thumbnails', 'thumbnails.vtt')), 'the storyboard');
  });
});
