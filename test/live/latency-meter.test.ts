// The latency meter itself (test/helpers/live.ts), checked against what exists without our
// server: the frame code read back exactly from pictures x264 encoded and a scaler shrank,
// and bare ffmpeg writing ordinary HLS with 1 s segments, played in Chromium, measuring a
// plausible latency (about 3.5 s on a quiet host; hls.js waits three segments behind the edge).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { openChromium } from '../helpers/browser.ts';
import {
  decodeFrameCells,
  FRAME_CODE_BAND,
  FRAME_CODE_CELLS,
  findStalls,
  frameCodeFilter,
  publishTestSource,
  serveFolder,
  watchLatency,
} from '../helpers/live.ts';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Runs ffmpeg to completion and resolves with its stdout. */
function ffmpeg(args: string[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => {
      err += b.toString();
    });
    child.once('exit', (code) =>
      code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`ffmpeg ${code}: ${err}`)),
    );
  });
}

/**
 * `frames` frames of the coded source (numbers from `offset`) through x264 at `kbps`, then
 * each frame's band scaled as the player page draws it (8 x 8 px a cell, RGBA) and decoded.
 */
async function decodedFrames(o: {
  width: number;
  height: number;
  scaleTo?: string;
  offset: number;
  frames: number;
  kbps: number;
}): Promise<(number | undefined)[]> {
  const dir = mkdtempSync(join(tmpdir(), 'latency-meter-'));
  dirs.push(dir);
  const file = join(dir, 'coded.mp4');
  const code = frameCodeFilter(o.width, o.height, o.offset);
  await ffmpeg([
    ...['-f', 'lavfi', '-i', `testsrc2=size=${o.width}x${o.height}:rate=30`, '-frames:v', String(o.frames)],
    ...['-vf', o.scaleTo ? `${code},scale=${o.scaleTo}` : code],
    ...['-c:v', 'libx264', '-preset', 'veryfast', '-tune', 'zerolatency', '-b:v', `${o.kbps}k`, '-g', '30', file],
  ]);
  const w = FRAME_CODE_CELLS * 8;
  const h = 8;
  const raw = await ffmpeg([
    ...['-i', file, '-vf', `crop=iw:ih*${FRAME_CODE_BAND}:0:0,scale=${w}:${h}`],
    ...['-f', 'rawvideo', '-pix_fmt', 'rgba', 'pipe:1'],
  ]);
  const size = w * h * 4;
  assert.equal(raw.length, size * o.frames, 'one band per frame');
  return Array.from({ length: o.frames }, (_, i) => decodeFrameCells(raw.subarray(i * size, (i + 1) * size), w, h));
}

test('the frame number is read back exactly from x264 pictures, low bits and high bits', async () => {
  const expect = (offset: number, frames: number) => Array.from({ length: frames }, (_, i) => offset + i);
  const [low, high] = await Promise.all([
    decodedFrames({ width: 320, height: 240, offset: 0, frames: 45, kbps: 300 }),
    decodedFrames({ width: 426, height: 240, offset: 65_500, frames: 30, kbps: 300 }),
  ]);
  assert.deepEqual(low, expect(0, 45));
  assert.deepEqual(high, expect(65_500, 30));
});

test('the code survives a ladder rung: 720p scaled to 256x144 at a low bitrate', async () => {
  const got = await decodedFrames({
    width: 1280,
    height: 720,
    scaleTo: '256:144',
    offset: 1234,
    frames: 30,
    kbps: 150,
  });
  assert.deepEqual(
    got,
    Array.from({ length: 30 }, (_, i) => 1234 + i),
  );
});

test('a band that is neither black nor white reads as no number, not a wrong one', () => {
  const w = 128;
  const h = 8;
  const gray = new Uint8Array(w * h * 4).fill(128);
  assert.equal(decodeFrameCells(gray, w, h), undefined);
  const black = new Uint8Array(w * h * 4);
  assert.equal(decodeFrameCells(black, w, h), 0);
  const white = new Uint8Array(w * h * 4).fill(255);
  assert.equal(decodeFrameCells(white, w, h), 65_535);
});

test('stalls: a pause in presentation and a jump of the frame number', () => {
  const samples = [
    { n: 0, wall: 0 },
    { n: 1, wall: 33 },
    { n: 2, wall: 700 },
    { n: 60, wall: 733 },
    { n: 61, wall: 766 },
  ];
  assert.deepEqual(findStalls(samples, { fps: 30, stallMs: 500 }), [
    { afterN: 1, gapMs: 667, skippedFrames: 0 },
    { afterN: 2, gapMs: 33, skippedFrames: 57 },
  ]);
});

test('bare ffmpeg writing ordinary HLS with 1 s segments measures a plausible latency in Chromium', async (t) => {
  const browser = await openChromium();
  if (typeof browser === 'string') return t.skip(browser);
  const dir = mkdtempSync(join(tmpdir(), 'latency-baseline-'));
  dirs.push(dir);
  const publish = await publishTestSource({
    url: join(dir, 'index.m3u8'),
    protocol: 'hls',
    seconds: 14,
    width: 320,
    height: 240,
    fps: 30,
  });
  try {
    const prefix = await serveFolder(dir);
    // A viewer joining a running stream: hls.js starts three segments behind the edge only
    // once the playlist has them (joining at the first segment, it plays from there, closer).
    await waitForSegments(`${prefix}index.m3u8`, { segments: 4, ms: 10_000 });
    const report = await watchLatency(browser, {
      url: `${prefix}index.m3u8`,
      lowLatency: true,
      seconds: 6,
      source: publish,
    });
    t.diagnostic(
      `baseline: p50 ${report.p50.toFixed(0)} ms, p95 ${report.p95.toFixed(0)} ms over ${report.samples.length} frames, ` +
        `hls.js estimate ${report.hlsLatency?.toFixed(2)} s, ${report.unreadable} unreadable, ${report.stalls.length} stalls`,
    );
    assert.ok(report.played, report.error ?? report.log.join('\n'));
    assert.ok(report.samples.length >= 60, `frames presented: ${report.samples.length}`);
    assert.ok(report.unreadable <= report.samples.length / 20, `unreadable frames: ${report.unreadable}`);
    // Every number read is one the source had published by then: no misread bits.
    const published = publish.frames();
    for (const s of report.samples) assert.ok(s.n >= 0 && s.n <= published, `frame ${s.n} of ${published}`);
    assert.ok(report.p50 > 1000 && report.p50 < 8000, `p50 ${report.p50} ms`);
  } finally {
    await publish.stop();
    await browser.close();
  }
});

async function waitForSegments(url: string, o: { segments: number; ms: number }): Promise<void> {
  const until = Date.now() + o.ms;
  while (Date.now() < until) {
    const res = await fetch(url);
    const listed = res.ok ? (await res.text()).split('#EXTINF').length - 1 : 0;
    if (listed >= o.segments) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not list ${o.segments} segments within ${o.ms} ms`);
}
