// The RTMP ingest server's own CPU per Mb/s of ingest: ffmpeg publishers copy a pre-encoded
// FLV (`-c copy`, so their CPU is not ours) into a server in this process whose gate accepts
// every key and drops the FLV; this process's CPU time (process.cpuUsage) over the run against
// the bytes taken in. Two legs: real time (`-re`, several publishers at once) and flat out (one
// publisher without `-re`: how many Mb/s one connection can push through one core). Not part
// of `npm test`.
//   node bench/rtmp-ingest.ts [--publishers 4] [--seconds 10]

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { createLogger } from '../src/lib/log.ts';
import type { PublishGate } from '../src/live/ingest-types.ts';
import { startRtmpServer } from '../src/live/rtmp/index.ts';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const PUBLISHERS = arg('publishers', 4);
const SECONDS = arg('seconds', 10);

function run(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('ffmpeg', ['-hide_banner', '-nostdin', '-loglevel', 'error', ...args], { stdio: 'inherit' });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`ffmpeg exited with ${code}`))));
  });
}

/** A 10 s H.264 + AAC FLV of a high bitrate (lossless x264: cheap to make, many bytes to carry). */
async function source(dir: string): Promise<{ file: string; mbps: number }> {
  const file = join(dir, 'source.flv');
  await run([
    ...['-f', 'lavfi', '-i', 'testsrc2=size=640x360:rate=30:duration=10', '-f', 'lavfi', '-i', 'sine=duration=10'],
    ...['-c:v', 'libx264', '-preset', 'ultrafast', '-qp', '0', '-g', '30', '-c:a', 'aac', '-f', 'flv', file],
  ]);
  return { file, mbps: (statSync(file).size * 8) / 10 / 1e6 };
}

/** Runs the publishers against a fresh server; this process's CPU and the bytes taken in. */
async function leg(o: { file: string; publishers: number; realTime: boolean }) {
  let bytes = 0;
  let open = 0;
  // Measured from the first publish the gate sees to the last one's end: spawning the
  // publishers (tens of ms of this process's CPU) is not ingest.
  let from: { cpu: NodeJS.CpuUsage; at: number } | undefined;
  let to: { cpu: NodeJS.CpuUsage; at: number } | undefined;
  const gate: PublishGate = async () => {
    from ??= { cpu: process.cpuUsage(), at: performance.now() };
    open += 1;
    const flv = new Writable({
      write(chunk: Buffer, _enc, cb) {
        bytes += chunk.length;
        cb();
      },
    });
    const ended = () => {
      open -= 1;
      if (open === 0) to = { cpu: process.cpuUsage(), at: performance.now() };
    };
    return { accepted: true, sink: { flv, ended } };
  };
  const log = createLogger({ level: 'silent' });
  const server = await startRtmpServer({ host: '127.0.0.1', port: 0, log, gate, idleTimeoutMs: 10_000 });
  const input = o.realTime ? ['-re', '-stream_loop', '-1'] : ['-stream_loop', '4'];
  const duration = o.realTime ? ['-t', String(SECONDS)] : [];
  const url = (i: number) => `rtmp://127.0.0.1:${server.port}/live/k${i}`;
  await Promise.all(
    Array.from({ length: o.publishers }, (_, i) =>
      run([...input, '-i', o.file, '-c', 'copy', ...duration, '-f', 'flv', url(i)]),
    ),
  );
  await server.close();
  if (!from || !to) throw new Error('no publish was measured');
  const seconds = (to.at - from.at) / 1000;
  const cpuSeconds = (to.cpu.user + to.cpu.system - from.cpu.user - from.cpu.system) / 1e6;
  const mbps = (bytes * 8) / seconds / 1e6;
  return {
    publishers: o.publishers,
    realTime: o.realTime,
    seconds: round(seconds),
    ingestMbps: round(mbps),
    serverCpuCores: round(cpuSeconds / seconds),
    cpuMsPerMbit: round((cpuSeconds * 1000) / ((bytes * 8) / 1e6)),
    coresPer100Mbps: round((cpuSeconds / seconds / mbps) * 100),
  };
}

const round = (x: number): number => Math.round(x * 1000) / 1000;

const dir = mkdtempSync(join(tmpdir(), 'bench-rtmp-'));
try {
  const src = await source(dir);
  const realTime = await leg({ file: src.file, publishers: PUBLISHERS, realTime: true });
  const flatOut = await leg({ file: src.file, publishers: 1, realTime: false });
  console.log(JSON.stringify({ sourceMbps: round(src.mbps), realTime, flatOut }, null, 2));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
