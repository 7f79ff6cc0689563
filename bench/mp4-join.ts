// The chunked stitch's MP4 join, not part of `npm test`:  node bench/mp4-join.ts
//
// One rendition's chunk parts (generated, BENCH_SIZE at 30 fps, x264 veryfast at 3 Mb/s,
// BENCH_CHUNK_SECS each over BENCH_SECONDS) and a two-track `.m4a`, joined into one faststart
// MP4 by (f) ffmpeg's concat demuxer + `-movflags +faststart`, as the stitch did before, and
// (n) outputs/mp4-join.ts joinMp4s, in turns, BENCH_RUNS times each. Then the same with the
// parts repeated BENCH_REPEAT times (a film's length: the same bytes per second, 10x the
// parts). Wall time and CPU (ffmpeg's from /usr/bin/time, the join's from process.cpuUsage).
import { execFile } from 'node:child_process';
import { statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { joinMp4s } from '../src/transcode/outputs/mp4-join.ts';

const run = promisify(execFile);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 180);
const CHUNK_SECS = Number(process.env.BENCH_CHUNK_SECS ?? 30);
const SIZE = process.env.BENCH_SIZE ?? '960x540';
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 10);

// biome-ignore format: the arguments read as flag-value pairs
async function makeParts(dir: string): Promise<{ video: string[]; audio: string }> {
  const video: string[] = [];
  for (let i = 0; i * CHUNK_SECS < SECONDS; i++) {
    const file = path.join(dir, `v${i}.mp4`);
    await run('ffmpeg', [
      '-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=size=${SIZE}:rate=30`, '-t', String(CHUNK_SECS),
      '-map_metadata', '-1', '-c:v', 'libx264', '-preset', 'veryfast', '-b:v', '3000k', '-g', '60',
      '-pix_fmt', 'yuv420p', '-movflags', '+faststart', file,
    ]);
    video.push(file);
  }
  const audio = path.join(dir, 'audio.m4a');
  await run('ffmpeg', [
    '-v', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000',
    '-f', 'lavfi', '-i', 'sine=frequency=660:sample_rate=48000', '-map', '0:a', '-map', '1:a',
    '-t', String(SECONDS), '-c:a', 'aac', '-b:a', '128000', '-ac', '2', '-ar', '48000', '-movflags', '+faststart', audio,
  ]);
  return { video, audio };
}

// biome-ignore format: the arguments read as flag-value pairs
async function ffmpegJoin(dir: string, video: string[], audio: string[], out: string): Promise<number> {
  const list = async (name: string, files: string[]) => {
    await writeFile(path.join(dir, name), files.map((f) => `file '${f}'\n`).join(''));
    return ['-f', 'concat', '-safe', '0', '-i', path.join(dir, name)];
  };
  const { stderr } = await run('/usr/bin/time', [
    '-f', '%U %S', 'ffmpeg', '-v', 'error', '-y', ...(await list('v.txt', video)), ...(await list('a.txt', audio)),
    '-map', '0:v:0', '-map', '1:a', '-c', 'copy', '-map_metadata', '-1', '-movflags', '+faststart', out,
  ]);
  const [user = 0, sys = 0] = (stderr.trim().split('\n').at(-1) ?? '').split(' ').map(Number);
  return user + sys;
}

async function turn(dir: string, parts: { video: string[]; audio: string }, repeat: number): Promise<void> {
  const video = Array.from(
    { length: parts.video.length * repeat },
    (_, i) => parts.video[i % parts.video.length] ?? '',
  );
  const audio = Array.from({ length: repeat }, () => parts.audio);
  const out = path.join(dir, 'out.mp4');
  for (let k = 0; k < RUNS; k++) {
    let t = performance.now();
    const cpu = await ffmpegJoin(dir, video, audio, out);
    const mb = (statSync(out).size / 1e6).toFixed(0);
    console.log(
      `${SECONDS * repeat} s, (f) ffmpeg concat + faststart: ${s(performance.now() - t)} wall, ${cpu.toFixed(2)} s CPU, ${mb} MB`,
    );
    t = performance.now();
    const c = process.cpuUsage();
    await joinMp4s({ sequences: [video, audio], output: out });
    const d = process.cpuUsage(c);
    const used = ((d.user + d.system) / 1e6).toFixed(2);
    console.log(
      `${SECONDS * repeat} s, (n) joinMp4s:                  ${s(performance.now() - t)} wall, ${used} s CPU`,
    );
  }
}

const s = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-bench-join-'));
try {
  const parts = await makeParts(dir);
  await turn(dir, parts, 1);
  if (REPEAT > 1) await turn(dir, parts, REPEAT);
} finally {
  await rm(dir, { recursive: true, force: true });
}
