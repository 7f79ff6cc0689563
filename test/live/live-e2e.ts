import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import type { Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { after } from 'node:test';
import type { Browser } from 'playwright-core';
import type { Profile } from '../../src/live/index.ts';
import type { StartedRoles } from '../../src/main.ts';
import { openChromium } from '../helpers/browser.ts';
import { publishTestSource, type TestPublish } from '../helpers/live.ts';
import { freePort, freeUdpPort } from '../helpers/ports.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// What the live end-to-end tests (live-*.test.ts) share: a service with live ingest on ports
// the test picked, a stream made through the API, a signed webhook receiver, and the reads a
// player makes of /media/live/.

export const WEBHOOK_SECRET = 'live-e2e-webhook-secret';

/** A small rung (the suite's ladders stay cheap): 284x160 at the source's frame rate. */
export const SMALL_RUNG: Profile = { name: '160p0', width: 284, height: 160, bitrate: 200_000, fps: 0 };

export interface Delivery {
  event: string;
  stream: { id: string; isActive: boolean; streamKey?: string };
  signed: boolean;
  body: string;
}

/** A webhook receiver on port 0 that checks each delivery's Livepeer-Signature against the shared secret. */
export function startReceiver(): Promise<{ url: string; got: Delivery[]; server: Server }> {
  return startWebhookReceiver((req, body): Delivery => {
    const header = String(req.headers['livepeer-signature'] ?? '');
    const v1 = /v1=([0-9a-f]+)/.exec(header)?.[1];
    const signed = v1 === createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex');
    const envelope = JSON.parse(body) as { event: string; payload: { stream: Delivery['stream'] } };
    return { event: envelope.event, stream: envelope.payload.stream, signed, body };
  });
}

export interface LiveService {
  server: TestServer;
  key: string;
  live: NonNullable<StartedRoles['live']>;
  stop(): Promise<void>;
}

/** The service with the api and ingest roles (no worker), ingest on the ports given. */
export async function startLiveService(settings: Record<string, unknown>): Promise<LiveService> {
  const server = await startTestServer({ settings, roles: { api: true, worker: false, ingest: true } });
  const live = server.running.live;
  assert.ok(live, 'the ingest role builds the live runtime');
  return { server, key: await server.key('live-e2e'), live, stop: () => server.stop() };
}

export interface CreatedStream {
  id: string;
  streamKey: string;
  playbackId: string;
}

export async function createStream(
  s: LiveService,
  body: { name: string; profiles?: Profile[] | null; suspended?: boolean },
): Promise<CreatedStream> {
  const made = await s.server.call('POST', '/api/stream', { key: s.key, body });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  return made.body as CreatedStream;
}

export async function subscribe(s: LiveService, url: string): Promise<void> {
  const hook = await s.server.call('POST', '/api/webhook', {
    key: s.key,
    body: { name: 'live', url, events: ['stream.started', 'stream.idle'], sharedSecret: WEBHOOK_SECRET },
  });
  assert.ok(hook.status === 200 || hook.status === 201, JSON.stringify(hook.body));
}

/** GETs a URL of the service; the text and the status. */
export async function get(url: string, signal?: AbortSignal): Promise<{ status: number; text: string; ms: number }> {
  const t0 = Date.now();
  const res = await fetch(url, signal ? { signal } : {});
  return { status: res.status, text: await res.text(), ms: Date.now() - t0 };
}

/**
 * Whether the ladder under `base` (…/media/live/{playbackId}/) says it ended: its ended
 * playlists stay served a while after the publish, each with EXT-X-ENDLIST.
 */
export async function ladderEnded(base: string): Promise<boolean> {
  const multivariant = await get(`${base}index.m3u8`);
  if (multivariant.status !== 200) return false;
  const playlists = await Promise.all(variantUrls(multivariant.text, base).map((u) => get(u)));
  return playlists.length > 0 && playlists.every((p) => p.status === 200 && p.text.includes('#EXT-X-ENDLIST'));
}

/** Polls the multivariant playlist until it answers 200 (every rendition has its first part). */
export async function waitMultivariant(url: string, timeoutMs: number): Promise<string> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await get(url);
    if (res.status === 200) return res.text;
    if (Date.now() > until)
      throw new Error(`no multivariant playlist within ${timeoutMs} ms: ${res.status} ${res.text}`);
    await sleep(100);
  }
}

/** The media playlists a multivariant playlist lists, as absolute URLs. */
export function variantUrls(multivariant: string, base: string): string[] {
  return multivariant
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((u) => new URL(u, base).href);
}

/**
 * A blocking playlist reload (RFC 8216bis 6.2.5.2) for the part the playlist hints: answered
 * once that part exists, with the part listed. Returns how long it was held.
 */
