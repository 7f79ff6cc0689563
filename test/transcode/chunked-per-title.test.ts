// The per-title ladder of a split job, chosen by the chunks: the split step analyses nothing
// (it plans the rungs and hands them on with the per-title setting), and each chunk chooses
// its rungs' rates from its own part before its encode. The input is easy, then hard: a still
// card for 12 s, then 12 s of moving grain; in 8 s chunks the first chunk's rungs come out
// capped CRF and the last one's ABR at their caps, every chunk writes every planned rung, and
// the outputs that carry the first chunk's codec headers alone (fMP4, MP4) decode to the very
// frames of the TS segments, which carry each chunk's own.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config/index.ts';
import { FolderStore } from '../../src/storage/builtin/index.ts';
import type { PieceSpec } from '../../src/tasks/index.ts';
import { createChunkedHandlers, createTranscodeHandler, type TranscodeJob } from '../../src/transcode/index.ts';
import { parseMediaPlaylist } from '../../src/transcode/playlist.ts';
import type { TestHttp } from '../helpers/http-input.ts';
import { cachedMedia } from '../helpers/media-cache.ts';
import { fakeContext, joined, runPieces, servedInput, splitPieces } from './chunked-helpers.ts';

const run = promisify(execFile);
const SEGMENT = 2;
const CHUNK = 8;
const FPS = 15;
const RUNGS = ['360p0', '480p0'];
const scratch: string[] = [];
let root: string;
let web: TestHttp;

const config = loadConfig({
  env: {},
  overrides: {
    allowPrivateUrls: true,
    x264Preset: 'ultrafast',
    chunkThresholdSecs: 10,
    chunkSecs: CHUNK,
    perTitle: true,
  },
});

/** 24 s at 854x480 (the default ladder: 360p0 and 480p0): a still card, then grain that moves. */
function easyThenHard(): Promise<string> {
  return cachedMedia(`per-title-easy-hard-854x480-24s-${FPS}.mp4`, async (tmp) => {
    const card = `color=c=0x1e3a5f:s=854x480:r=${FPS}:d=12,drawbox=x=100:y=100:w=300:h=200:color=0xf4f1ea:t=fill`;
    const grain = `color=c=gray:s=854x480:r=${FPS}:d=12,noise=alls=60:allf=t`;
    await run('ffmpeg', [
      ...['-v', 'error', '-y', '-nostdin', '-filter_complex', `${card}[a];${grain}[b];[a][b]concat=n=2:v=1:a=0[v]`],
      ...[
        '-map',
        '[v]',
        '-c:v',
        'libx264',
        '-preset',
        'ultrafast',
        '-crf',
        '20',
        '-g',
        String(FPS * 2),
        '-pix_fmt',
        'yuv420p',
      ],
      tmp,
    ]);
  });
}

/** A logger whose lines' messages are kept. */
function keptLog(): { log: pino.Logger; messages: string[] } {
  const messages: string[] = [];
  const sink = new Writable({
    write(line, _enc, done) {
      messages.push((JSON.parse(String(line)) as { msg: string }).msg);
      done();
    },
  });
  return { log: pino({ level: 'info' }, sink), messages };
}

/** The rate control x264 wrote into its first frame's SEI: `crf 20.0 1000 1000`, `abr 2179 3268 4358` (its VBV after). */
async function rateControlOf(file: string): Promise<string> {
  const sei = (await readFile(file)).toString('latin1');
  const rc = /\brc=(\w+)/.exec(sei)?.[1];
  const target = /\b(?:crf|bitrate)=([\d.]+)/.exec(sei)?.[1];
  const vbv = /\bvbv_maxrate=(\d+) vbv_bufsize=(\d+)/.exec(sei)?.slice(1) ?? [];
  return [rc, target, ...vbv].join(' ');
}

/** The MD5 of each decoded video frame. */
async function frameHashes(file: string): Promise<string[]> {
  const { stdout } = await run(
    'ffmpeg',
    ['-v', 'error', '-nostdin', '-i', file, '-map', '0:v:0', '-f', 'framemd5', '-'],
    {
      maxBuffer: 16 << 20,
    },
  );
  return stdout
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .map((l) => l.split(',').at(-1)?.trim() ?? '');
}

let close: (() => Promise<void>) | undefined;

before(async () => {
  ({ root, web, close } = await servedInput(scratch, {
    prefix: 'mp-chunked-pt-',
    route: '/input.mp4',
    clip: await easyThenHard(),
  }));
});
after(async () => {
  await close?.();
});

