// Issue #30 at small scale: a 40 s 360p input with audio split (threshold 10 s) into 8 s
// chunks of 2 s segments, the pieces run by hand with fake contexts, against the single run
// of the same job: the seams are invisible in the timestamps, the numbering, the DASH
// timeline, the MP4s and the frame counts.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/index.ts';
import { FolderStore } from '../../src/storage/builtin/index.ts';
import type { PieceSpec } from '../../src/tasks/index.ts';
import { createChunkedHandlers, createTranscodeHandler, type TranscodeJob } from '../../src/transcode/index.ts';
import { parseMediaPlaylist } from '../../src/transcode/playlist.ts';
import { serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';
import { decodeErrors, ffprobe, makeClip } from '../helpers/media.ts';
import {
  fakeContext,
  frameCount,
  joined,
  runPieces,
  serveRanges,
  splitPieces,
  timelineOf,
  videoPackets,
} from './chunked-helpers.ts';

const scratch: string[] = [];
let root: string;
let web: TestHttp;
let clip: string;
let ranged: ReturnType<typeof serveRanges>;

const config = loadConfig({
  env: {},
  overrides: {
    allowPrivateUrls: true,
    // superfast keeps B-frames (ultrafast has none): the seams must hold with a decode delay.
    x264Preset: 'superfast',
    chunkThresholdSecs: 10,
    chunkSecs: 8,
    perTitle: false,
  },
});

const PROFILES = [
  { name: '240p', width: 426, height: 240, bitrate: 400_000 },
  { name: '360p', width: 640, height: 360, bitrate: 800_000 },
];

function job(url: string, outputs: TranscodeJob['outputs']): TranscodeJob {
  return { input: { url }, outputs, profiles: PROFILES, targetSegmentSizeSecs: 2 };
}

before(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'mp-chunked-'));
  scratch.push(root);
  // A 2 s input (cached for the run, as other files use it) for the short run: under either
  // threshold, it needs no 40 s encode to show that nothing is split.
  const [long, short] = await Promise.all([
    makeClip({ width: 640, height: 360, seconds: 40 }),
    makeClip({ width: 320, height: 240, seconds: 2 }),
  ]);
  clip = long;
  ranged = serveRanges(clip);
  web = await startHttp({
    '/ranged.mp4': ranged.route,
    '/plain.mp4': serveFile(clip),
    '/short.mp4': serveRanges(short).route,
  });
});
after(async () => {
  await web?.close();
  await Promise.all(scratch.map((d) => rm(d, { recursive: true, force: true })));
});

