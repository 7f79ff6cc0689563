// The storyboard and poster of a split transcode, made by the chunks as they encode (each
// the tiles whose cues start in its window, and the poster where its time falls) and
// assembled by the stitch, against the single run of the same job: the same sheets at the
// same sizes, the same cues, and in every tile and the poster the same frame of the source
// (read back from the frame number drawn into each picture). The chunks write no MP4 parts
// for it: the stitch decodes no video.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/config/index.ts';
import { FolderStore } from '../../src/storage/builtin/index.ts';
import {
  buildFfmpegArgs,
  createChunkedHandlers,
  createTranscodeHandler,
  probe,
  type Rendition,
  type TranscodeJob,
} from '../../src/transcode/index.ts';
import { planStoryboard, type StoryboardPlan } from '../../src/transcode/storyboard.ts';
import type { TestHttp } from '../helpers/http-input.ts';
import { decodeFrameCells, FRAME_CODE_BAND, frameCodeFilter } from '../helpers/live.ts';
import { cachedMedia } from '../helpers/media-cache.ts';
import { fakeContext, runPieces, servedInput, splitPieces } from './chunked-helpers.ts';

const run = promisify(execFile);

const [WIDTH, HEIGHT, FPS, SECONDS] = [320, 240, 30, 13];
const scratch: string[] = [];
let root: string;
let web: TestHttp;

const config = loadConfig({
  env: {},
  overrides: {
    allowPrivateUrls: true,
    x264Preset: 'ultrafast',
    perTitle: false,
    chunkThresholdSecs: 5,
    chunkSecs: 4,
  },
});

/** 13 s: a tile every 1.3 s (10 cues), so cues fall on frames and between chunk seams (4 s chunks). */
function job(url: string): TranscodeJob {
  return {
    input: { url },
    outputs: { hls: { path: '/hls' } },
    profiles: [{ name: '240p', width: WIDTH, height: HEIGHT, bitrate: 300_000 }],
    targetSegmentSizeSecs: 2,
  };
}

