// The storyboard and poster (issue #19): the plan for short and long inputs, the WebVTT
// cues (contiguous, covering the duration, pointing inside their sheet), and real ffmpeg
// runs of the branches beside a main branch, as the pipeline's split feeds them: the
// sheets hold exactly as many pictures as there are cues, each the frame at its cue's
// start, whether the video ends early or runs late, and the main branch loses no frame.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import {
  planStoryboard,
  type StoryboardPlan,
  storyboardFilter,
  storyboardPart,
  storyboardPartBranches,
  storyboardVtt,
  thumbnailBranches,
} from '../../src/transcode/storyboard.ts';

const run = promisify(execFile);

function plan(durationSecs: number, width = 1920, height = 1080): StoryboardPlan {
  const p = planStoryboard(durationSecs, width, height);
  assert.ok(p, `a plan for ${durationSecs} s`);
  return p;
}

interface Cue {
  start: number;
  end: number;
  sheet: string;
  x: number;
  y: number;
  w: number;
  h: number;
}

/** The cues of a storyboard VTT, strictly as written (times in milliseconds). */
function parseVtt(text: string): Cue[] {
  const [header, ...blocks] = text.trim().split('\n\n');
  assert.equal(header, 'WEBVTT');
  const ms = (t: string): number => {
    const m = /^(\d\d):(\d\d):(\d\d)\.(\d{3})$/.exec(t);
    assert.ok(m, t);
    return ((Number(m[1]) * 60 + Number(m[2])) * 60 + Number(m[3])) * 1000 + Number(m[4]);
  };
  return blocks.map((block) => {
    const m = /^(\S+) --> (\S+)\n([^#\s]+)#xywh=(\d+),(\d+),(\d+),(\d+)$/.exec(block);
    assert.ok(m, block);
    return {
      start: ms(m[1] as string),
      end: ms(m[2] as string),
      sheet: m[3] as string,
      x: Number(m[4]),
      y: Number(m[5]),
      w: Number(m[6]),
      h: Number(m[7]),
    };
  });
}

/** Every cue follows the last, the first starts at 0, the last ends at the duration; each tile lies inside its sheet. */
function assertCoversDuration(p: StoryboardPlan, cues: Cue[]): void {
  assert.equal(cues.length, p.count);
  assert.equal(cues[0]?.start, 0);
  assert.equal(cues.at(-1)?.end, p.durationMs);
  cues.forEach((c, k) => {
    assert.ok(c.end > c.start, `cue ${k} is not empty`);
    if (k > 0) assert.equal(c.start, cues[k - 1]?.end, `cue ${k} follows cue ${k - 1}`);
    assert.ok(c.x + c.w <= p.columns * p.tileWidth && c.y + c.h <= p.rows * p.tileHeight, `cue ${k} inside its sheet`);
    assert.deepEqual([c.w, c.h], [p.tileWidth, p.tileHeight]);
  });
  assert.deepEqual(
    [...new Set(cues.map((c) => c.sheet))],
    Array.from({ length: p.sheets }, (_, i) => `sprite-${i}.jpg`),
  );
}

describe('planStoryboard', () => {
  it('takes a frame every 2 s, fewer for long inputs (at most 100), more for short clips', () => {
    const rows = [0.5, 3, 7, 61, 200, 1800, 7201].map((d) => {
      const p = plan(d);
      return [d, p.intervalMs, p.count];
    });
    assert.deepEqual(rows, [
      [0.5, 250, 2],
      [3, 300, 10],
      [7, 700, 10],
      [61, 2000, 31],
      [200, 2000, 100],
      [1800, 18000, 100],
      [7201, 72050, 100],
    ]);
  });

  it('holds its rules for any duration: 1 to 100 frames, a 50 ms grid, the last frame inside the duration', () => {
    for (let d = 0.001; d < 40_000; d = d * 1.37 + 0.013) {
      const p = plan(d);
      assert.ok(p.count >= 1 && p.count <= 100, `${d} s: ${p.count} frames`);
      assert.equal(p.intervalMs % 50, 0);
      assert.ok((p.count - 1) * p.intervalMs < p.durationMs && p.durationMs <= p.count * p.intervalMs, `${d} s`);
      assert.ok(p.columns * p.rows * p.sheets >= p.count && p.columns * p.rows * (p.sheets - 1) < p.count);
    }
  });

  it('sizes tiles to fit 160 px and posters to fit 1280 px, even, with the picture aspect, never upscaling the poster', () => {
    const sizes = (w: number, h: number) => {
      const p = plan(60, w, h);
      return [p.tileWidth, p.tileHeight, p.poster.width, p.poster.height];
    };
    assert.deepEqual(sizes(1920, 1080), [160, 90, 1280, 720]);
    assert.deepEqual(sizes(1080, 1920), [90, 160, 720, 1280]);
    assert.deepEqual(sizes(640, 480), [160, 120, 640, 480]);
    assert.deepEqual(sizes(854, 480), [160, 90, 854, 480]);
    assert.deepEqual(plan(60).poster.atSecs, 30);
  });

  it('has no plan without a known duration', () => {
    assert.equal(planStoryboard(0, 1920, 1080), undefined);
    assert.equal(planStoryboard(Number.NaN, 1920, 1080), undefined);
  });
});

describe('storyboardVtt', () => {
  for (const d of [0.5, 3, 7, 61, 1800, 7201]) {
    it(`${d} s: one cue per frame, contiguous from 0 to the duration, each inside its sheet`, () => {
      const p = plan(d);
      assertCoversDuration(p, parseVtt(storyboardVtt(p)));
    });
  }

  it('moves to the next sheet when one is full, from its top left corner', () => {
    const p = { ...plan(61), columns: 4, rows: 2, sheets: 4 };
    const cues = parseVtt(storyboardVtt(p, (i) => `sheets/${i}.jpg`));
    assert.deepEqual(
      cues.slice(6, 10).map((c) => `${c.sheet}#${c.x},${c.y}`),
      ['sheets/0.jpg#320,90', 'sheets/0.jpg#480,90', 'sheets/1.jpg#0,0', 'sheets/1.jpg#160,0'],
    );
    assert.equal(cues.at(-1)?.sheet, 'sheets/3.jpg');
  });

  it('writes hours into long storyboards', () => {
    const cues = storyboardVtt(plan(7201)).split('\n');
    assert.equal(cues.at(-3), '01:58:52.950 --> 02:00:01.000');
  });
});

describe('the ffmpeg branches', () => {
  it('are one split, a storyboard chain and a poster chain, and an image2 output each', () => {
    const p = plan(7, 640, 360);
    assert.equal(
      storyboardFilter(p),
      'fps=10/7:start_time=0:round=up,tpad=stop=-1:stop_mode=clone,trim=end_frame=10,scale=160:90:flags=bicubic,setsar=1,format=yuvj420p,tile=10x1',
    );
    const { filters, outputArgs } = thumbnailBranches(p, { inputLabel: 'thumbs', dir: 'hls/thumbnails' });
    assert.equal(filters[0], '[thumbs]split=2[thumbs_sheets_in][thumbs_poster_in]');
    assert.equal(
      filters[2],
      '[thumbs_poster_in]fps=10,tpad=stop=-1:stop_mode=clone,trim=start=3.500,trim=end_frame=1,scale=640:360:flags=bicubic,setsar=1,format=yuvj420p[thumbs_poster]',
    );
    assert.ok(outputArgs.includes('hls/thumbnails/sprite-%d.jpg') && outputArgs.includes('hls/thumbnails/poster.jpg'));
  });
});

describe("a chunk's part of the storyboard", () => {
  it('gives every cue and the poster to exactly one of the chunks that cover the duration', () => {
    for (const [d, chunk] of [
      [13, 4],
      [61, 8],
      [200, 6.006],
      [1800, 30],
      [7201, 29.97],
    ] as const) {
      const p = plan(d);
      const starts = Array.from({ length: Math.ceil(d / chunk) }, (_, i) => i * chunk);
      const parts = starts.map((s, i) => {
        const next = starts[i + 1];
        return storyboardPart(p, next === undefined ? { startSecs: s } : { startSecs: s, endSecs: next });
      });
      const tiles = parts.flatMap((part) => Array.from({ length: part.tiles }, (_, k) => part.firstTile + k));
      assert.deepEqual(
        tiles,
        Array.from({ length: p.count }, (_, k) => k),
        `${d} s in ${chunk} s chunks`,
      );
      assert.equal(parts.filter((part) => part.poster).length, 1, `${d} s: one poster`);
      // Each cue's start lies in its chunk.
      for (const [i, part] of parts.entries())
        for (let k = part.firstTile; k < part.firstTile + part.tiles; k++)
          assert.ok(k * p.intervalMs >= (starts[i] ?? 0) * 1000 - 1e-6, `${d} s: cue ${k} in chunk ${i}`);
    }
  });

  it("is a chain on the whole run's timeline: raw tiles from the first cue in the chunk, and the poster where it falls", () => {
    const p = plan(13, 320, 240);
    const part = storyboardPart(p, { startSecs: 4, endSecs: 8 });
    assert.deepEqual(part, { firstTile: 4, tiles: 3, poster: true });
    const { filters, outputArgs } = storyboardPartBranches(p, part, {
      inputLabel: 's1',
      dir: 'thumbnails',
      offsetSecs: 3.5,
    });
    assert.equal(filters[0], '[s1]setpts=PTS+3.500000/TB,split=2[thumbs_sheets_in][thumbs_poster_in]');
    assert.equal(
      filters[1],
      '[thumbs_sheets_in]fps=10/13:start_time=5.2:round=up,tpad=stop=-1:stop_mode=clone,trim=end_frame=3,scale=160:120:flags=bicubic,setsar=1,format=yuvj420p[thumbs_sheets]',
    );
    assert.ok(outputArgs.includes('thumbnails/tiles.yuv') && outputArgs.includes('thumbnails/poster.jpg'));
    const last = storyboardPart(p, { startSecs: 8 });
    assert.deepEqual(last, { firstTile: 7, tiles: 3, poster: false });
    assert.equal(storyboardPartBranches(p, last, { inputLabel: 's1', dir: 'd', offsetSecs: 7.5 }).filters.length, 2);
  });
});

// ---- real runs ---------------------------------------------------------------------------

let scratch: string;
before(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'mp-storyboard-'));
});
after(() => rm(scratch, { recursive: true, force: true }));

