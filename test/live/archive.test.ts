// The live archive: a session's source rendition (a real LiveRendition fed real ffmpeg fMP4)
// written to the built-in store as it arrives, read back as one MP4 (all of it, or a wall-clock
// range from the keyframe before it), runs joined without encoding; a store that cannot keep
// up drops parts up to the next keyframe instead of growing; a bucket store keeps up.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type { Db } from '../../src/db/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { archivePlugin, archiveRetentionJob, LiveArchive } from '../../src/live/archive/index.ts';
import { ArchiveIndex } from '../../src/live/archive/archive-index.ts';
import { archiveInitKey, archivePartKey } from '../../src/live/archive/keys.ts';
import { ArchiveWriter } from '../../src/live/archive/writer.ts';
import { mainTrackFragment, readFragment, readInit } from '../../src/live/llhls/fmp4.ts';
import { LiveRendition } from '../../src/live/llhls/index.ts';
import type { RenditionTap, TappedPart } from '../../src/live/session-plugins.ts';
import type { StreamRecord } from '../../src/live/types.ts';
import { type BuiltinStore, createBuiltinStore, FolderStore } from '../../src/storage/builtin/index.ts';
import { startS3, storeSettings, type TestS3 } from '../helpers/s3.ts';
import { databaseKinds, openTestDb } from '../helpers/server.ts';
import { fmp4File, topLevelBoxes } from './llhls-source.ts';

const run = promisify(execFile);
const TIMING = { partTargetSecs: 0.25, segmentTargetSecs: 1, windowSecs: 30 };
const log = createLogger({ level: 'silent' });
const T0 = Date.UTC(2026, 0, 1, 12, 0, 30);
const PROJECT = '00000000-0000-4000-8000-000000000000';
/** Some bytes to store where the retention test needs objects. */
const THIS_FILE = fileURLToPath(import.meta.url);

/** A rendition whose clock advances by each part's media duration as it is fed: wall times as a live run has them. */
function clockedRendition(name: string): {
  rendition: LiveRendition;
  feed(file: Buffer): void;
  restart(gapMs: number): void;
} {
  let now = T0;
  const rendition = new LiveRendition({ name, timing: TIMING, now: () => now });
  return {
    rendition,
    feed(file) {
      const boxes = topLevelBoxes(file);
      const moovAt = boxes.findIndex((b) => b.type === 'moov');
      const info = readInit(Buffer.concat(boxes.slice(0, moovAt + 1).map((b) => b.bytes)));
      for (const box of boxes) {
        if (box.type === 'moof') {
          const main = mainTrackFragment(readFragment(box.bytes, info.tracks), info);
          const timescale = info.tracks.find((t) => t.trackId === main?.trackId)?.timescale ?? 1;
          now += ((main?.duration ?? 0) / timescale) * 1000;
        }
        rendition.write(box.bytes);
      }
    },
    restart(gapMs) {
      now += gapMs;
      rendition.restart();
    },
  };
}

function view(sessionId: string) {
  return { stream: {} as StreamRecord, sessionId, continued: false, log };
}

async function probeFile(file: string): Promise<{ duration: number; videoFrames: number; codecs: string[] }> {
  const { stdout } = await run('ffprobe', [
    ...['-v', 'error', '-count_frames', '-show_entries', 'stream=codec_name,nb_read_frames:format=duration'],
    ...['-of', 'json', file],
  ]);
  const out = JSON.parse(stdout) as {
    streams: { codec_name: string; nb_read_frames?: string }[];
    format: { duration: string };
  };
  const video = out.streams.find((s) => s.codec_name === 'h264');
  return {
    duration: Number(out.format.duration),
    videoFrames: Number(video?.nb_read_frames ?? 0),
    codecs: out.streams.map((s) => s.codec_name),
  };
}

