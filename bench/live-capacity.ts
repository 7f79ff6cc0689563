// bench/live.ts's capacity leg: how many 720p30 streams with the default ladder this host holds
// in real time. Streams of a recorded source are added one at a time until one falls behind: a
// stream holds when its 720p0 rendition gained at least 0.9 segments a second over the window
// and GET /api/stream says it is healthy with no issues.
import { loadavg } from 'node:os';
import {
  type BenchStream,
  createStream,
  fetchStream,
  type LiveService,
  liveUrl,
  newestSegment,
  publishFile,
  rtmpUrl,
  TIMING,
  waitIdle,
  waitLive,
} from './live-service.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg()[0]?.toFixed(1);

/** Streams added one at a time until one falls behind; the count held goes to `o.summary`. */
export async function capacityLeg(
  svc: LiveService,
  src: { file: string },
  o: { maxStreams: number; window: number; summary: string[] },
): Promise<void> {
  const max = o.maxStreams;
  console.log(`\n## 720p30 streams with the default ladder (up to ${max}, ${o.window} s windows, load ${load()})`);
  const streams: BenchStream[] = [];
  const feeders: ReturnType<typeof publishFile>[] = [];
  let held = 0;
  try {
    for (let k = 1; k <= max; k++) {
      const s = await createStream(svc, `capacity ${k}`);
      streams.push(s);
      feeders.push(publishFile(src.file, rtmpUrl(svc, s), 3600));
      await waitLive(svc, s, 60_000);
      await sleep(8000);
      const urls = streams.map((x) => liveUrl(svc, x, '720p0'));
      const m0 = await Promise.all(urls.map(newestSegment));
      await sleep(o.window * 1000);
      const m1 = await Promise.all(urls.map(newestSegment));
      const states = await Promise.all(streams.map((x) => fetchStream(svc, x)));
      const rates = m0.map((a, i) => ((m1[i] ?? Number.NaN) - (a ?? Number.NaN)) / (o.window / TIMING.segmentSecs));
      const ok = rates.every((r) => r >= 0.9) && states.every((st) => st.isHealthy && st.issues.length === 0);
      console.log(
        `${k} streams: 720p0 segments per second ${rates.map((r) => (Number.isFinite(r) ? r.toFixed(2) : 'gone')).join(', ')}; ` +
          `healthy ${states.map((st) => st.isHealthy).join(', ')}; issues ${JSON.stringify(states.flatMap((st) => st.issues))}; load ${load()}`,
      );
      if (!ok) break;
      held = k;
    }
  } finally {
    await Promise.all(feeders.map((f) => f.stop()));
    await Promise.all(streams.map((s) => waitIdle(svc, s).catch(() => undefined)));
  }
  o.summary.push(`| 720p30 streams with a 4-rung ladder in real time on 2 cores | ${held} | (reported) |`);
}
