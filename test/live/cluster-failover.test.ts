// Several nodes, as an operator runs them: two `mediaplane ingest` processes on one
// PostgreSQL with the built-in store in an S3-protocol bucket and a shared cluster secret. A
// recorded stream is published to node A and watched through node B (B fetches A's ladder);
// A is SIGKILLed mid-stream and the publisher comes back to B: the same session goes on, the
// viewer on B gets new parts within 15 s of the kill, and once the window has passed the
// session's recording (made by B's worker) holds every frame up to the last one the viewer saw
// before the kill (the source's frames carry their numbers: test/helpers/live.ts).

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Accounts } from '../../src/accounts/index.ts';
import { type Db, openDb } from '../../src/db/index.ts';
import { readFrameNumbers } from '../helpers/frame-numbers.ts';
import { publishTestSource, type TestPublish } from '../helpers/live.ts';
import { type LiveNodeProcess, startLiveNode } from '../helpers/live-node.ts';
import { testPostgres } from '../helpers/postgres.ts';
import { startS3, storeSettings, type TestS3 } from '../helpers/s3.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SOURCE = { width: 320, height: 240, fps: 15 } as const;
const pg = await testPostgres();

/** One part a viewer fetched: when, and its init segment. */
interface Seen {
  wall: number;
  /** {msn}.{part}.m4s */
  part: string;
  init: Buffer;
}

/**
 * A viewer polling a media playlist every 250 ms and fetching every part of its newest segment
 * (and their init) once, retrying through errors, as a player that recovers would.
 */
