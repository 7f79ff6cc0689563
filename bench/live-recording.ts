// bench/live.ts's recording leg: what `record: true` adds to a live stream's CPU. The archive
// copies the source rendition's parts into the built-in store as they are made (no second
// encode), so its cost should be a small fraction of the ladder's: target under 5%. The archive
// rides along every session, recorded or not (live clips read it), so while live `record`
// itself should add nothing: the leg measures that difference, and the archive's own share is
// read from a CPU profile of the leg's service (BENCH_SERVICE_NODE_OPTIONS="--cpu-prof
// --cpu-prof-dir=DIR", then bench/cpu-profile.ts on the profile named after its pid).
//
// A service of its own with a reconnect window of an hour: the sessions stay `waiting` through
// the leg, so no recording is queued and no VOD encode runs while the CPU is counted. Three
// publishes of the same recorded FLV in real time: p0 without `record`, r1 with it, p1 without;
// each counts the service process's CPU and its reaped children's (the ladder's ffmpeg).

import { readdirSync, statSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { api, type LiveService, publishFile, rtmpUrl, startLiveService, waitIdle } from './live-service.ts';

interface RunCpu {
  /** The ladder's ffmpeg (reaped children), CPU s. */
  ladder: number;
  /** The service process itself, CPU s. */
  self: number;
  wall: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg()[0]?.toFixed(1);

/** Bytes of every file under `dir` whose path has a `live` folder in it (the archive's keys: live/<session>/...). */
function archivedBytes(dir: string): number {
  let total = 0;
  const walk = (d: string, inLive: boolean): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p, inLive || e.name === 'live');
      else if (inLive && e.isFile()) total += statSync(p).size;
    }
  };
  walk(dir, false);
  return total;
}

async function publishOnce(svc: LiveService, o: { flv: string; seconds: number; record: boolean }): Promise<RunCpu> {
  const s = await api(svc, 'POST', '/api/stream', { name: `recording leg ${o.record}`, record: o.record });
  const c0 = svc.cpu();
  const started = Date.now();
  const feeder = publishFile(o.flv, rtmpUrl(svc, s), o.seconds);
  await feeder.exited;
  await waitIdle(svc, s, 60_000);
  await sleep(1000);
  const c1 = svc.cpu();
  return { ladder: c1.children - c0.children, self: c1.self - c0.self, wall: (Date.now() - started) / 1000 };
}

export async function recordingLeg(o: { flv: string; seconds: number; summary: string[] }): Promise<void> {
  console.log(`\n## the recording's extra CPU (${o.seconds} s publishes, default ladder, load ${load()})`);
  const svc = await startLiveService({ MEDIAPLANE_LIVE_CPU_CAPACITY: '64', MEDIAPLANE_LIVE_RECONNECT_SECS: '3600' });
  try {
    const line = (name: string, r: RunCpu) =>
      console.log(
        `${name}: ladder ffmpeg ${r.ladder.toFixed(1)} CPU s, service process ${r.self.toFixed(1)} CPU s in ${r.wall.toFixed(1)} s (load ${load()})`,
      );
    const p0 = await publishOnce(svc, { ...o, record: false });
    line('p0, no record', p0);
    const r1 = await publishOnce(svc, { ...o, record: true });
    line('r1, record', r1);
    const p1 = await publishOnce(svc, { ...o, record: false });
    line('p1, no record', p1);
    const mean = (k: keyof RunCpu) => (p0[k] + p1[k]) / 2;
    const extraSelf = r1.self - mean('self');
    const extraLadder = r1.ladder - mean('ladder');
    const share = (extraSelf + extraLadder) / mean('ladder');
    // Every publish is archived (p0 and p1 too).
    const archived = archivedBytes(svc.dataDir);
    const source = statSync(o.flv).size;
    console.log(
      `recording's extra: service process ${extraSelf.toFixed(2)} CPU s, ladder ${extraLadder.toFixed(2)} CPU s: ` +
        `${(share * 100).toFixed(1)}% of the ladder's ${mean('ladder').toFixed(1)} CPU s; ` +
        `archived ${(archived / 1e6).toFixed(1)} MB in all for three publishes of a ${(source / 1e6).toFixed(1)} MB source FLV; service pid ${svc.pid}`,
    );
    o.summary.push(
      `| what record: true adds to a live stream's CPU | ${(share * 100).toFixed(1)}% of the ladder's (service process ${extraSelf >= 0 ? '+' : ''}${extraSelf.toFixed(2)} CPU s, ladder ${extraLadder >= 0 ? '+' : ''}${extraLadder.toFixed(2)} CPU s on ${mean('ladder').toFixed(1)}) | < 5% |`,
    );
  } finally {
    await svc.stop();
  }
}
