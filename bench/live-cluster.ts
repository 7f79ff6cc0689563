// Viewers of a live stream on a second node: what the node holding the stream is asked for
// them. Not part of `npm test`.
//   node bench/live-cluster.ts [--viewers 50,200] [--window 20]
// Two `mediaplane` processes on one PostgreSQL (test/helpers/postgres.ts) with the built-in
// store in an S3-protocol bucket (s3rver behind test/helpers/s3.ts's signature-checking
// proxy) and a shared cluster secret: `ingest` (node A, RTMP on a free port) and `api` (node B,
// no ingest). One 426x240p30 stream (the source alone) published to A; `--viewers` loopback
// LL-HLS viewers (bench/live-viewers.ts: the hinted part and the blocking playlist reload, as
// hls.js does) watch it through B. Over `--window` s, B's
// mediaplane_live_upstream_requests_total against the distinct URLs its viewers asked for
// (each part once, each blocking reload once). Target: one upstream request per distinct URL,
// so one per part (and one per playlist reload) per node, whatever the number of viewers.

import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { publishTestSource } from '../test/helpers/live.ts';
import { stopTestPostgres, testPostgres } from '../test/helpers/postgres.ts';
import { startS3, storeSettings } from '../test/helpers/s3.ts';
import { createStream, type LiveService, liveUrl, rtmpUrl, startLiveService, waitLive } from './live-service.ts';
import { type ViewerCounts, viewer } from './live-viewers.ts';

const { values: opt } = parseArgs({
  options: {
    viewers: { type: 'string', default: '50,200' },
    window: { type: 'string', default: '20' },
  },
});
const COUNTS = opt.viewers.split(',').map(Number);
const WINDOW = Number(opt.window);
const PART_SECS = 0.25;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg()[0]?.toFixed(1);

async function upstreamRequests(node: LiveService): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  const m = /^mediaplane_live_upstream_requests_total (\d+)/m.exec(text);
  if (!m) throw new Error('no mediaplane_live_upstream_requests_total on the second node: is the cluster secret set?');
  return Number(m[1]);
}

/**
 * What node A answered under /internal/live/ (its HTTP metric by route): media playlists
 * (blocking reloads among them) and files (init segments, parts, segments).
 */
async function internalAnswers(node: LiveService): Promise<{ playlists: number; files: number }> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  const counts = { playlists: 0, files: 0 };
  const line = /^mediaplane_http_request_duration_seconds_count\{[^}]*route="\/internal\/live\/([^"]*)"[^}]*\} (\d+)/gm;
  for (const m of text.matchAll(line)) {
    const n = Number(m[2]);
    if (m[1]?.endsWith(':rendition/index.m3u8')) counts.playlists += n;
    else if (m[1]?.endsWith(':rendition/:file')) counts.files += n;
  }
  return counts;
}

/** The settings both nodes share, as environment variables. */
async function sharedEnv(): Promise<{ env: Record<string, string>; close(): Promise<void> }> {
  const pg = await testPostgres();
  if (!pg) throw new Error('no PostgreSQL server (apt-get install postgresql, or MEDIAPLANE_TEST_DATABASE_URL)');
  const s3 = await startS3();
  const store = storeSettings(s3, await s3.createBucket('bench-live-cluster'));
  return {
    env: {
      DATABASE_URL: await pg.createDatabase(),
      MEDIAPLANE_STORE_URL: store.storeUrl,
      MEDIAPLANE_STORE_ENDPOINT: store.storeEndpoint,
      MEDIAPLANE_STORE_REGION: store.storeRegion,
      MEDIAPLANE_STORE_ACCESS_KEY_ID: store.storeAccessKeyId,
      MEDIAPLANE_STORE_SECRET_ACCESS_KEY: store.storeSecretAccessKey,
      MEDIAPLANE_CLUSTER_SECRET: randomBytes(24).toString('hex'),
      MEDIAPLANE_LIVE_CPU_CAPACITY: '64',
    },
    async close() {
      await s3.close();
      await stopTestPostgres();
    },
  };
}