function follow(playlistUrl: string) {
  const seen: Seen[] = [];
  const parts = new Map<string, Buffer>();
  const inits = new Map<string, Buffer>();
  let stopped = false;
  const base = playlistUrl.replace(/index\.m3u8$/, '');
  const get = async (uri: string) => {
    const res = await fetch(base + uri);
    return res.ok ? Buffer.from(await res.arrayBuffer()) : undefined;
  };
  const step = async () => {
    const res = await fetch(playlistUrl);
    if (!res.ok) return void (await res.arrayBuffer());
    const listed: { map: string; part: string }[] = [];
    let map = '';
    for (const line of (await res.text()).split('\n')) {
      map = /#EXT-X-MAP:URI="([^"]+)"/.exec(line)?.[1] ?? map;
      const part = /#EXT-X-PART:.*URI="([^"]+)"/.exec(line)?.[1];
      if (part) listed.push({ map, part });
    }
    const newest = listed.at(-1)?.part.split('.')[0];
    for (const { map, part } of listed.filter((l) => l.part.startsWith(`${newest}.`))) {
      if (parts.has(part)) continue;
      const init = inits.get(map) ?? (await get(map));
      const bytes = await get(part);
      if (!init || !bytes) return;
      inits.set(map, init);
      parts.set(part, bytes);
      seen.push({ wall: Date.now(), part, init });
    }
  };
  const loop = (async () => {
    while (!stopped) {
      await step().catch(() => undefined);
      await sleep(250);
    }
  })();
  return {
    seen,
    /** A part's segment from its first part up to it, with its init: a file ffmpeg decodes. */
    decodable(s: Seen): Buffer {
      const [msn, last] = s.part.split('.').map(Number) as [number, number];
      const upTo = Array.from({ length: last + 1 }, (_, i) => parts.get(`${msn}.${i}.m4s`));
      assert.ok(
        upTo.every((b) => b !== undefined),
        `the viewer has every part of segment ${msn} up to ${s.part}`,
      );
      return Buffer.concat([s.init, ...(upTo as Buffer[])]);
    },
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

/** The frame numbers drawn into the pictures of an MP4 (or fMP4) file, in order (unreadable ones left out). */
async function frameNumbers(file: string): Promise<number[]> {
  return (await readFrameNumbers(file)).filter((n) => n !== undefined);
}

/** Publishes to `url` again and again (a node refuses while the old holder's lease holds) until one is taken. */
async function publishUntilTaken(url: string, seconds: number, deadlineMs: number): Promise<TestPublish> {
  for (;;) {
    const publish = await publishTestSource({ url, protocol: 'rtmp', seconds, ...SOURCE });
    const refused = await Promise.race([publish.exited.then(() => true), sleep(3000).then(() => false)]);
    if (!refused) return publish;
    if (Date.now() > deadlineMs) throw new Error(`no node took the publish again: ${publish.stderr()}`);
    await sleep(500);
  }
}

describe('several nodes: a stream outlives the node that took it', { skip: pg ? false : 'no PostgreSQL' }, () => {
  let s3: TestS3;
  let env: Record<string, string>;
  let store: Record<string, string>;
  let db: Db;
  const nodes: LiveNodeProcess[] = [];
  const publishes: TestPublish[] = [];
  let key: string;
  const work = mkdtempSync(join(tmpdir(), 'mediaplane-failover-'));

  before(async () => {
    s3 = await startS3();
    const bucket = await s3.createBucket('cluster-failover');
    const settings = storeSettings(s3, bucket);
    const databaseUrl = (await pg?.createDatabase()) ?? '';
    store = {
      MEDIAPLANE_STORE_URL: settings.storeUrl,
      MEDIAPLANE_STORE_ENDPOINT: settings.storeEndpoint,
      MEDIAPLANE_STORE_REGION: settings.storeRegion,
      MEDIAPLANE_STORE_ACCESS_KEY_ID: settings.storeAccessKeyId,
      MEDIAPLANE_STORE_SECRET_ACCESS_KEY: settings.storeSecretAccessKey,
    };
    env = {
      DATABASE_URL: databaseUrl,
      ...store,
      MEDIAPLANE_CLUSTER_SECRET: randomBytes(24).toString('hex'),
      // Long enough for the lease to expire and the publisher to come back; short enough that the
      // session then ends and its recording is made within the test.
      MEDIAPLANE_LIVE_RECONNECT_SECS: '12',
      MEDIAPLANE_LIVE_CPU_CAPACITY: '64',
    };
    // B runs the worker too: it makes the recording.
    nodes.push(await startLiveNode(env, 'ingest'), await startLiveNode(env, 'start'));
    db = await openDb({ databaseUrl });
    key = (await new Accounts(db).createKey('alice')).key;
  });
  after(async () => {
    for (const p of publishes) await p.stop();
    for (const n of nodes) await n.stop();
    await db?.close();
    await s3?.close();
    rmSync(work, { recursive: true, force: true });
  });

  const call = async (node: LiveNodeProcess, method: string, path: string, body?: unknown) => {
    const res = await fetch(node.url + path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };

  it('continues the session on the other node: the viewer recovers and the recording keeps what was sent', async (t) => {
    const [a, b] = nodes as [LiveNodeProcess, LiveNodeProcess];
    const stream = await call(b, 'POST', '/api/stream', { name: 'failover', record: true, profiles: [] });
    const rtmp = (node: LiveNodeProcess) => `rtmp://127.0.0.1:${node.rtmpPort}/live/${stream.streamKey}`;
    publishes.push(await publishTestSource({ url: rtmp(a), protocol: 'rtmp', seconds: 15, ...SOURCE }));
    const playlist = `${b.url}/media/live/${stream.playbackId}/source/index.m3u8`;
    const viewer = follow(playlist);
    try {
      for (let i = 0; viewer.seen.length < 16; i++) {
        assert.ok(
          i < 300,
          `the viewer on node B got ${viewer.seen.length} parts in 75 s\n${a.output()}\n${b.output()}`,
        );
        await sleep(250);
      }
      const sessionBefore = await sessionsOf(stream.id);
      assert.equal(sessionBefore.length, 1, 'the publish opened a session');
      const upstream = /^mediaplane_live_upstream_requests_total (\d+)/m.exec(
        await (await fetch(`${b.url}/metrics`)).text(),
      );
      assert.ok(Number(upstream?.[1]) > 0, 'node B fetched the ladder from node A');
      await a.kill();
      const killedAt = Date.now();
      const lastSeen = viewer.seen.at(-1) as Seen;
      await publishes[0]?.stop();
      publishes.push(await publishUntilTaken(rtmp(b), 10, killedAt + 14_000));
      const recovered = async () => viewer.seen.find((s) => s.wall > killedAt);
      for (let i = 0; !(await recovered()) && i < 80; i++) await sleep(250);
      const back = await recovered();
      assert.ok(back, `the viewer got no part from node B within 20 s of the kill\n${b.output()}`);
      assert.ok(back.wall - killedAt < 15_000, `the viewer recovered ${back.wall - killedAt} ms after the kill`);
      await sleep(2000);
      await publishes[1]?.stop();

      assert.deepEqual(await sessionsOf(stream.id), sessionBefore, 'one session, the same one');
      const lastFile = join(work, 'last-seen.mp4');
      writeFileSync(lastFile, viewer.decodable(lastSeen));
      const lastFrame = (await frameNumbers(lastFile)).at(-1);
      assert.ok(lastFrame !== undefined && lastFrame > 0, 'the last part seen before the kill has numbered frames');
      const recorded = await recordedFrames(b, sessionBefore[0] as string);
      // The frames of the first publish come first; the second publish counts from 0 again.
      const drop = recorded.findIndex((n, i) => i > 0 && n < (recorded[i - 1] ?? 0));
      const first = new Set(drop === -1 ? recorded : recorded.slice(0, drop));
      const missing = Array.from({ length: lastFrame + 1 }, (_, n) => n).filter((n) => !first.has(n));
      assert.deepEqual(missing, [], `frames up to ${lastFrame} (the last seen before the kill) are all recorded`);
      t.diagnostic(
        `recovered ${back.wall - killedAt} ms after the kill; frames 0-${lastFrame} seen before it, ${first.size} of the first publish recorded`,
      );
    } finally {
      await viewer.stop();
    }
  });

  /** The ids of a stream's sessions, and which one the stream names as its current one. */
  async function sessionsOf(streamId: string): Promise<string[]> {
    const rows = await db.query<{ id: string; current: boolean }>(
      `SELECT ss.id, ss.id = s.session_id AS current FROM stream_sessions ss JOIN streams s ON s.id = ss.stream_id
        WHERE ss.stream_id = $1 ORDER BY ss.created_at`,
      [streamId],
    );
    assert.ok(rows.at(-1)?.current, "the newest session is the stream's current one");
    return rows.map((r) => r.id);
  }

  /** The session's recording, once ready: the frame numbers of its MP4 (mp4Url: the recorded source itself), in order. */
  async function recordedFrames(node: LiveNodeProcess, sessionId: string): Promise<number[]> {
    let session: { recordingStatus: string; mp4Url?: string } = { recordingStatus: 'none' };
    for (let i = 0; i < 600 && !['ready', 'failed'].includes(session.recordingStatus); i++) {
      await sleep(250);
      session = await call(node, 'GET', `/api/session/${sessionId}`);
    }
    assert.equal(session.recordingStatus, 'ready', `the recording is made\n${node.output()}`);
    assert.ok(session.mp4Url);
    const res = await fetch(new URL(session.mp4Url, node.url));
    assert.equal(res.status, 200);
    const dest = join(work, 'recording.mp4');
    writeFileSync(dest, Buffer.from(await res.arrayBuffer()));
    return frameNumbers(dest);
  }
});