interface Run {
  dir: string;
  /** Frames the main branch passed on. */
  mainFrames: number;
}

/**
 * ffmpeg on a lavfi source (its own `duration=`: an input -t would end the graph before
 * tpad pads), split as the pipeline splits: a main branch to a null output, and the
 * thumbnail branches. The main branch's frames are counted from its framecrc lines.
 */
async function runThumbnails(source: string, p: StoryboardPlan): Promise<Run> {
  const dir = await mkdtemp(path.join(scratch, 'run-'));
  await mkdir(path.join(dir, 'thumbnails'));
  const branches = thumbnailBranches(p, { inputLabel: 'sth', dir: path.join(dir, 'thumbnails') });
  const graph = ['[0:v]split=2[main][sth]', ...branches.filters].join(';');
  const crc = path.join(dir, 'main.crc');
  await run('ffmpeg', [
    ...['-hide_banner', '-nostdin', '-y', '-v', 'error', '-f', 'lavfi', '-i', source],
    ...['-filter_complex', graph, '-map', '[main]', '-f', 'framecrc', crc],
    ...branches.outputArgs,
  ]);
  const mainFrames = (await readFile(crc, 'utf8')).split('\n').filter((l) => /^\d/.test(l)).length;
  return { dir: path.join(dir, 'thumbnails'), mainFrames };
}