export async function blockingReload(playlistUrl: string): Promise<number> {
  const first = await get(playlistUrl);
  assert.equal(first.status, 200, first.text);
  assert.match(first.text, /#EXT-X-PART:DURATION=[\d.]+,URI="\d+\.\d+\.m4s"/);
  assert.match(first.text, /#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES/);
  const hint = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="(\d+)\.(\d+)\.m4s"/.exec(first.text);
  assert.ok(hint, `no preload hint in\n${first.text}`);
  const [, msn, part] = hint;
  const held = await get(`${playlistUrl}?_HLS_msn=${msn}&_HLS_part=${part}`);
  assert.equal(held.status, 200, held.text);
  assert.ok(held.text.includes(`URI="${msn}.${part}.m4s"`), `the hinted part ${msn}.${part} is listed once answered`);
  const file = await get(new URL(`${msn}.${part}.m4s`, playlistUrl).href);
  assert.equal(file.status, 200);
  return held.ms;
}

/** Waits for `n` deliveries of the receiver. */
export async function deliveries(got: Delivery[], n: number, timeoutMs: number): Promise<Delivery[]> {
  const until = Date.now() + timeoutMs;
  while (got.length < n) {
    if (Date.now() > until) throw new Error(`${got.length} of ${n} webhook deliveries: ${got.map((d) => d.event)}`);
    await sleep(100);
  }
  return got;
}

/** The counter of ladder processes on GET /metrics. */
export async function laddersStarted(base: string): Promise<number> {
  const text = (await get(`${base}/metrics`)).text;
  const m = /^mediaplane_live_ladders_started_total (\d+)/m.exec(text);
  assert.ok(m, 'mediaplane_live_ladders_started_total on /metrics');
  return Number(m[1]);
}

/** One ingest's end-to-end run, publishing: what openEndToEnd set up. */
export interface EndToEnd {
  browser: Browser;
  service: LiveService;
  got: Delivery[];
  stream: CreatedStream;
  /** …/media/live/{playbackId}/ */
  base: string;
  publish: TestPublish;
  multivariant: string;
  /** The media playlists of the multivariant playlist, absolute. */
  variants: string[];
  /** How long after the publisher started the multivariant playlist answered. */
  firstPartMs: number;
}

/**
 * The opening the RTMP and SRT end-to-end tests share: Chromium, the service with that one
 * ingest on a free port, a subscribed webhook receiver, a stream with one small rung, ffmpeg
 * publishing the frame-numbered 320x240 source for `seconds`, and the multivariant playlist
 * once every rendition (the small rung and the source) has its first part. Everything is
 * closed after the test. A string (why) when there is no Chromium: the test skips.
 */
export async function openEndToEnd(protocol: 'rtmp' | 'srt', seconds: number): Promise<EndToEnd | string> {
  const browser = await openChromium();
  if (typeof browser === 'string') return browser;
  after(() => browser.close());
  const port = protocol === 'rtmp' ? await freePort() : await freeUdpPort();
  const service = await startLiveService(protocol === 'rtmp' ? { rtmpPort: port } : { srtPort: port });
  after(() => service.stop());
  const receiver = await startReceiver();
  after(() => receiver.server.close());
  await subscribe(service, receiver.url);
  const stream = await createStream(service, { name: `${protocol} end to end`, profiles: [SMALL_RUNG] });
  const base = `${service.server.url}/media/live/${stream.playbackId}/`;
  const url =
    protocol === 'rtmp'
      ? `rtmp://127.0.0.1:${port}/live/${stream.streamKey}`
      : `srt://127.0.0.1:${port}?streamid=${stream.streamKey}`;
  const publish = await publishTestSource({ url, protocol, seconds, width: 320, height: 240, fps: 30 });
  after(() => publish.stop());
  const t0 = Date.now();
  const multivariant = await waitMultivariant(`${base}index.m3u8`, 10_000);
  const firstPartMs = Date.now() - t0;
  const variants = variantUrls(multivariant, base);
  assert.deepEqual(
    variants.map((u) => u.slice(base.length)),
    ['160p0/index.m3u8', 'source/index.m3u8'],
  );
  return { browser, service, got: receiver.got, stream, base, publish, multivariant, variants, firstPartMs };
}

/**
 * Ends an end-to-end run's publish and checks what follows: one ladder ran, stream.started
 * then stream.idle arrived signed and without the stream key, the stream reads idle, and
 * no log line holds the key. The stream as GET answers it once idle.
 */
export async function endEndToEnd(run: EndToEnd): Promise<{ sourceSegments: number; transcodedSegments: number }> {
  const { service, stream } = run;
  assert.equal(await laddersStarted(service.server.url), 1);
  await run.publish.stop();
  const got = await deliveries(run.got, 2, 15_000);
  assert.deepEqual(
    got.map((d) => [d.event, d.stream.id, d.stream.isActive, d.signed]),
    [
      ['stream.started', stream.id, true, true],
      ['stream.idle', stream.id, false, true],
    ],
  );
  for (const d of got) assert.ok(!d.body.includes(stream.streamKey), 'no stream key in a webhook');
  const idle = await service.server.call('GET', `/api/stream/${stream.id}`, { key: service.key });
  assert.equal(idle.body.isActive, false);
  assert.ok(!service.server.logs.text.includes(stream.streamKey), 'the stream key was logged');
  return idle.body;
}
