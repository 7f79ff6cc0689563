// Transcoding benchmark (issue 3), not part of `npm test`:  node bench/transcode.ts
//
//   (a) the whole task through the API: a `mediaplane start` service in its own process,
//       POST /api/transcode (HTTP input served here, the local S3 server, s3rver, as storage), then
//       GET /api/task/{id}/events (SSE) until completed: download, probe, encode, upload
//   (b) the bare ffmpeg command line the pipeline runs (same ladder, the same storyboard and
//       poster branch, outputs on local disk)
//   (c) one ffmpeg process per rendition, one after the other (the naive pipeline)
// (c) runs first; then (b) and (a) alternate, b0 a1 b1 a2 b2 ..., and each (a) is set against
// the mean of the (b) runs on either side of it. The service runs one small warm-up task before
// the first (a). Prints a/b per round and their median (target <= 1.10) and c/b, then moves
// a 2 GB input through the download and a 2 GB file through the upload in child processes
// and reports their peak RSS (target under 250 MB: media is streamed, never buffered whole).
//
// Options: BENCH_SECONDS (default 30), BENCH_SIZE (default 1920x1080), BENCH_GB (default 2),
// BENCH_ROUNDS (runs of (a), default 3: the median of three rounds is not moved by one slow minute), BENCH_SKIP_LADDER=1 / BENCH_SKIP_RSS=1 to run one half, BENCH_SKIP_C=1 to leave out (c),
// BENCH_SERVICE_NODE_OPTIONS for the service process (e.g. --cpu-prof --cpu-prof-dir=DIR),
// BENCH_POLL_MS: poll GET /api/task/{id} this often instead of following its event stream,
// BENCH_PER_TITLE=1: leave the per-title ladder (issue #31) on in (a); off by default, since
// (b) runs the fixed ladder's command and (a) must do the same work.
//
// The AV1 leg (issue #19): one AV1 rendition at 720p30 (SVT-AV1 at the preset the x264 one
// maps to), (p) through the pipeline (runPipeline: probe, the one ffmpeg run writing fMP4 and
// MP4, CODECS, playlists, a local store) against (s) bare ffmpeg with the same libsvtav1
// arguments writing one MP4, alternating s0 p1 s1 p2 s2; prints each one's real-time factor
// (seconds per second of media) and p/s. BENCH_AV1_SECONDS (default 20), BENCH_AV1_ROUNDS
// (default 2), BENCH_SKIP_AV1=1 to leave it out.
//
// The thumbnails leg (issue #19): the default ladder of a 1080p30 clip with HLS + MP4 outputs
// through the pipeline (runPipeline, local store) with the storyboard and poster branch (t)
// and without it (w), alternating w0 t1 w1 t2 w2 ...; prints t/w per round against the mean
// of its neighbours and their median (target <= 1.05). BENCH_THUMBS_SECONDS (default 20),
// BENCH_THUMBS_ROUNDS (default 3), BENCH_SKIP_THUMBS=1 to leave it out.
import { mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { HttpInput, S3ObjectStore } from '../src/storage/index.ts';
import { config, parentOnly, run } from './transcode-measure.ts';

const GB = Number(process.env.BENCH_GB ?? 2);

/** Streams `bytes` of zeros without holding them: the download side's source. */
async function startZeroServer(bytes: number): Promise<{ url: string; close(): Promise<void> }> {
  const chunk = Buffer.alloc(1 << 20);
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-length': bytes, 'content-type': 'video/mp4' });
    let left = bytes;
    Readable.from(
      (function* () {
        while (left > 0) {
          const n = Math.min(left, chunk.length);
          left -= n;
          yield n === chunk.length ? chunk : chunk.subarray(0, n);
        }
      })(),
    ).pipe(res);
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
      const input = new HttpInput(new URL(arg), {
        limits: { maxBytes: config.inputMaxBytes, timeoutMs: 3600_000, idleTimeoutMs: 60_000 },
        maxRedirects: 5,
        allowPrivate: true,
      });
      await input.fetch({ dest: path.join(dir, 'input'), signal });
    } else {
      const { endpoint, bucket, accessKeyId, secretAccessKey } = JSON.parse(arg) as Record<string, string>;
      const file = path.join(dir, 'big.mp4');
      await writeFile(file, '');
      await truncate(file, GB * 1024 ** 3); // sparse: reads as zeros, costs no disk
      const store = new S3ObjectStore(
        {
          endpoint: endpoint ?? '',
          bucket: bucket ?? '',
          credentials: { accessKeyId: accessKeyId ?? '', secretAccessKey: secretAccessKey ?? '' },
        },
        { maxAttempts: 3, partSizeBytes: config.uploadPartSizeBytes, allowPrivate: true },
      );
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
  const { stdout } = await run(process.execPath, [fileURLToPath(import.meta.url), '--child', mode, arg], {
    maxBuffer: 1 << 20,
  });
  const seconds = (performance.now() - t) / 1000;
  return { seconds, ...(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as { peakRssMb: number }) };
}

async function rssBench(): Promise<void> {
  const bytes = GB * 1024 ** 3;
  const zeros = await startZeroServer(bytes);
  try {
    const d = await inChild('download', zeros.url);
    console.log(
      `download ${GB} GB over HTTP to disk: ${d.seconds.toFixed(1)} s, worker peak RSS ${d.peakRssMb.toFixed(0)} MB (target < 250)`,
    );
  } finally {
    await zeros.close();
  }
  const s3 = await (await parentOnly()).startS3();
  try {
    const bucket = await s3.createBucket();
    const u = await inChild('upload', JSON.stringify({ endpoint: s3.endpoint, bucket, ...s3.credentials }));
    const head = await s3.head(bucket, 'big.mp4');
    console.log(
      `upload ${GB} GB to S3 (multipart, ${config.uploadPartSizeBytes >> 20} MiB parts): ${u.seconds.toFixed(1)} s, worker peak RSS ${u.peakRssMb.toFixed(0)} MB (target < 250); object size ${head.size}`,
    );
  } finally {
    await s3.close();
  }
}

if (process.argv[2] === '--child') {
  await child(process.argv[3] ?? '', process.argv[4] ?? '');
} else {
  // The legs' modules are loaded here, in the parent only: the RSS child loads what a worker
  // loads for a transfer, no more.
  if (process.env.BENCH_SKIP_LADDER !== '1') await (await import('./transcode-ladder.ts')).ladderBench();
  if (process.env.BENCH_SKIP_AV1 !== '1') await (await import('./transcode-pipeline.ts')).av1Bench();
  if (process.env.BENCH_SKIP_THUMBS !== '1') await (await import('./transcode-pipeline.ts')).thumbnailsBench();
  if (process.env.BENCH_SKIP_RSS !== '1') await rssBench();
}
