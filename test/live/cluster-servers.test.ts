// Several nodes in one process: two API servers on one PostgreSQL with a cluster secret, node
// A with RTMP ingest, node B without. A stream published to A is played through B (B finds A
// through live_nodes and fetches under /internal/live/): its viewers' blocking reloads and
// hinted parts reach A once per distinct URL however many viewers ask, as B's
// mediaplane_live_upstream_requests_total shows; hls.js in Chromium plays it through B; the
// secret is in no log line of either; and a terminate asked of B cuts the publisher off on A.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { openChromium } from '../helpers/browser.ts';
import { publishTestSource, type TestPublish, watchLatency } from '../helpers/live.ts';
import { freePort } from '../helpers/ports.ts';
import { databaseFor, databaseKinds, startTestServer, type TestServer } from '../helpers/server.ts';

const postgres = (await databaseKinds()).find((k) => k.kind === 'postgres');
const VIEWERS = 8;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SECRET = randomBytes(24).toString('hex');

/** The count of B's upstream requests on its /metrics. */
async function upstreamRequests(node: TestServer): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  const m = /^mediaplane_live_upstream_requests_total (\d+)/m.exec(text);
  assert.ok(m, 'the metric is on /metrics');
  return Number(m[1]);
}

/**
 * A low-latency viewer as hls.js is one: the hinted part and the blocking reload for it, again
 * and again, until `until`; every URL it asked joins `asked`.
 */
async function viewer(playlist: string, o: { until: number; asked: Set<string> }): Promise<number> {
  const base = playlist.replace(/index\.m3u8$/, '');
  let text = await (await fetch(playlist)).text();
  let parts = 0;
  while (Date.now() < o.until) {
    const hint = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="(\d+)\.(\d+)\.m4s"/.exec(text);
    if (!hint) throw new Error(`no preload hint in ${text}`);
    const part = `${base}${hint[1]}.${hint[2]}.m4s`;
    const reload = `${playlist}?_HLS_msn=${hint[1]}&_HLS_part=${hint[2]}`;
    o.asked.add(part).add(reload);
    const [p, r] = await Promise.all([fetch(part), fetch(reload)]);
    if (p.ok) parts++;
    await p.arrayBuffer();
    text = r.ok ? await r.text() : await (await fetch(playlist)).text();
  }
  return parts;
}

describe('a stream played through a node that does not hold it', { skip: postgres?.skip ?? 'no PostgreSQL' }, () => {
  let a: TestServer;
  let b: TestServer;
  let publish: TestPublish | undefined;
  let browser: Browser | string;
  let playbackId = '';

  before(async () => {
    const databaseUrl = await databaseFor('postgres');
    a = await startTestServer({
      databaseUrl,
      roles: { api: true, worker: false, ingest: true },
      settings: { clusterSecret: SECRET, rtmpPort: await freePort(), liveCpuCapacity: 64 },
    });
    b = await startTestServer({
      databaseUrl,
      roles: { api: true, worker: false },
      settings: { clusterSecret: SECRET },
    });
    browser = await openChromium();
  });
  after(async () => {
    if (browser && typeof browser !== 'string') await browser.close();
    await publish?.stop();
    await b?.stop();
    await a?.stop();
  });

  it('asks the holder once per distinct URL however many viewers wait, and never logs the secret', async (t) => {
    const key = await a.key('alice');
    const stream = (await a.call('POST', '/api/stream', { key, body: { name: 'two nodes', profiles: [] } })).body;
    const rtmpPort = a.running.core.config.rtmpPort;
    publish = await publishTestSource({
      url: `rtmp://127.0.0.1:${rtmpPort}/live/${stream.streamKey}`,
      protocol: 'rtmp',
      seconds: 15,
      width: 320,
      height: 240,
      fps: 15,
    });
    playbackId = stream.playbackId;
    const playlist = `${b.url}/media/live/${stream.playbackId}/source/index.m3u8`;
    for (let i = 0; ; i++) {
      const res = await fetch(playlist);
      await res.arrayBuffer();
      if (res.ok) break;
      assert.ok(i < 120, `node B never served the stream: ${res.status}\n${a.logs.text.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const before = await upstreamRequests(b);
    const asked = new Set<string>();
    const until = Date.now() + 3000;
    const parts = await Promise.all(Array.from({ length: VIEWERS }, () => viewer(playlist, { until, asked })));
    const upstream = (await upstreamRequests(b)) - before;
    // Each viewer starts with a plain playlist request (one each at most) besides what it shares.
    assert.ok(
      upstream <= asked.size + VIEWERS,
      `${upstream} upstream requests for ${asked.size} distinct URLs asked by ${VIEWERS} viewers`,
    );
    assert.ok(Math.min(...parts) > 0, `every viewer got parts: ${parts.join(', ')}`);
    t.diagnostic(`${upstream} upstream requests for ${asked.size} distinct URLs; parts per viewer ${parts.join(', ')}`);
    const direct = await fetch(`${a.url}/internal/live/${stream.playbackId}/source/index.m3u8`);
    assert.equal(direct.status, 401, 'the internal routes need the secret');
    await direct.arrayBuffer();
    for (const node of [a, b]) assert.ok(!node.logs.text.includes(SECRET), 'the cluster secret is in no log line');
  });

  it('plays in Chromium with hls.js through the node that does not hold it', async (t) => {
    if (typeof browser === 'string') return t.skip(browser);
    assert.ok(publish);
    const report = await watchLatency(browser, {
      url: `${b.url}/media/live/${playbackId}/index.m3u8`,
      lowLatency: true,
      seconds: 2,
      source: publish,
    });
    assert.ok(report.played && report.samples.length > 10, `${report.error ?? ''} ${report.log.join('\n')}`);
    t.diagnostic(
      `through node B: ${report.samples.length} frames, glass-to-glass p50 ${Math.round(report.p50)} ms, ${report.stalls.length} stalls`,
    );
  });

  it('cuts the publisher off on the node holding the stream when another node is asked to terminate it', async () => {
    const key = await a.key('alice');
    const stream = (await a.call('GET', '/api/stream', { key })).body.find(
      (s: { name: string }) => s.name === 'two nodes',
    );
    assert.ok(publish && stream);
    const terminated = await b.call('DELETE', `/api/stream/${stream.id}/terminate`, { key });
    assert.equal(terminated.status, 204, JSON.stringify(terminated.body));
    const exited = await Promise.race([publish.exited.then(() => true), sleep(10_000).then(() => false)]);
    assert.ok(exited, 'the publisher was cut off');
    const again = await b.call('DELETE', `/api/stream/${stream.id}/terminate`, { key });
    assert.equal(again.status, 409, 'nothing left to cut off');
  });
});