describe('a chunked transcode (pieces run by hand)', () => {
  const store = () => new FolderStore(path.join(root, 'media'));
  const deps = () => ({ config, builtinStore: store() });
  const task = (id: string, rel: string) => path.join(root, 'media', 'task', id, rel);
  const outputs = { hls: { path: '/hls' }, fmp4: { path: '/fmp4' }, mp4: { path: '/mp4' } };
  let pieces: PieceSpec[];
  let output: Record<string, unknown>;
  let early: { segments: number; ended: boolean } | undefined;

  before(async () => {
    const handler = createTranscodeHandler(deps(), { split: true });
    const single = createTranscodeHandler(deps());
    // The single run of the same job, for the comparisons, beside the chunked run (other task
    // ids, other folders): the pieces' short ffmpeg runs leave the cores idle between them.
    const singleRun = (async () =>
      single(job(web.url('/ranged.mp4'), outputs), await fakeContext(scratch, { taskId: 'single' })))();
    const chunkedRun = (async () => {
      const ctx = await fakeContext(scratch, { taskId: 'parent' });
      pieces = await splitPieces(handler, job(web.url('/ranged.mp4'), outputs), ctx);
      output = (await runPieces(createChunkedHandlers(deps()), pieces, {
        parentId: 'parent',
        scratch,
        after: async (i) => {
          // After the audio and the first chunk: the early playlists.
          if (i !== 1) return;
          const text = await readFile(task('parent', 'hls/360p/index.m3u8'), 'utf8');
          const pl = parseMediaPlaylist(text);
          early = { segments: pl.segments.length, ended: pl.ended };
        },
      })) as Record<string, unknown>;
    })();
    await Promise.all([singleRun, chunkedRun]);
  });

  it('splits into 5 audio pieces between 5 chunks of 4 segments, and the stitch', () => {
    assert.deepEqual(
      pieces.map((p) => p.type),
      [...Array(5).fill(['transcode-audio', 'transcode-chunk']).flat(), 'transcode-stitch'],
    );
    assert.equal(pieces[1]?.label, 'video 0.0-8.0 s (chunk 1 of 5)');
    assert.match(pieces[2]?.label ?? '', /^audio 7\.9-15\.\d s \(piece 2 of 5\)$/);
    assert.equal(pieces.at(-1)?.last, true);
    assert.ok(Math.abs(pieces.reduce((s, p) => s + p.weight, 0) - 1) < 1e-9);
    // Read by ranges: the pieces never asked for the whole file in one response.
    assert.ok(ranged.sent.ranged > 0);
  });

  it('publishes the first chunk as an EVENT playlist before the rest is encoded', () => {
    assert.deepEqual(early, { segments: 4, ended: false });
  });

  it('numbers the segments on across the seams, in both trees', async () => {
    for (const tree of ['hls', 'fmp4']) {
      const ext = tree === 'hls' ? 'ts' : 'm4s';
      for (const r of ['240p', '360p']) {
        const pl = parseMediaPlaylist(await readFile(task('parent', `${tree}/${r}/index.m3u8`), 'utf8'));
        assert.equal(pl.ended, true);
        assert.deepEqual(
          pl.segments.map((s) => s.uri),
          Array.from({ length: 20 }, (_, i) => `${i}.${ext}`),
        );
        for (const s of pl.segments) assert.ok(Math.abs(s.duration - 2) < 1e-6, `${tree}/${r} ${s.uri}: ${s.duration}`);
      }
    }
  });

  it('keeps the single run video timestamps exactly, across every seam (TS and fMP4)', async () => {
    // The probes and decodes of both trees at once; the checks in order after.
    const trees = [
      ['hls', 'ts'],
      ['fmp4', 'mp4'],
    ] as const;
    const probed = await Promise.all(
      trees.map(async ([tree, ext]) => {
        const c = joined(task('parent', `${tree}/360p`), path.join(root, `c-${tree}.${ext}`));
        const [chunked, single, errors] = await Promise.all([
          c.then(videoPackets),
          joined(task('single', `${tree}/360p`), path.join(root, `s-${tree}.${ext}`)).then(videoPackets),
          c.then(decodeErrors),
        ]);
        return { tree, chunked, single, errors };
      }),
    );
    for (const { tree, chunked, single, errors } of probed) {
      assert.equal(chunked.length, 1200);
      assert.deepEqual(
        chunked.map((p) => [p.pts, p.dts]),
        single.map((p) => [p.pts, p.dts]),
        `${tree}: packet timestamps differ from the single run`,
      );
      // A keyframe starts each 2 s segment.
      assert.equal(chunked.filter((p) => p.key).length >= 20, true);
      assert.equal(errors, '');
    }
  });

  it('writes the DASH timeline of the single run', async () => {
    const chunked = await readFile(task('parent', 'fmp4/index.mpd'), 'utf8');
    const single = await readFile(task('single', 'fmp4/index.mpd'), 'utf8');
    for (const id of ['240p', '360p']) assert.deepEqual(timelineOf(chunked, id), timelineOf(single, id));
    assert.equal(timelineOf(chunked, '360p').length, 1, 'one <S> entry: 20 equal segments with no gap');
    const duration = (mpd: string) => /mediaPresentationDuration="([^"]+)"/.exec(mpd)?.[1];
    assert.equal(duration(chunked), duration(single));
  });

  it('joins MP4s with the frames and duration of the single run, with the audio', async () => {
    // Every count and decode at once; the checks in order after.
    const counted = await Promise.all(
      ['240p', '360p'].map(async (r) => {
        const [chunked, single, errors] = await Promise.all([
          frameCount(task('parent', `mp4/${r}.mp4`)),
          frameCount(task('single', `mp4/${r}.mp4`)),
          decodeErrors(task('parent', `mp4/${r}.mp4`)),
        ]);
        return { chunked, single, errors };
      }),
    );
    for (const { chunked, single, errors } of counted) {
      assert.equal(chunked.frames, single.frames);
      assert.equal(chunked.frames, 1200);
      assert.ok(Math.abs(chunked.duration - single.duration) < 1 / 30, `${chunked.duration} vs ${single.duration}`);
      assert.equal(errors, '');
    }
  });

  it('returns the output of a single run, with the audio as its own group, and removes its pieces', async () => {
    const hls = output.hls as { path: string; renditions: unknown[]; audio?: unknown[] };
    assert.equal(hls.path, '/hls/index.m3u8');
    assert.equal(hls.renditions.length, 2);
    assert.equal(hls.audio?.length, 1);
    assert.equal((output.fmp4 as { dash: string }).dash, '/fmp4/index.mpd');
    assert.equal((output.thumbnails as { path: string }).path, '/hls/thumbnails/thumbnails.vtt');
    assert.deepEqual(output.pieces, { chunks: 5, chunkSecs: 8, audio: true, audioPieces: 5 });
    const master = await readFile(task('parent', 'hls/index.m3u8'), 'utf8');
    assert.match(master, /#EXT-X-MEDIA:TYPE=AUDIO,.*URI="audio\/0\/index.m3u8"/);
    const audio = parseMediaPlaylist(await readFile(task('parent', 'hls/audio/0/index.m3u8'), 'utf8'));
    const audioSecs = audio.segments.reduce((t, s) => t + s.duration, 0);
    assert.ok(audio.ended && Math.abs(audioSecs - 40) < 0.1, `audio lasts ${audioSecs} s`);
    const vtt = await readFile(task('parent', 'hls/thumbnails/thumbnails.vtt'), 'utf8');
    assert.equal(vtt, await readFile(task('single', 'hls/thumbnails/thumbnails.vtt'), 'utf8'));
    // The poster from the chunk that holds its time, at the single run's size (not the lowest rung's).
    const size = async (id: string) => {
      const v = (await ffprobe(task(id, 'hls/thumbnails/poster.jpg'))).streams[0];
      return [v?.width, v?.height];
    };
    assert.deepEqual(await size('parent'), await size('single'));
    assert.equal(existsSync(path.join(root, 'media', 'pieces', 'parent')), false);
  });
});