describe('live archive', () => {
  let db: Db;
  let dir: string;
  let store: BuiltinStore;
  let s3: TestS3 | undefined;

  before(async () => {
    db = await openTestDb('embedded');
    dir = await mkdtemp(path.join(tmpdir(), 'live-archive-'));
    store = new FolderStore(path.join(dir, 'media'));
  });
  after(async () => {
    await db.close();
    await s3?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('archives the source rendition of two runs and gives it back as one MP4, whole or a range', async () => {
    const sessionId = randomUUID();
    const plugin = archivePlugin({ store, db, clipSecs: 300 })(view(sessionId));
    assert.ok(plugin?.rendition);
    const low = clockedRendition('240p0');
    const source = clockedRendition('source');
    // The ladder offers its rungs first, the source last: the source is the one archived.
    plugin.rendition('240p0', (t) => low.rendition.tap(t));
    plugin.rendition('source', (t) => source.rendition.tap(t));
    low.feed(await fmp4File(3));
    source.feed(await fmp4File(3));
    source.restart(5000);
    source.feed(await fmp4File(4));
    source.rendition.end();
    await plugin.end();

    const parts = await new ArchiveIndex(db).parts(sessionId);
    assert.equal(new Set(parts.map((p) => p.run)).size, 2, 'two runs');
    const archive = new LiveArchive({ db, store, ffmpegPath: 'ffmpeg' });
    const whole = path.join(dir, 'whole.mp4');
    const got = await archive.extract({ sessionId, dest: whole, signal: AbortSignal.timeout(60_000) });
    assert.ok(got);
    assert.ok(Math.abs(got.durationSecs - 7) < 0.1, `archived ${got.durationSecs} s of 7`);
    const media = await probeFile(whole);
    assert.deepEqual(media.codecs.sort(), ['aac', 'h264']);
    assert.equal(media.videoFrames, 7 * 30, 'every frame of both runs');
    assert.ok(Math.abs(media.duration - 7) < 0.15, `the file lasts ${media.duration} s`);
    const until = await archive.archivedUntil(sessionId);
    const last = parts.at(-1) as (typeof parts)[number];
    assert.equal(until, Math.round(last.wallStartMs + last.durationMs));

    // 1.2 s to 2.0 s into the first run: from its keyframe at 1 s (one each second).
    const range = path.join(dir, 'range.mp4');
    const cut = await archive.extract({
      sessionId,
      fromMs: T0 + 1200,
      toMs: T0 + 2000,
      dest: range,
      signal: AbortSignal.timeout(60_000),
    });
    assert.ok(cut);
    assert.ok(Math.abs(cut.startWallMs - (T0 + 1000)) < 40, `starts at ${cut.startWallMs - T0} ms`);
    const ranged = await probeFile(range);
    assert.ok(ranged.duration >= 1 && ranged.duration < 1.6, `the range lasts ${ranged.duration} s`);
    assert.equal(
      await archive.extract({ sessionId: randomUUID(), dest: range, signal: AbortSignal.timeout(5000) }),
      undefined,
    );
  });

  it('drops parts up to the next keyframe when the store falls behind, and keeps what it wrote decodable', async () => {
    const sessionId = randomUUID();
    const index = new ArchiveIndex(db);
    let issues = 0;
    const writer = new ArchiveWriter({
      store,
      index,
      sessionId,
      log,
      maxQueuedBytes: 60_000,
      onDrop: () => void issues++,
    });
    const source = clockedRendition('source');
    const tapped: TappedPart[] = [];
    const tap: RenditionTap = {
      init: (r, bytes) => writer.init(r, bytes),
      part: (p) => {
        tapped.push(p);
        writer.part(p);
      },
      end: () => {},
    };
    source.rendition.tap(tap);
    // All at once: far faster than any store, so the queue fills.
    source.feed(await fmp4File(6));
    await writer.close();
    const stats = writer.stats;
    assert.ok(stats.dropped > 0, 'some parts were dropped');
    assert.ok(issues > 0, 'the session is told (its issues)');
    assert.equal(stats.failed, 0);
    assert.equal(stats.queuedBytes, 0);
    const parts = await index.parts(sessionId);
    assert.equal(parts.length + stats.dropped, tapped.length, 'every part written or counted as dropped');
    // After each hole, the archive goes on from a keyframe.
    for (const [i, p] of parts.entries()) {
      const before = tapped.findIndex((t) => t.msn === p.msn && t.part === p.part) - 1;
      const prev = parts[i - 1];
      const hole =
        prev === undefined ? before >= 0 : !(tapped[before]?.msn === prev.msn && tapped[before]?.part === prev.part);
      if (hole) assert.ok(p.independent, `part ${p.msn}.${p.part} after a hole starts with a keyframe`);
    }
    const out = path.join(dir, 'dropped.mp4');
    await new LiveArchive({ db, store, ffmpegPath: 'ffmpeg' }).extract({
      sessionId,
      dest: out,
      signal: AbortSignal.timeout(60_000),
    });
    const { stderr } = await run('ffmpeg', ['-v', 'error', '-i', out, '-f', 'null', '-']);
    assert.equal(stderr.trim(), '', 'decodes without errors');
  });

  it('keeps up with a live source in real time when the store is an S3 bucket, losing nothing', async () => {
    s3 = await startS3();
    const bucket = await s3.createBucket();
    const bucketStore = createBuiltinStore({
      dataDir: dir,
      ...storeSettings(s3, bucket),
      s3MaxAttempts: 3,
      uploadPartSizeBytes: 5 * 1024 * 1024,
      inputTimeoutMs: 30_000,
      inputIdleTimeoutMs: 30_000,
    });
    const sessionId = randomUUID();
    const plugin = archivePlugin({ store: bucketStore, db, clipSecs: 300 })(view(sessionId));
    const source = clockedRendition('source');
    let fed = 0;
    plugin?.rendition?.('source', (t) => source.rendition.tap(t));
    source.rendition.tap({ init: () => {}, part: () => void fed++, end: () => {} });
    // 4 s of parts at the pace they come live (a part each ~267 ms).
    const boxes = topLevelBoxes(await fmp4File(4));
    for (const box of boxes) {
      source.rendition.write(box.bytes);
      if (box.type === 'mdat') await new Promise((r) => setTimeout(r, 250));
    }
    await plugin?.end();
    const parts = await new ArchiveIndex(db).parts(sessionId);
    assert.equal(parts.length, fed, 'every part is in the bucket and the index');
    const keys = await s3.keys(bucket);
    assert.equal(keys.filter((k) => k.endsWith('.m4s')).length, fed);
    assert.equal(keys.filter((k) => k.includes(`live/${sessionId}/init/`)).length, 1);
    const out = path.join(dir, 'from-bucket.mp4');
    await new LiveArchive({ db, store: bucketStore, ffmpegPath: 'ffmpeg' }).extract({
      sessionId,
      dest: out,
      signal: AbortSignal.timeout(60_000),
    });
    assert.equal((await probeFile(out)).videoFrames, 4 * 30);
  });
});

for (const { kind, skip } of await databaseKinds()) {
  describe(`live archive retention (${kind} database)`, { skip }, () => {
    let db: Db;
    let dir: string;
    let store: BuiltinStore;

    before(async () => {
      db = await openTestDb(kind);
      dir = await mkdtemp(path.join(tmpdir(), 'live-archive-retention-'));
      store = new FolderStore(path.join(dir, 'media'));
    });
    after(async () => {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    });

    it('keeps the last MEDIAPLANE_LIVE_CLIP_SECS of a session, and all of a recorded one until its recording is made', async () => {
      const index = new ArchiveIndex(db);
      const out = store.writer('');
      const now = Date.now();
      /** A part of `sessionId` `agoMs` ago, in the store and the index. */
      const put = async (sessionId: string, agoMs: number, n: number) => {
        const p = { run: 1, msn: n, part: 0, wallStartMs: now - agoMs };
        const key = archivePartKey(sessionId, p);
        await out.put(key, { file: THIS_FILE }, { contentType: 'video/mp4', signal: AbortSignal.timeout(5000) });
        await index.add(sessionId, { ...p, key, durationMs: 250, bytes: 1, independent: true });
        return key;
      };
      const exists = async (key: string) => (await store.stat(key)) !== undefined;
      const plain = randomUUID();
      await out.put(
        archiveInitKey(plain, 1),
        { file: THIS_FILE },
        { contentType: 'video/mp4', signal: AbortSignal.timeout(5000) },
      );
      const old = await put(plain, 10 * 60_000, 1);
      const recent = await put(plain, 1000, 2);
      const recorded = randomUUID();
      await db.query('INSERT INTO owners (name, project_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
        'alice',
        PROJECT,
      ]);
      const streamId = randomUUID();
      await db.query(
        `INSERT INTO streams (id, owner, project_id, name, stream_key, stream_key_hash, playback_id, record)
         VALUES ($1, 'alice', $2, 'kept', $3, $3, $3, true)`,
        [streamId, PROJECT, `k${streamId}`],
      );
      await db.query(
        `INSERT INTO stream_sessions (id, stream_id, owner, project_id, name, playback_id, record, state)
         VALUES ($1, $2, 'alice', $3, 'kept', $4, true, 'ended')`,
        [recorded, streamId, PROJECT, streamId],
      );
      const kept = await put(recorded, 10 * 60_000, 1);

      const job = archiveRetentionJob({ db, store, clipSecs: 60 });
      await job.run(100);
      assert.equal(await exists(old), false, 'a minute past the clip window goes');
      assert.equal(await exists(recent), true, 'the clip window stays');
      assert.equal(await exists(archiveInitKey(plain, 1)), true, 'the init stays while parts of its session do');
      assert.deepEqual(
        (await index.parts(plain)).map((p) => p.msn),
        [2],
      );
      assert.equal(await exists(kept), true, 'a recorded session waits for its recording');

      // Its recording was made (an asset with the session's id, ready) longer than the window ago: all of it goes.
      const task = randomUUID();
      await db.query(
        `INSERT INTO tasks (id, owner, project_id, type, phase, params) VALUES ($1, 'alice', $2, 'upload', 'completed', '{}')`,
        [task, PROJECT],
      );
      await db.query(
        `INSERT INTO assets (id, owner, project_id, playback_id, name, phase, task_id, source, updated_at)
         VALUES ($1, 'alice', $2, $3, 'kept', 'ready', $4, '{"type":"recording"}', now() - interval '5 minutes')`,
        [recorded, PROJECT, recorded.slice(0, 16), task],
      );
      await job.run(100);
      assert.equal(await exists(kept), false);
      assert.deepEqual(await index.parts(recorded), []);
    });
  });
}