/** testsrc2 with each frame's number drawn into its top band; x264's default GOP, so chunks start between keyframes. */
function numberedClip(): Promise<string> {
  return cachedMedia(`numbered-${WIDTH}x${HEIGHT}-${SECONDS}s-${FPS}fps.mp4`, async (tmp) => {
    await run('ffmpeg', [
      ...['-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=size=${WIDTH}x${HEIGHT}:rate=${FPS}`],
      ...['-vf', frameCodeFilter(WIDTH, HEIGHT), '-t', String(SECONDS)],
      ...['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', tmp],
    ]);
  });
}

const storyboard = (): StoryboardPlan => {
  const p = planStoryboard(SECONDS, WIDTH, HEIGHT);
  assert.ok(p);
  return p;
};

/** A JPEG decoded to RGBA. */
async function rgba(file: string): Promise<Buffer> {
  const args = ['-v', 'error', '-i', file, '-f', 'rawvideo', '-pix_fmt', 'rgba', '-'];
  return (await run('ffmpeg', args, { encoding: 'buffer', maxBuffer: 64 << 20 })).stdout;
}

/** The frame number in the top band of the `w` x `h` picture at (x, y) of an RGBA image `stride` pixels wide. */
function frameIn(
  pixels: Buffer,
  o: { stride: number; x: number; y: number; w: number; h: number },
): number | undefined {
  const band = Math.floor(o.h * FRAME_CODE_BAND);
  const out = Buffer.alloc(o.w * band * 4);
  for (let row = 0; row < band; row++) {
    const from = ((o.y + row) * o.stride + o.x) * 4;
    pixels.copy(out, row * o.w * 4, from, from + o.w * 4);
  }
  return decodeFrameCells(out, o.w, band);
}

/** The frame shown in every tile of the storyboard under `dir`, in cue order. */
async function tileFrames(dir: string, p: StoryboardPlan): Promise<(number | undefined)[]> {
  const frames: (number | undefined)[] = [];
  for (let s = 0; s < p.sheets; s++) {
    const pixels = await rgba(path.join(dir, `sprite-${s}.jpg`));
    for (let slot = 0; slot < p.columns * p.rows && frames.length < p.count; slot++) {
      const x = (slot % p.columns) * p.tileWidth;
      const y = Math.floor(slot / p.columns) * p.tileHeight;
      frames.push(frameIn(pixels, { stride: p.columns * p.tileWidth, x, y, w: p.tileWidth, h: p.tileHeight }));
    }
  }
  return frames;
}

let close: (() => Promise<void>) | undefined;

before(async () => {
  ({ root, web, close } = await servedInput(scratch, {
    prefix: 'mp-chunked-thumbs-',
    route: '/numbered.mp4',
    clip: await numberedClip(),
  }));
});
after(async () => {
  await close?.();
});

describe('the storyboard of a chunked transcode', () => {
  const deps = () => ({ config, builtinStore: new FolderStore(path.join(root, 'media')) });
  const thumbs = (id: string, rel = '') => path.join(root, 'media', 'task', id, 'hls', 'thumbnails', rel);
  /** What each chunk kept in the built-in store, read as it completed. */
  const kept: string[][] = [];
  let chunks = 0;

  before(async () => {
    const url = web.url('/numbered.mp4');
    await createTranscodeHandler(deps())(job(url), await fakeContext(scratch, { taskId: 'single' }));
    const ctx = await fakeContext(scratch, { taskId: 'parent' });
    const pieces = await splitPieces(createTranscodeHandler(deps(), { split: true }), job(url), ctx);
    chunks = pieces.filter((p) => p.type === 'transcode-chunk').length;
    const piecesDir = path.join(root, 'media', 'pieces', 'parent');
    await runPieces(createChunkedHandlers(deps()), pieces, {
      parentId: 'parent',
      scratch,
      after: async (i) => {
        if (pieces[i]?.type !== 'transcode-chunk') return;
        const files = await readdir(piecesDir, { recursive: true }).catch(() => []);
        kept.push(files.map(String).filter((f) => f.startsWith(`chunk-${kept.length}/`)));
      },
    });
  });

  it('was split into chunks that kept their tiles and no MP4 parts', () => {
    assert.equal(chunks, 3);
    for (const files of kept) {
      assert.ok(files.includes(path.join(`chunk-${kept.indexOf(files)}`, 'thumbnails', 'tiles.yuv')), String(files));
      assert.equal(files.filter((f) => f.endsWith('.mp4')).length, 0, String(files));
    }
  });

  it('writes the single run files: the same VTT, the same sheets and poster, picture for picture', async () => {
    assert.deepEqual((await readdir(thumbs('parent'))).sort(), (await readdir(thumbs('single'))).sort());
    assert.equal(
      await readFile(thumbs('parent', 'thumbnails.vtt'), 'utf8'),
      await readFile(thumbs('single', 'thumbnails.vtt'), 'utf8'),
    );
    for (const file of await readdir(thumbs('single'))) {
      if (!file.endsWith('.jpg')) continue;
      const [a, b] = await Promise.all([rgba(thumbs('parent', file)), rgba(thumbs('single', file))]);
      assert.equal(a.length, b.length, `${file}: the same size`);
      // The tiles are encoded once, in the stitch, by the single run's chain: the same pictures.
      assert.ok(a.equals(b), `${file}: the single run's picture`);
    }
  });

  it('shows in every tile the frame at its cue start, as the single run does', async () => {
    const p = storyboard();
    assert.deepEqual([p.intervalMs, p.count], [1300, 10]);
    const [chunked, single] = await Promise.all([tileFrames(thumbs('parent'), p), tileFrames(thumbs('single'), p)]);
    // The last frame at or before the cue's start (storyboard.ts: fps round=up).
    const atCue = Array.from({ length: p.count }, (_, k) => Math.floor((k * p.intervalMs * FPS) / 1000 + 1e-9));
    assert.deepEqual(single, atCue);
    chunked.forEach((f, k) => {
      assert.ok(
        f !== undefined && Math.abs(f - (atCue[k] ?? 0)) <= 1,
        `tile ${k}: frame ${f}, its cue's is ${atCue[k]}`,
      );
    });
    assert.deepEqual(chunked, single);
  });

  it('takes the poster from the frame the single run takes', async () => {
    const frameOf = async (id: string) => {
      const pixels = await rgba(thumbs(id, 'poster.jpg'));
      return frameIn(pixels, { stride: WIDTH, x: 0, y: 0, w: WIDTH, h: HEIGHT });
    };
    const [chunked, single] = await Promise.all([frameOf('parent'), frameOf('single')]);
    // The middle (6.5 s) on the poster's 10 fps grid: within a frame of it.
    assert.ok(single !== undefined && Math.abs(single - 6.5 * FPS) <= 1, `the single run's poster: frame ${single}`);
    assert.equal(chunked, single);
  });
});

describe('a chunk that holds no cue and not the poster', () => {
  it('encodes its renditions with no storyboard branch (a film: a tile every 72 s, 4 s chunks)', async () => {
    const dir = await mkdtemp(path.join(root, 'no-tiles-'));
    const clip = await numberedClip();
    const rendition: Rendition = {
      ...{ name: '240p', width: WIDTH, height: HEIGHT, bitrate: 300_000, fps: { num: FPS, den: 1 }, codec: 'h264' },
      ...{ profile: 'high', noBFrames: false, gopFrames: undefined, crf: undefined },
    };
    const film = planStoryboard(7200, WIDTH, HEIGHT);
    assert.equal(film?.intervalMs, 72_000);
    const args = buildFfmpegArgs({
      ...{
        input: clip,
        probe: await probe(clip, { ffprobePath: 'ffprobe', signal: AbortSignal.timeout(60_000) }),
        renditions: [rendition],
      },
      ...{ kinds: { hls: true }, segmentSecs: 2, preset: 'ultrafast', threads: 1, thumbnails: film },
      chunk: { seekSecs: 3.5, skipSecs: 0.5, keepSecs: 4, startSecs: 4, firstSegment: 2 },
    });
    assert.equal(args.filter((a) => a.includes('thumbs_') || a.includes('thumbnails/')).length, 0, args.join(' '));
    // It runs: no output of the graph's split is left unconnected.
    await mkdir(path.join(dir, 'hls', '240p'), { recursive: true });
    await run('ffmpeg', args, { cwd: dir });
    assert.deepEqual(await readdir(dir), ['hls']);
    assert.equal((await readdir(path.join(dir, 'hls', '240p'))).filter((f) => f.endsWith('.ts')).length, 2);
  });
});
