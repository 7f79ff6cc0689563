import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { publishTestSource } from '../helpers/live.ts';
import { freePort } from '../helpers/ports.ts';
import { type RestreamReceiver, startRtmpReceiver } from '../helpers/restream-receiver.ts';
import {
  blockingReload,
  createStream,
  type Delivery,
  SMALL_RUNG,
  startLiveService,
  startReceiver,
  variantUrls,
  waitMultivariant,
  WEBHOOK_SECRET,
} from './live-e2e.ts';

// Restreaming end to end (spec/API.md section D): a stream with two targets (its source to
// one RTMP receiver, its small rung to another: ffmpeg in listen mode, as another platform's
// ingest), published over RTMP for 14 s. Both receive within 3 s of stream.started; one is
// killed mid-stream: the other and the viewers go on, multistream.error comes, and
// multistream.connected again once it listens on the same port. The targets' urls (their keys)
// appear in no answer, webhook or log line.

const KEY_A = 'restream-secret-key-a';
const KEY_B = 'restream-secret-key-b';

interface TargetEvent {
  event: string;
  target: string;
  createdAt: number;
}

/** The deliveries' events of restream targets, by target name, in the order they were made. */
function targetEvents(got: Delivery[]): TargetEvent[] {
  return got
    .map((d) => JSON.parse(d.body) as { event: string; createdAt: number; payload: { target?: { name?: string } } })
    .filter((e) => e.event.startsWith('multistream.'))
    .map((e) => ({ event: e.event, target: e.payload.target?.name ?? '?', createdAt: e.createdAt }))
    .sort((x, y) => x.createdAt - y.createdAt);
}

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** When the receiver's file first had media in it (polled every 50 ms). */
async function firstMediaAt(r: RestreamReceiver, timeoutMs: number): Promise<number> {
  const end = Date.now() + timeoutMs;
  while ((await r.bytes()) === 0) {
    if (Date.now() > end) throw new Error(`no media on port ${r.port} within ${timeoutMs} ms`);
    await sleep(50);
  }
  return Date.now();
}

test('restreamed to two RTMP receivers; one killed and back: the other and the viewers go on', async () => {
  const rtmpPort = await freePort();
  const service = await startLiveService({ rtmpPort, srtPort: 0 });
  after(() => service.stop());
  const hooks = await startReceiver();
  after(() => hooks.server.close());
  const events = [
    'stream.started',
    'stream.idle',
    'multistream.connected',
    'multistream.error',
    'multistream.disconnected',
  ];
  const hook = await service.server.call('POST', '/api/webhook', {
    key: service.key,
    body: { name: 'restream', url: hooks.url, events, sharedSecret: WEBHOOK_SECRET },
  });
  assert.ok(hook.status === 200 || hook.status === 201, JSON.stringify(hook.body));
  const a = await startRtmpReceiver(await freePort(), { key: KEY_A });
  const portB = await freePort();
  let b = await startRtmpReceiver(portB, { key: KEY_B });
  const stream = await createStream(service, { name: 'restreamed', profiles: [SMALL_RUNG] });
  for (const [name, profile, url] of [
    ['a', 'source', a.url],
    ['b', SMALL_RUNG.name, b.url],
  ] as const) {
    const added = await service.server.call('POST', `/api/stream/${stream.id}/create-multistream-target`, {
      key: service.key,
      body: { profile, spec: { name, url } },
    });
    assert.equal(added.status, 204, JSON.stringify(added.body));
  }
  const read = await service.server.call('GET', `/api/stream/${stream.id}`, { key: service.key });
  assert.equal(JSON.stringify(read.body).includes('restream-secret-key'), false, 'no target url in the stream');

  const publish = await publishTestSource({
    url: `rtmp://127.0.0.1:${rtmpPort}/live/${stream.streamKey}`,
    protocol: 'rtmp',
    seconds: 14,
  });
  after(() => publish.stop());
  const [gotA, gotB] = [firstMediaAt(a, 10_000), firstMediaAt(b, 10_000)];
  await until('stream.started', () => hooks.got.some((d) => d.event === 'stream.started'), 10_000);
  const started = JSON.parse(hooks.got.find((d) => d.event === 'stream.started')?.body ?? '{}') as {
    createdAt: number;
  };
  const lags = [(await gotA) - started.createdAt, (await gotB) - started.createdAt];
  console.log(`media at the receivers ${lags.map((ms) => `${ms} ms`).join(' and ')} after stream.started`);
  for (const lag of lags) assert.ok(lag <= 3000, `a receiver got media ${lag} ms after stream.started`);

  // One target dies: the other goes on, and so do the viewers.
  b.kill();
  const aBefore = await a.bytes();
  const base = `${service.server.url}/media/live/${stream.playbackId}/`;
  const variants = variantUrls(await waitMultivariant(`${base}index.m3u8`, 5000), base);
  for (const v of variants) await blockingReload(v);
  await until(
    'multistream.error of b',
    () => targetEvents(hooks.got).some((e) => e.event === 'multistream.error'),
    8000,
  );
  assert.ok((await a.bytes()) > aBefore, 'the other receiver kept receiving');

  // It comes back on the same port: the pusher's retry finds it.
  b = await startRtmpReceiver(portB, { key: KEY_B });
  await until('b connected again', () => targetEvents(hooks.got).filter((e) => e.target === 'b').length >= 3, 10_000);
  await b.receiving({ minBytes: 1, timeoutMs: 5000 });
  const metrics = await (await fetch(`${service.server.url}/metrics`)).text();
  const failures = Number(/^mediaplane_live_restream_failures_total (\d+)/m.exec(metrics)?.[1] ?? 0);
  assert.ok(failures >= 1, `${failures} restream failures counted on /metrics`);

  await publish.exited;
  await until(
    'multistream.disconnected',
    () => targetEvents(hooks.got).filter((e) => e.event === 'multistream.disconnected').length >= 2,
    15_000,
  );
  const byTarget = (name: string) =>
    targetEvents(hooks.got)
      .filter((e) => e.target === name)
      .map((e) => e.event);
  assert.deepEqual(byTarget('a'), ['multistream.connected', 'multistream.disconnected']);
  assert.deepEqual(byTarget('b'), [
    'multistream.connected',
    'multistream.error',
    'multistream.connected',
    'multistream.disconnected',
  ]);
  for (const d of hooks.got) {
    assert.ok(d.signed, `${d.event} signed`);
    assert.equal(d.body.includes('restream-secret-key'), false, `no target url in ${d.event}`);
  }
  assert.equal(service.server.logs.text.includes('restream-secret-key'), false, 'no target url in the log');
});