describe('a chunked transcode of a source without ranges', () => {
  it('copies the source once into the built-in store, and every chunk reads from there', async () => {
    const store = new FolderStore(path.join(root, 'media2'));
    const deps = { config, builtinStore: store };
    const handler = createTranscodeHandler(deps, { split: true });
    const ctx = await fakeContext(scratch, { taskId: 'plain' });
    const params = { ...job(web.url('/plain.mp4'), { hls: { path: '/out' } }), profiles: [PROFILES[0]] };
    const pieces = await splitPieces(handler, params, ctx);
    const params1 = pieces[1]?.params as { stored?: unknown; input?: unknown } | undefined;
    assert.deepEqual([params1?.stored, params1?.input], ['pieces/plain/source', undefined]);
    assert.equal(existsSync(path.join(root, 'media2', 'pieces', 'plain', 'source')), true);
    await runPieces(createChunkedHandlers(deps), pieces, { parentId: 'plain', scratch });
    const dir = path.join(root, 'media2', 'task', 'plain', 'out', '240p');
    const packets = await videoPackets(await joined(dir, path.join(root, 'plain.ts')));
    assert.equal(packets.length, 1200);
    const pts = packets.map((p) => p.pts).sort((a, b) => a - b);
    for (let i = 1; i < pts.length; i++) assert.equal((pts[i] ?? 0) - (pts[i - 1] ?? 0), 3000, `a gap at packet ${i}`);
    assert.equal(existsSync(path.join(root, 'media2', 'pieces', 'plain')), false);
  });

  it('runs a short input as a single run, without splitting', async () => {
    const deps = {
      config: { ...config, chunkThresholdSecs: 60 },
      builtinStore: new FolderStore(path.join(root, 'media3')),
    };
    const handler = createTranscodeHandler(deps, { split: true });
    const ctx = await fakeContext(scratch, {
      taskId: 'short',
      split: async () => {
        throw new Error('split called for a short input');
      },
    });
    const out = (await handler(
      { ...job(web.url('/short.mp4'), { hls: { path: '/o' } }), profiles: [PROFILES[0]] },
      ctx,
    )) as {
      hls: { path: string };
    };
    assert.equal(out.hls.path, '/o/index.m3u8');
  });
});
