// Audio in pieces, sample-exact: a 12 s input with a stereo track at 48 kHz (a tone sweep over
// noise) and a 5.1 track at 44.1 kHz (a tone per channel, resampled as the single run does) split into 2 s audio pieces (one segment each); each track's joined audio
// (the stitched MP4, the fMP4 playlist, the TS playlist) against a single encode of the same
// track into the same formats, sample by sample around every seam (no offset; the difference
// around a seam at the level of the two encodes' difference away from the seams), and the
// TS packets' times and the playlists' cuts. The figures are printed.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/index.ts';
import { FolderStore } from '../../src/storage/builtin/index.ts';
import type { PieceSpec } from '../../src/tasks/index.ts';
import { createChunkedHandlers, createTranscodeHandler, type TranscodeJob } from '../../src/transcode/index.ts';
import { TEST_ENCODE_SETTINGS } from '../helpers/encode-defaults.ts';
import { startHttp, type TestHttp } from '../helpers/http-input.ts';
import { fakeContext, joined, runPieces, serveRanges, splitPieces } from './chunked-helpers.ts';

const run = promisify(execFile);
const RATE = 48_000;
const SECONDS = 12;
/** The single run's audio encode (encoders.ts AAC_ARGS). */
const AAC = ['-c:a', 'aac', '-b:a', '128000', '-ac', '2', '-ar', '48000'];

const scratch: string[] = [];
let root: string;
let web: TestHttp;
let source: string;

const config = loadConfig({
  env: {},
  overrides: {
    ...TEST_ENCODE_SETTINGS,
    allowPrivateUrls: true,
    chunkThresholdSecs: 6,
    chunkSecs: 6,
    audioChunkSecs: 2,
  },
});

before(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'mp-chunked-audio-'));
  scratch.push(root);
  source = path.join(root, 'source.mp4');
  const tones = [220, 277, 330, 110, 392, 440].map((hz) => `0.2*sin(2*PI*${hz}*t)`).join('|');
  await run('ffmpeg', [
    ...['-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=size=320x240:rate=15:duration=${SECONDS}`],
    // A sweep over noise: every seam falls on changing content, and noise leaves no state to hide in.
    ...[
      '-f',
      'lavfi',
      '-i',
      `aevalsrc=exprs=0.3*sin(2*PI*(200+40*t)*t)|0.3*sin(2*PI*(300+30*t)*t):s=${RATE}:d=${SECONDS}`,
    ],
    ...['-f', 'lavfi', '-i', `anoisesrc=r=${RATE}:d=${SECONDS}:a=0.05:c=pink:seed=1`],
    ...['-f', 'lavfi', '-i', `aevalsrc=exprs=${tones}:channel_layout=5.1:s=44100:d=${SECONDS}`],
    ...['-filter_complex', '[2]aformat=channel_layouts=stereo[n];[1][n]amix=inputs=2:normalize=0[st]'],
    ...['-map', '0:v', '-map', '[st]', '-map', '3:a', '-c:v', 'libx264', '-preset', 'ultrafast'],
    ...['-c:a', 'aac', '-b:a:0', '160k', '-b:a:1', '256k', source],
  ]);
  web = await startHttp({ '/source.mp4': serveRanges(source).route });
});
after(async () => {
  await web?.close();
  if (!process.env.KEEP) await Promise.all(scratch.map((d) => rm(d, { recursive: true, force: true })));
});

/** Track `k` of `file` decoded to 48 kHz stereo 16-bit samples (an MP4's edit list honoured). */
async function pcm(file: string, k: number, format?: string): Promise<Int16Array> {
  const out = path.join(root, `pcm-${path.basename(file)}-${k}.raw`);
  const input = format ? ['-f', format, '-i', file] : ['-i', file];
  await run('ffmpeg', [
    '-v',
    'error',
    '-y',
    ...input,
    '-map',
    `0:a:${k}`,
    '-ac',
    '2',
    '-ar',
    '48000',
    '-f',
    's16le',
    out,
  ]);
  const buf = await readFile(out);
  return new Int16Array(buf.buffer, buf.byteOffset, buf.length / 2);
}

interface Diff {
  max: number;
  rms: number;
}

/** The difference of `a` and `b` (b read `lag` samples later) over samples [from, to), leaving out 4096 either side of `skip`. */
function diff(a: Int16Array, b: Int16Array, from: number, to: number, lag = 0, skip: readonly number[] = []): Diff {
  let max = 0;
  let sq = 0;
  let n = 0;
  for (let s = Math.max(0, from); s < to; s++) {
    if (skip.some((at) => Math.abs(s - at) < 4096)) continue;
    for (let c = 0; c < 2; c++) {
      const d = (a[s * 2 + c] ?? 0) - (b[(s + lag) * 2 + c] ?? 0);
      max = Math.max(max, Math.abs(d));
      sq += d * d;
      n++;
    }
  }
  return { max, rms: Math.sqrt(sq / Math.max(1, n)) };
}