async function probeSize(file: string): Promise<[number, number]> {
  const { stdout } = await run('ffprobe', [
    ...['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=width,height', '-of', 'csv=p=0', file],
  ]);
  const [w, h] = stdout.trim().split(',').map(Number);
  return [w ?? 0, h ?? 0];
}

/** The mean luma (0-255, full range) of every tile slot of every sheet, in cue order; decodes each sheet whole. */
async function tileLumas(dir: string, p: StoryboardPlan): Promise<number[]> {
  const lumas: number[] = [];
  const width = p.columns * p.tileWidth;
  for (let s = 0; s < p.sheets; s++) {
    const { stdout } = await run(
      'ffmpeg',
      ['-v', 'error', '-i', path.join(dir, `sprite-${s}.jpg`), '-f', 'rawvideo', '-pix_fmt', 'gray', '-'],
      { encoding: 'buffer', maxBuffer: 64 << 20 },
    );
    assert.equal(stdout.length, width * p.rows * p.tileHeight, `sprite-${s}.jpg decodes whole`);
    for (let slot = 0; slot < p.columns * p.rows; slot++) {
      const x0 = (slot % p.columns) * p.tileWidth;
      const y0 = Math.floor(slot / p.columns) * p.tileHeight;
      let sum = 0;
      // The tile's inner part: JPEG blocks bleed a few pixels across tile edges.
      for (let y = y0 + 4; y < y0 + p.tileHeight - 4; y++)
        for (let x = x0 + 4; x < x0 + p.tileWidth - 4; x++) sum += stdout[y * width + x] ?? 0;
      lumas.push(sum / ((p.tileWidth - 8) * (p.tileHeight - 8)));
    }
  }
  return lumas;
}