interface Round {
  viewers: number;
  upstream: number;
  urls: number;
  parts: number;
  partsPerViewer: number;
  cores: number;
  errors: number;
  /** Node A's answers under /internal/live/ over the window. */
  answered: { playlists: number; files: number };
}

/** `n` viewers of `playlist` on node B for WINDOW s, after 3 s of warming up. */
async function round(a: LiveService, b: LiveService, playlist: string, n: number): Promise<Round> {
  const stop = new AbortController();
  const agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  const counts: ViewerCounts = { playlists: 0, parts: 0, errors: 0, seen: new Set() };
  const loops = Array.from({ length: n }, () => viewer(playlist, { agent, stop: stop.signal, counts }));
  try {
    await sleep(3000);
    const seen0 = new Set(counts.seen);
    const [u0, c0, k0, e0] = [await upstreamRequests(b), b.cpu().self, counts.parts, counts.errors];
    const a0 = await internalAnswers(a);
    await sleep(WINDOW * 1000);
    const [u1, c1] = [await upstreamRequests(b), b.cpu().self];
    const a1 = await internalAnswers(a);
    const fresh = [...(counts.seen ?? [])].filter((u) => !seen0.has(u));
    return {
      viewers: n,
      upstream: u1 - u0,
      urls: fresh.length,
      parts: fresh.filter((u) => u.endsWith('.m4s')).length,
      partsPerViewer: (counts.parts - k0) / n / WINDOW,
      cores: (c1 - c0) / WINDOW,
      errors: counts.errors - e0,
      answered: { playlists: a1.playlists - a0.playlists, files: a1.files - a0.files },
    };
  } finally {
    stop.abort();
    await Promise.all(loops);
    agent.destroy();
  }
}

function report(r: Round): string {
  return (
    `| ${r.viewers} viewers on node B | ${r.upstream} upstream requests for ${r.urls} distinct URLs (${r.parts} parts): ` +
    `${(r.upstream / r.urls).toFixed(2)} a URL, ${(r.upstream / r.parts).toFixed(2)} a part; ` +
    `node A answered ${r.answered.files} files and ${r.answered.playlists} playlists; ` +
    `${r.partsPerViewer.toFixed(2)} parts/s a viewer (${1 / PART_SECS} at full rate), ${r.errors} errors; node B ${r.cores.toFixed(2)} cores | 1 a URL |`
  );
}

const shared = await sharedEnv();
const nodes: LiveService[] = [];
let publish: Awaited<ReturnType<typeof publishTestSource>> | undefined;
const summary: string[] = [];
try {
  const a = await startLiveService(shared.env, 'ingest');
  nodes.push(a);
  const b = await startLiveService({ ...shared.env, MEDIAPLANE_RTMP_PORT: '0' }, 'api');
  nodes.push(b);
  console.log(`node A (ingest) ${a.url}, node B (api) ${b.url}; load ${load()}`);
  const s = await createStream(a, 'cluster viewers', []);
  const seconds = COUNTS.length * (WINDOW + 10) + 30;
  publish = await publishTestSource({
    url: rtmpUrl(a, s),
    protocol: 'rtmp',
    seconds,
    width: 426,
    height: 240,
    fps: 30,
  });
  await waitLive(a, s);
  await waitLive(b, s, 15_000);
  for (const n of COUNTS) {
    const r = await round(a, b, liveUrl(b, s, 'source'), n);
    const line = report(r);
    console.log(`${line} (load ${load()})`);
    summary.push(line);
  }
  for (const node of nodes)
    for (const line of node.errors().slice(-3)) console.log(`service error: ${line.slice(0, 800)}`);
} finally {
  await publish?.stop();
  for (const node of nodes.reverse()) await node.stop();
  await shared.close();
}
console.log(`\n| figure | measured (load ${load()}) | target |\n| --- | --- | --- |\n${summary.join('\n')}`);