/** The lag (in samples, within +-8) at which `b` best matches `a` around `at`. */
function bestLag(a: Int16Array, b: Int16Array, at: number): number {
  let best = 0;
  let least = Number.POSITIVE_INFINITY;
  for (let lag = -8; lag <= 8; lag++) {
    const { rms } = diff(a, b, at - 2048, at + 2048, lag);
    if (rms < least) [least, best] = [rms, lag];
  }
  return best;
}

const f1 = (d: Diff): string => `max ${d.max}, RMS ${d.rms.toFixed(1)}`;

describe('audio pieces joined against a single encode', () => {
  const task = (rel: string) => path.join(root, 'media', 'task', 'parent', rel);
  let pieces: PieceSpec[];
  let seams: number[];

  before(async () => {
    const deps = { config, builtinStore: new FolderStore(path.join(root, 'media')) };
    const job: TranscodeJob = {
      input: { url: web.url('/source.mp4') },
      outputs: { hls: { path: '/hls' }, fmp4: { path: '/fmp4' }, mp4: { path: '/mp4' } },
      profiles: [{ name: '240p', width: 320, height: 240, bitrate: 300_000 }],
      targetSegmentSizeSecs: 2,
    };
    const ctx = await fakeContext(scratch, { taskId: 'parent' });
    pieces = await splitPieces(createTranscodeHandler(deps, { split: true }), job, ctx);
    await runPieces(createChunkedHandlers(deps), pieces, { parentId: 'parent', scratch });
    seams = pieces
      .filter((p) => p.type === 'transcode-audio')
      .map((p) => (p.params as { audio: { window: { startSample: number } } }).audio.window.startSample)
      .slice(1);
  });

  it('splits the audio into pieces labelled and queued between the chunks', () => {
    const labels = pieces.map((p) => p.label);
    assert.equal(seams.length, 5, labels.join('; '));
    assert.match(labels[0] ?? '', /^audio 0\.0-\d\.\d s \(piece 1 of 6\)$/);
    assert.match(labels[1] ?? '', /^video /);
    assert.match(labels[2] ?? '', /^audio \d\.\d-/);
    for (const s of seams) assert.equal(s % 1024, 0, `a seam at ${s} is a whole AAC frame`);
  });

  for (const [k, name] of [
    [0, 'stereo'],
    [1, '5.1'],
  ] as const)
    it(`joins the ${name} track sample-exact in every format: no offset, gap or overlap, seams at the codec's noise`, async () => {
      const single = await singleEncode(k);
      const chunked = {
        mp4: task('mp4/240p.mp4'),
        fmp4: await joined(task(`fmp4/audio/${k}`), path.join(root, `chunked-fmp4-${k}.mp4`)),
        ts: await joined(task(`hls/audio/${k}`), path.join(root, `chunked-ts-${k}.ts`)),
      };
      const lines = [`${name}:`];
      const problems: string[] = [];
      for (const format of ['mp4', 'fmp4', 'ts'] as const) {
        const [ref, got] = await Promise.all([pcm(single[format], 0), pcm(chunked[format], format === 'mp4' ? k : 0)]);
        if (got.length !== ref.length) problems.push(`${format}: ${got.length / 2} samples, not ${ref.length / 2}`);
        // ffmpeg decodes the priming packet of a TS and of a fragmented MP4 (no edit list applied
        // there): both files alike, a frame later than the MP4's.
        const lead = format === 'mp4' ? 0 : 1024;
        const seamsHere = seams.map((at) => at + lead);
        // Away from the seams: the two encoders' difference where neither starts nor ends (past the first piece).
        const interior = diff(ref, got, seamsHere[0] ?? 0, ref.length / 2, 0, seamsHere);
        lines.push(`  ${format}: away from the seams ${f1(interior)}`);
        for (const at of seamsHere) {
          const [around, lag] = [diff(ref, got, at - 1024, at + 1024), bestLag(ref, got, at)];
          lines.push(
            `  ${format} seam at ${((at - lead) / RATE).toFixed(3)} s: offset ${lag}, around it ${f1(around)}`,
          );
          if (lag !== 0) problems.push(`${format}: an offset of ${lag} samples at ${at}`);
          if (!(around.rms < 3 * interior.rms)) problems.push(`${format}: the seam at ${at} differs by ${f1(around)}`);
        }
      }
      console.log(lines.join('\n'));
      assert.deepEqual(problems, []);
      // The TS packets are the single encode's, timed alike; the playlists cut within a frame of its cuts.
      assert.deepEqual(await audioPts(chunked.ts), await audioPts(single.ts));
      for (const tree of ['hls', 'fmp4'] as const) {
        const [ours, theirs] = await Promise.all([
          durations(task(`${tree}/audio/${k}/index.m3u8`)),
          durations(path.join(root, `single-${k}`, tree, 'index.m3u8')),
        ]);
        assert.equal(ours.length, theirs.length, `${tree}: the single encode's segment count`);
        for (const [i, d] of ours.entries())
          assert.ok(
            Math.abs(d - (theirs[i] ?? 0)) <= 1024 / RATE + 1e-6,
            `${tree} segment ${i}: ${d} s, not ${theirs[i]}`,
          );
      }
    });
});