describe('a split job with the per-title ladder on (pieces run by hand)', () => {
  const deps = () => ({ config, builtinStore: new FolderStore(path.join(root, 'media')) });
  const task = (rel: string) => path.join(root, 'media', 'task', 'parent', rel);
  const job: () => TranscodeJob = () => ({
    input: { url: web.url('/input.mp4') },
    outputs: { hls: { path: '/hls' }, fmp4: { path: '/fmp4' }, mp4: { path: '/mp4' } },
    targetSegmentSizeSecs: SEGMENT,
  });
  const split = keptLog();
  let pieces: PieceSpec[];
  let early: string | undefined;

  before(async () => {
    const ctx = await fakeContext(scratch, { taskId: 'parent', log: split.log });
    pieces = await splitPieces(createTranscodeHandler(deps(), { split: true }), job(), ctx);
    await runPieces(createChunkedHandlers(deps()), pieces, {
      parentId: 'parent',
      scratch,
      after: async () => {
        // The first early master: the first chunk's rates alone.
        if (early === undefined && existsSync(task('hls/index.m3u8')))
          early = await readFile(task('hls/index.m3u8'), 'utf8');
      },
    });
  });

  it('analyses nothing in the split: the chunks carry the planned rungs and the per-title setting', () => {
    assert.ok(split.messages.includes('split into pieces'), split.messages.join('; '));
    assert.ok(!split.messages.some((m) => /per-title/.test(m)), split.messages.join('; '));
    const chunks = pieces.filter((p) => p.type === 'transcode-chunk');
    assert.equal(chunks.length, 3);
    for (const c of chunks) {
      const params = c.params as { perTitle?: boolean; renditions: { name: string; choice?: unknown }[] };
      assert.equal(params.perTitle, true);
      assert.deepEqual(
        params.renditions.map((r) => [r.name, r.choice]),
        RUNGS.map((r) => [r, undefined]),
      );
    }
  });

  it("encodes each chunk's rungs at its own choice: capped CRF where easy, another where hard", async () => {
    const firstOf = (chunk: number) => String((chunk * CHUNK) / SEGMENT);
    const rates: Record<string, string[]> = {};
    for (const rung of RUNGS) {
      for (const tree of ['hls', 'fmp4']) {
        const pl = parseMediaPlaylist(await readFile(task(`${tree}/${rung}/index.m3u8`), 'utf8'));
        assert.equal(pl.segments.length, 12, `${tree}/${rung}: every chunk wrote its segments`);
      }
      rates[rung] = await Promise.all([0, 2].map((c) => rateControlOf(task(`hls/${rung}/${firstOf(c)}.ts`))));
    }
    const [easy360, hard360] = rates['360p0'] ?? [];
    const [easy480, hard480] = rates['480p0'] ?? [];
    // The grain's 360p keyframes need more than its 1 Mb/s refills in a segment: a rung below
    // its keyframe floor is capped CRF at the target CRF instead of ABR (encoders.ts rateControl).
    assert.match(`${easy360}|${easy480}`, /^crf 20\.0 1000 1000\|crf 22\.0 2179 2179$/, 'the still card');
    assert.match(`${hard360}|${hard480}`, /^crf 22\.0 \d+ \d+\|abr 2179 \d+ \d+$/, 'the grain');
    assert.notEqual(hard360, easy360);
  });

  it('decodes the fMP4 and the MP4 (one set of codec headers) to the frames of the TS segments', async () => {
    for (const rung of RUNGS) {
      const ts = await frameHashes(await joined(task(`hls/${rung}`), path.join(root, `${rung}.ts`)));
      assert.equal(ts.length, 24 * FPS);
      const fmp4 = await frameHashes(await joined(task(`fmp4/${rung}`), path.join(root, `${rung}.mp4`)));
      assert.deepEqual(fmp4, ts, `fmp4/${rung}`);
      assert.deepEqual(await frameHashes(task(`mp4/${rung}.mp4`)), ts, `mp4/${rung}.mp4`);
    }
  });

  it("lists in each master's BANDWIDTH, the early one's too, at least its variant's peak segment", async () => {
    const master = await readFile(task('hls/index.m3u8'), 'utf8');
    for (const rung of RUNGS) {
      const dir = task(`hls/${rung}`);
      const pl = parseMediaPlaylist(await readFile(path.join(dir, 'index.m3u8'), 'utf8'));
      let peak = 0;
      for (const s of pl.segments) peak = Math.max(peak, ((await stat(path.join(dir, s.uri))).size * 8) / s.duration);
      assert.ok(bandwidthOf(master, rung) >= peak, `${rung}: BANDWIDTH ${bandwidthOf(master, rung)}, peak ${peak}`);
      // The early master, from the still card's chunk alone, already holds the grain's peak.
      assert.ok(early, 'an early master was published');
      assert.ok(bandwidthOf(early, rung) >= peak, `${rung}: early BANDWIDTH ${bandwidthOf(early, rung)}, peak ${peak}`);
    }
  });
});

function bandwidthOf(master: string, rung: string): number {
  const lines = master.split('\n');
  const i = lines.findIndex((l) => l.trim() === `${rung}/index.m3u8`);
  return Number(/BANDWIDTH=(\d+)/.exec(lines[i - 1] ?? '')?.[1] ?? Number.NaN);
}
