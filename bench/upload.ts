// Upload benchmark (issue #27), not part of `npm test`:  node bench/upload.ts
//
//   (a) a direct PUT of a BENCH_MB (default 1024) MB file to the service: `mediaplane api` in a
//       child process, the folder store in a temporary data dir; each round asks
//       POST /api/asset/request-upload for a URL and PUTs the file there, and the service
//       stages it, moves it into the store and queues the asset before it answers
//   (b) the same PUT to a bare node:http server in a child process (bench/bare-upload-server.ts)
//       piping the request to a file in the same temporary folder
// Both with one client: node:http streaming the file from disk (in the page cache after the
// first read) with its Content-Length. A warm-up PUT of 32 MB to each, then (b) and (a)
// alternate, b0 a1 b1 a2 b2 a3 b3 (BENCH_ROUNDS, default 3), each (a) set against the mean
// of the (b) runs on either side of it; prints MB/s, a/b per round and their median (target
// >= 0.8). Each stored file is deleted after its round, so the disk holds one at a time.
//
// Memory: the service is a child process; its VmRSS is read from /proc/<pid>/status every
// 20 ms during each (a), and its VmHWM (peak since start) after start-up and at the end. Flat
// memory means the peak during an upload does not grow with the file (try BENCH_MB=4096).
//
// Options: BENCH_MB, BENCH_ROUNDS, BENCH_SERVICE_NODE_OPTIONS (the service's NODE_OPTIONS, e.g.
// --cpu-prof --cpu-prof-dir=DIR).
//
// The API role alone: a worker would start processing each uploaded file (reading the whole
// gigabyte for its hashes) on the same cores while the next round is measured.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, open, readdir, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort } from './child.ts';
import { median } from './stats.ts';

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../bin/mediaplane.js', import.meta.url));
const BARE = fileURLToPath(new URL('./bare-upload-server.ts', import.meta.url));
const MB = Number(process.env.BENCH_MB ?? 1024);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const MiB = 1024 * 1024;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A file of `mb` MiB of random bytes (one random 16 MiB block, repeated). */
async function makeFile(file: string, mb: number): Promise<void> {
  const block = randomBytes(16 * MiB);
  const fh = await open(file, 'w');
  try {
    for (let left = mb * MiB; left > 0; left -= block.length) await fh.write(block, 0, Math.min(left, block.length));
  } finally {
    await fh.close();
  }
}

/** PUTs `file` to `url` with node:http; seconds from the first byte sent to the end of the answer. */
function put(url: string, file: string, size: number): Promise<number> {
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'PUT', headers: { 'content-length': String(size), 'content-type': 'application/octet-stream' } },
      (res) => {
        res.resume();
        res.on('end', () =>
          res.statusCode === 200
            ? resolve((performance.now() - t) / 1000)
            : reject(new Error(`PUT answered ${res.statusCode}`)),
        );
      },
    );
    req.on('error', reject);
    createReadStream(file).pipe(req);
  });
}

/** A child process that prints one JSON line with its URL (the bare server), or answers /healthz (the service). */
function spawnChild(args: string[], env: NodeJS.ProcessEnv): { child: ChildProcess; tail: () => string } {
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const keep = (b: Buffer) => {
    tail = (tail + b.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  if (process.env.BENCH_SERVICE_LOG) child.stdout?.pipe(createWriteStream(process.env.BENCH_SERVICE_LOG));
  return { child, tail: () => tail };
}

interface Service {
  pid: number;
  url: string;
  key: string;
  dataDir: string;
  child: ChildProcess;
}

async function startService(dataDir: string): Promise<Service> {
  const port = await freePort();
  const env = {
    ...process.env,
    MEDIAPLANE_DATA_DIR: dataDir,
    MEDIAPLANE_PORT: String(port),
    MEDIAPLANE_HOST: '127.0.0.1',
    MEDIAPLANE_LOG_LEVEL: 'info',
    // e.g. --cpu-prof --cpu-prof-dir=/tmp/prof: where the service's time goes during (a).
    ...(process.env.BENCH_SERVICE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVICE_NODE_OPTIONS } : {}),
  };
  const key = (await run(process.execPath, [BIN, 'keys', 'create', '--owner', 'bench'], { env })).stdout.trim();
  const nodeArgs = process.env.BENCH_SERVICE_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const { child, tail } = spawnChild([...nodeArgs, BIN, 'api'], env);
  const url = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 60_000; ; await sleep(100)) {
    if (child.exitCode !== null) throw new Error(`mediaplane api exited with ${child.exitCode}: ${tail()}`);
    if (
      await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (Date.now() > deadline) throw new Error(`mediaplane api did not answer: ${tail()}`);
  }
  return { pid: child.pid ?? 0, url, key, dataDir, child };
}

async function startBare(dir: string): Promise<{ url: string; child: ChildProcess }> {
  const { child } = spawnChild([BARE], { ...process.env, BENCH_UPLOAD_DIR: dir });
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.once('data', (b: Buffer) => resolve((JSON.parse(b.toString()) as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`the bare server exited with ${code}`)));
  });
  return { url, child };
}

