// Transcoding benchmark (issue 3), not part of `npm test`:  node bench/transcode.ts
//
//   (a) the whole job as the worker runs it: HTTP download, probe, encode, upload to S3
//   (b) the bare ffmpeg command line the pipeline runs (same ladder, outputs on local disk)
//   (c) one ffmpeg process per rendition, one after the other (the naive pipeline)
// prints a/b (target <= 1.10) and c/b, then moves a 2 GB input through the download and a
// 2 GB file through the upload in child processes and reports their peak RSS (target
// under 250 MB: media is streamed, never buffered whole).
//
// Options: BENCH_SECONDS (default 30), BENCH_SIZE (default 1920x1080), BENCH_GB (default 2),
// BENCH_SKIP_LADDER=1 / BENCH_SKIP_RSS=1 to run one half.
import { execFile } from 'node:child_process';

import { mkdir, mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadConfig } from '../src/config/index.ts';
import { HttpInput, S3ObjectStore } from '../src/storage/index.ts';

// The measuring child loads what a worker loads for a transfer (config, storage); the test
// servers (s3rver) and the encoder side are loaded by the parent only, so the child's peak
// RSS is not inflated by code a worker never runs.
const parentOnly = async () => ({
  pino: (await import('pino')).default,
  ...(await import('../src/transcode/index.ts')),
  ...(await import('../test/helpers/http-input.ts')),
  ...(await import('../test/helpers/media.ts')),
  ...(await import('../test/helpers/s3.ts')),
});

const run = promisify(execFile);
const GB = Number(process.env.BENCH_GB ?? 2);
const config = loadConfig({ env: {}, overrides: { allowPrivateUrls: true } });

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
}

async function ladderBench(): Promise<void> {
  const { makeClip, startS3, startHttp, serveFile, probe, planLadder, buildFfmpegArgs, createTranscodeHandler, pino } = await parentOnly();
  const [w, h] = (process.env.BENCH_SIZE ?? '1920x1080').split('x').map(Number);
  const clip = await makeClip({ width: w ?? 1920, height: h ?? 1080, seconds: Number(process.env.BENCH_SECONDS ?? 30) });
  const work = await mkdtemp(path.join(os.tmpdir(), 'mp-bench-'));
  const s3 = await startS3();
  const web = await startHttp({ '/in.mp4': serveFile(clip) });
  try {
    const info = await probe(clip, { ffprobePath: 'ffprobe', signal: new AbortController().signal });
    const renditions = planLadder(info, { maxFps: config.maxOutputFps });
    const kinds = { hls: true, mp4: true, fmp4: false };
    const common = { input: clip, probe: info, kinds, segmentSecs: 6, preset: config.x264Preset, threads: 0 };
    const outDir = async (name: string): Promise<string> => {
      const d = path.join(work, name);
      for (const r of renditions) await mkdir(path.join(d, 'hls', r.name), { recursive: true });
      await mkdir(path.join(d, 'mp4'), { recursive: true });
      return d;
    };
    const b = await timed(async () => run('ffmpeg', buildFfmpegArgs({ ...common, renditions }), { cwd: await outDir('b') }));
    const c = await timed(async () => {
      const d = await outDir('c');
      for (const r of renditions) await run('ffmpeg', buildFfmpegArgs({ ...common, renditions: [r] }), { cwd: d });
    });
    const bucket = await s3.createBucket();
    const handler = createTranscodeHandler({ config });
    const a = await timed(async () => {
      const scratch = await mkdtemp(path.join(work, 'a-'));
      await handler(
        { input: { url: web.url('/in.mp4') }, storage: { type: 's3', endpoint: s3.endpoint, bucket, credentials: s3.credentials }, outputs: { hls: { path: 'hls' }, mp4: { path: 'mp4' } } },
        { taskId: 'bench', attempt: 1, signal: new AbortController().signal, scratchDir: scratch, progress: () => undefined, log: pino({ level: 'silent' }) },
      );
    });
    console.log(`clip: ${info.video.width}x${info.video.height}, ${info.duration.toFixed(1)} s; ladder: ${renditions.map((r) => `${r.name} ${r.width}x${r.height}`).join(', ')}; outputs HLS + MP4; preset ${config.x264Preset}; ${os.cpus().length} CPUs`);
    console.log(`(a) whole job (download, probe, encode, upload): ${a.toFixed(2)} s`);
    console.log(`(b) bare ffmpeg, one decode, all renditions:     ${b.toFixed(2)} s`);
    console.log(`(c) one ffmpeg per rendition:                   ${c.toFixed(2)} s`);
    console.log(`a/b = ${(a / b).toFixed(3)} (target <= 1.10)   c/b = ${(c / b).toFixed(3)}`);
  } finally {
    await Promise.all([s3.close(), web.close()]);
    await rm(work, { recursive: true, force: true });
  }
}