describe('a track that ends before the video', () => {
  it('pads it with silence, so that the pieces past its end complete and the audio lasts to the last piece', async () => {
    const short = path.join(root, 'short-audio.mp4');
    await run('ffmpeg', [
      ...['-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=size=160x120:rate=15:duration=${SECONDS}`],
      ...['-f', 'lavfi', '-i', `sine=f=440:sample_rate=${RATE}:duration=3`],
      ...['-c:v', 'libx264', '-preset', 'ultrafast', '-c:a', 'aac', short],
    ]);
    const served = await startHttp({ '/short.mp4': serveRanges(short).route });
    try {
      const media = path.join(root, 'short-media');
      const deps = { config, builtinStore: new FolderStore(media) };
      const job: TranscodeJob = {
        input: { url: served.url('/short.mp4') },
        outputs: { hls: { path: '/hls' }, mp4: { path: '/mp4' } },
        profiles: [{ name: '120p', width: 160, height: 120, bitrate: 200_000 }],
        targetSegmentSizeSecs: 2,
      };
      const ctx = await fakeContext(scratch, { taskId: 'short' });
      const pieces = await splitPieces(createTranscodeHandler(deps, { split: true }), job, ctx);
      const audio = pieces.filter((p) => p.type === 'transcode-audio');
      assert.equal(audio.length, SECONDS / 2);
      await runPieces(createChunkedHandlers(deps), pieces, { parentId: 'short', scratch });
      const out = (rel: string) => path.join(media, 'task', 'short', rel);
      const segments = await durations(out('hls/audio/0/index.m3u8'));
      assert.equal(segments.length, SECONDS / 2, 'a segment per piece, silence after the track');
      const samples = await pcm(out('mp4/120p.mp4'), 0);
      const lastPiece = audio.at(-1);
      assert.ok(lastPiece);
      const last = (lastPiece.params as { audio: { window: { startSample: number } } }).audio.window.startSample;
      assert.ok(samples.length / 2 > last, `${samples.length / 2} samples: the audio reaches the last piece`);
      assert.ok(
        diff(samples, new Int16Array(samples.length), 4 * RATE, samples.length / 2).max === 0,
        'silence past the track',
      );
      assert.ok(diff(samples, new Int16Array(samples.length), 0, 2 * RATE).max > 1000, 'the tone where the track is');
    } finally {
      await served.close();
    }
  });
});

/** Track `k` of the source encoded once as the single run encodes it, into an `.m4a`, a TS and an fMP4 playlist. */
async function singleEncode(k: number): Promise<{ mp4: string; fmp4: string; ts: string }> {
  const dir = path.join(root, `single-${k}`);
  await mkdir(path.join(dir, 'hls'), { recursive: true });
  await mkdir(path.join(dir, 'fmp4'), { recursive: true });
  // hls_time as command.ts sets it for the 2 s segments: the segment less a frame.
  const hls = `f=hls:hls_time=${(2 - 1024 / RATE).toFixed(6)}:hls_list_size=0:hls_playlist_type=vod`;
  const targets = [
    `[f=mp4]${dir}/single.m4a`,
    `[${hls}:hls_segment_filename=${dir}/hls/%d.ts]${dir}/hls/index.m3u8`,
    `[${hls}:hls_segment_type=fmp4:hls_segment_filename=${dir}/fmp4/%d.m4s]${dir}/fmp4/index.m3u8`,
  ];
  await run('ffmpeg', [
    '-v',
    'error',
    '-y',
    '-i',
    source,
    '-map',
    `0:a:${k}`,
    ...AAC,
    '-flags',
    '+global_header',
    '-f',
    'tee',
    targets.join('|'),
  ]);
  return {
    mp4: path.join(dir, 'single.m4a'),
    fmp4: await joined(path.join(dir, 'fmp4'), path.join(dir, 'fmp4.mp4')),
    ts: await joined(path.join(dir, 'hls'), path.join(dir, 'ts.ts')),
  };
}

/** Every audio packet's pts. */
async function audioPts(file: string): Promise<number[]> {
  const args = ['-v', 'error', '-select_streams', 'a:0', '-show_entries', 'packet=pts', '-of', 'csv=p=0', file];
  const { stdout } = await run('ffprobe', args, { maxBuffer: 16 << 20 });
  return stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => Number(l.split(',')[0]));
}

async function durations(playlist: string): Promise<number[]> {
  return [...(await readFile(playlist, 'utf8')).matchAll(/#EXTINF:([\d.]+)/g)].map((m) => Number(m[1]));
}