/** The sheets and the poster exist, decode at their planned sizes, and nothing else was written. */
async function assertImages(r: Run, p: StoryboardPlan): Promise<void> {
  const sheets = Array.from({ length: p.sheets }, (_, i) => `sprite-${i}.jpg`);
  assert.deepEqual((await readdir(r.dir)).sort(), [...sheets, 'poster.jpg'].sort());
  for (const sheet of sheets)
    assert.deepEqual(await probeSize(path.join(r.dir, sheet)), [p.columns * p.tileWidth, p.rows * p.tileHeight]);
  assert.deepEqual(await probeSize(path.join(r.dir, 'poster.jpg')), [p.poster.width, p.poster.height]);
}

/** As many pictures as cues: the slots up to count are pictures (testsrc2 is bright), the rest black. */
function assertTileCount(lumas: number[], p: StoryboardPlan): void {
  lumas.forEach((l, slot) => {
    if (slot < p.count) assert.ok(l > 40, `slot ${slot} holds a picture (luma ${l.toFixed(1)})`);
    else assert.ok(l < 8, `slot ${slot} is empty (luma ${l.toFixed(1)})`);
  });
}

describe('storyboard and poster from real ffmpeg runs', () => {
  for (const [seconds, rate, size] of [
    [0.5, 30, '320x180'],
    [3, 30, '320x180'],
    [7, 30, '320x180'],
    [61, 30, '320x180'],
    [1800, 2, '64x36'],
  ] as const) {
    it(`${seconds} s: as many tiles as cues, sheets and poster decode, the main branch keeps every frame`, async () => {
      const [w, h] = size.split('x').map(Number) as [number, number];
      const p = plan(seconds, w, h);
      const r = await runThumbnails(`testsrc2=size=${size}:rate=${rate}:duration=${seconds}`, p);
      assert.equal(r.mainFrames, Math.round(seconds * rate));
      await assertImages(r, p);
      assertTileCount(await tileLumas(r.dir, p), p);
      assertCoversDuration(p, parseVtt(storyboardVtt(p)));
    });
  }

  it('shows in each tile the frame at its cue start, and the middle frame as the poster', async () => {
    // Brightness grows with time: Y = 10 + 10 t over 20 s (limited range, as decoders give it).
    const p = plan(20, 64, 36);
    assert.deepEqual([p.intervalMs, p.count], [2000, 10]);
    const r = await runThumbnails('color=c=black:size=64x36:rate=10:duration=20,geq=lum=10+10*T:cb=128:cr=128', p);
    const fullRange = (y: number): number => ((y - 16) * 255) / 219;
    const lumas = await tileLumas(r.dir, p);
    lumas.forEach((l, k) => {
      const expected = Math.max(0, fullRange(10 + 10 * (k * 2)));
      assert.ok(Math.abs(l - expected) < 4, `tile ${k}: luma ${l.toFixed(1)}, the frame at ${k * 2} s has ${expected}`);
    });
    const { stdout } = await run(
      'ffmpeg',
      ['-v', 'error', '-i', path.join(r.dir, 'poster.jpg'), '-f', 'rawvideo', '-pix_fmt', 'gray', '-'],
      { encoding: 'buffer' },
    );
    const mean = stdout.reduce((a, b) => a + b, 0) / stdout.length;
    assert.ok(Math.abs(mean - fullRange(110)) < 4, `poster luma ${mean.toFixed(1)}: the frame at 10 s`);
  });

  it('fills every cue when the video ends early (the last frame repeats) and stops at the cues when it runs late', async () => {
    for (const [planned, real] of [
      [10, 7],
      [4.5, 7],
    ] as const) {
      const p = plan(planned, 320, 180);
      const r = await runThumbnails(`testsrc2=size=320x180:rate=30:duration=${real}`, p);
      assert.equal(r.mainFrames, real * 30);
      await assertImages(r, p);
      assertTileCount(await tileLumas(r.dir, p), p);
    }
  });

  it('writes a poster of the last frame when the video ends before the planned middle', async () => {
    const p = plan(60, 320, 180);
    const r = await runThumbnails('testsrc2=size=320x180:rate=30:duration=7', p);
    await assertImages(r, p);
  });
});