/** Streams `bytes` of zeros without holding them: the download side's source. */
async function startZeroServer(bytes: number): Promise<{ url: string; close(): Promise<void> }> {
  const chunk = Buffer.alloc(1 << 20);
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-length': bytes, 'content-type': 'video/mp4' });
    let left = bytes;
    Readable.from((function* () {
      while (left > 0) {
        const n = Math.min(left, chunk.length);
        left -= n;
        yield n === chunk.length ? chunk : chunk.subarray(0, n);
      }
    })()).pipe(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/big.mp4`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Child mode: one transfer, then print this process's peak RSS in MB. */
async function child(mode: string, arg: string): Promise<void> {
  const signal = new AbortController().signal;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-bench-rss-'));
  try {
    if (mode === 'download') {
      const input = new HttpInput(new URL(arg), { limits: { maxBytes: config.inputMaxBytes, timeoutMs: 3600_000, idleTimeoutMs: 60_000 }, maxRedirects: 5, allowPrivate: true });
      await input.fetch({ dest: path.join(dir, 'input'), signal });
    } else {
      const { endpoint, bucket, accessKeyId, secretAccessKey } = JSON.parse(arg) as Record<string, string>;
      const file = path.join(dir, 'big.mp4');
      await writeFile(file, '');
      await truncate(file, GB * 1024 ** 3); // sparse: reads as zeros, costs no disk
      const store = new S3ObjectStore({ endpoint: endpoint ?? '', bucket: bucket ?? '', credentials: { accessKeyId: accessKeyId ?? '', secretAccessKey: secretAccessKey ?? '' } }, { maxAttempts: 3, partSizeBytes: config.uploadPartSizeBytes, allowPrivate: true });
      await store.put('big.mp4', { file }, { contentType: 'video/mp4', signal });
      await store.close();
    }
    console.log(JSON.stringify({ peakRssMb: process.resourceUsage().maxRSS / 1024 }));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function inChild(mode: string, arg: string): Promise<{ seconds: number; peakRssMb: number }> {
  const t = performance.now();
  const { stdout } = await run(process.execPath, [fileURLToPath(import.meta.url), '--child', mode, arg], { maxBuffer: 1 << 20 });
  const seconds = (performance.now() - t) / 1000;
  return { seconds, ...(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as { peakRssMb: number }) };
}

async function rssBench(): Promise<void> {
  const bytes = GB * 1024 ** 3;
  const zeros = await startZeroServer(bytes);
  try {
    const d = await inChild('download', zeros.url);
    console.log(`download ${GB} GB over HTTP to disk: ${d.seconds.toFixed(1)} s, worker peak RSS ${d.peakRssMb.toFixed(0)} MB (target < 250)`);
  } finally {
    await zeros.close();
  }
  const s3 = await (await parentOnly()).startS3();
  try {
    const bucket = await s3.createBucket();
    const u = await inChild('upload', JSON.stringify({ endpoint: s3.endpoint, bucket, ...s3.credentials }));
    const head = await s3.head(bucket, 'big.mp4');
    console.log(`upload ${GB} GB to S3 (multipart, ${config.uploadPartSizeBytes >> 20} MiB parts): ${u.seconds.toFixed(1)} s, worker peak RSS ${u.peakRssMb.toFixed(0)} MB (target < 250); object size ${head.size}`);
  } finally {
    await s3.close();
  }
}

if (process.argv[2] === '--child') {
  await child(process.argv[3] ?? '', process.argv[4] ?? '');
} else {
  if (process.env.BENCH_SKIP_LADDER !== '1') await ladderBench();
  if (process.env.BENCH_SKIP_RSS !== '1') await rssBench();
}