/** A `VmRSS`/`VmHWM` line of /proc/<pid>/status, in MB. */
async function procMb(pid: number, field: 'VmRSS' | 'VmHWM'): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) / 1024;
}

/** One (a): a fresh upload URL, the PUT, the stored file deleted; seconds and the peak VmRSS during it. */
async function serviceRound(svc: Service, file: string, size: number): Promise<{ s: number; rssMb: number }> {
  const res = await fetch(`${svc.url}/api/asset/request-upload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${svc.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench' }),
  });
  const made = (await res.json()) as { url: string; asset: { playbackId: string } };
  if (res.status !== 200) throw new Error(`request-upload answered ${res.status}: ${JSON.stringify(made)}`);
  let rssMb = 0;
  const sampler = setInterval(() => {
    void procMb(svc.pid, 'VmRSS').then((mb) => {
      rssMb = Math.max(rssMb, mb);
    });
  }, 20);
  try {
    const s = await put(made.url, file, size);
    return { s, rssMb };
  } finally {
    clearInterval(sampler);
    await rm(path.join(svc.dataDir, 'media', 'asset', made.asset.playbackId), { recursive: true, force: true });
  }
}

async function bareRound(url: string, dir: string, file: string, size: number): Promise<number> {
  const s = await put(url, file, size);
  for (const name of await readdir(dir)) if (name.startsWith('bare-')) await rm(path.join(dir, name), { force: true });
  return s;
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'mp-bench-upload-'));
  const file = path.join(work, 'upload.bin');
  const warm = path.join(work, 'warm.bin');
  const bareDir = await mkdtemp(path.join(work, 'bare-'));
  const size = MB * MiB;
  let svc: Service | undefined;
  let bare: { url: string; child: ChildProcess } | undefined;
  try {
    await makeFile(file, MB);
    await makeFile(warm, 32);
    svc = await startService(path.join(work, 'data'));
    bare = await startBare(bareDir);
    const idleMb = await procMb(svc.pid, 'VmRSS');
    const startHwm = await procMb(svc.pid, 'VmHWM');
    await bareRound(bare.url, bareDir, warm, 32 * MiB);
    await serviceRound(svc, warm, 32 * MiB);
    const rate = (s: number) => MB / s;
    const bs = [await bareRound(bare.url, bareDir, file, size)];
    console.log(`b0 bare node:http      ${rate(bs[0] ?? NaN).toFixed(0)} MB/s`);
    const ratios: number[] = [];
    const peaks: number[] = [];
    for (let i = 1; i <= ROUNDS; i++) {
      const a = await serviceRound(svc, file, size);
      const b = await bareRound(bare.url, bareDir, file, size);
      const prev = bs[bs.length - 1] ?? NaN;
      bs.push(b);
      const ratio = rate(a.s) / ((rate(prev) + rate(b)) / 2);
      ratios.push(ratio);
      peaks.push(a.rssMb);
      console.log(
        `a${i} service PUT        ${rate(a.s).toFixed(0)} MB/s (${a.s.toFixed(2)} s), service VmRSS peak ${a.rssMb.toFixed(0)} MB`,
      );
      console.log(`b${i} bare node:http      ${rate(b).toFixed(0)} MB/s; a${i}/b ${ratio.toFixed(3)}`);
    }
    const hwm = await procMb(svc.pid, 'VmHWM');
    console.log(
      `\n${MB} MB direct PUT: a/b median ${median(ratios).toFixed(3)} (rounds ${ratios.map((r) => r.toFixed(3)).join(', ')}); target >= 0.8`,
    );
    console.log(
      `service (child process, /proc/${svc.pid}/status): VmRSS idle ${idleMb.toFixed(0)} MB, peak during uploads ${Math.max(...peaks).toFixed(0)} MB; VmHWM ${startHwm.toFixed(0)} MB after start-up, ${hwm.toFixed(0)} MB at the end`,
    );
  } finally {
    svc?.child.kill('SIGTERM');
    bare?.child.kill('SIGTERM');
    await sleep(200);
    await rm(work, { recursive: true, force: true });
  }
}

await main();
