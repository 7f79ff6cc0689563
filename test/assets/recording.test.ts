// A live session's recording on the assets side, on both databases: queued once however often
// (and by however many nodes) it is asked, as an asset whose id is the session's with the
// stream's name and the session's recordingSpec, made by an upload task with no API key that
// reads the session's archive, `recording.waiting` in the same transaction, and
// `recording.ready` once the asset is ready. The upload handler reads the archive it is given.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AssetRecordings, AssetStore, createUploadHandler, type RecordedSession } from '../../src/assets/index.ts';
import type { RecordingArchive } from '../../src/assets/types.ts';
import { loadConfig } from '../../src/config/index.ts';
import type { Db } from '../../src/db/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { FolderStore } from '../../src/storage/builtin/index.ts';
import { TaskStore } from '../../src/tasks/index.ts';
import { databaseKinds, openTestDb } from '../helpers/server.ts';

const PROJECT = '00000000-0000-4000-8000-000000000000';

async function streamWithSession(db: Db, o: { record: boolean }): Promise<RecordedSession> {
  const streamId = randomUUID();
  const sessionId = randomUUID();
  const playbackId = randomUUID().replace(/-/g, '').slice(0, 16);
  await db.query(
    `INSERT INTO streams (id, owner, project_id, name, stream_key, stream_key_hash, playback_id, record)
     VALUES ($1, 'alice', $2, 'morning show', $3, $4, $5, $6)`,
    [streamId, PROJECT, `key-${sessionId}`, `hash-${sessionId}`, playbackId, o.record],
  );
  await db.query(
    `INSERT INTO stream_sessions (id, stream_id, owner, project_id, name, playback_id, record, state, ended_at)
     VALUES ($1, $2, 'alice', $3, 'morning show', $4, $5, 'ended', now())`,
    [sessionId, streamId, PROJECT, playbackId, o.record],
  );
  return {
    id: sessionId,
    streamId,
    owner: 'alice',
    projectId: PROJECT,
    name: 'morning show',
    recordingSpec: { profiles: [{ name: '144p0', width: 256, height: 144, bitrate: 200_000, fps: 0 }] },
  };
}

for (const { kind, skip } of await databaseKinds()) {
  describe(`live recordings as assets (${kind} database)`, { skip }, () => {
    let db: Db;
    let assets: AssetStore;
    let recordings: AssetRecordings;
    let dir: string;
    const events = (streamId: string) =>
      db.query<{ event: string; task: { stream: { id: string; stream_key?: string }; session?: { id: string } } }>(
        'SELECT event, task FROM task_events WHERE task_id = $1 ORDER BY created_at',
        [streamId],
      );

    before(async () => {
      db = await openTestDb(kind);
      dir = await mkdtemp(path.join(tmpdir(), 'recording-assets-'));
      await db.query('INSERT INTO owners (name, project_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
        'alice',
        PROJECT,
      ]);
      assets = new AssetStore(db, {
        tasks: new TaskStore(db),
        store: new FolderStore(path.join(dir, 'media')),
        uploadExpiryMs: 60_000,
        maxStagedBytesPerOwner: 1 << 30,
      });
      recordings = new AssetRecordings(assets, { maxQueuedPerOwner: 100 });
    });
    after(async () => {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    });

    it('queues one asset per session, however often it is asked, with recording.waiting and no key', async () => {
      const session = await streamWithSession(db, { record: true });
      await Promise.all([recordings.queue(session), recordings.queue(session)]);
      await recordings.queue(session);
      const asset = await assets.get('alice', session.id);
      assert.equal(asset.name, 'morning show');
      assert.deepEqual(asset.source, { type: 'recording', sessionId: session.id });
      assert.equal(asset.phase, 'waiting');
      // The live rung's fps 0 (the source's rate) is the transcode's default: left out.
      assert.deepEqual(asset.spec, { profiles: [{ name: '144p0', width: 256, height: 144, bitrate: 200_000 }] });
      const tasks = await db.query<{ type: string; params: Record<string, unknown>; key_id: string | null }>(
        'SELECT type, params, key_id FROM tasks WHERE id = $1',
        [asset.task_id],
      );
      assert.equal(tasks.length, 1);
      assert.equal(tasks[0]?.type, 'upload');
      assert.equal(tasks[0]?.key_id, null);
      assert.deepEqual(tasks[0]?.params.input, { recording: { sessionId: session.id } });
      const all = await db.query('SELECT 1 FROM assets WHERE id = $1', [session.id]);
      assert.equal(all.length, 1);
      const got = await events(session.streamId);
      assert.deepEqual(
        got.map((e) => e.event),
        ['recording.waiting'],
      );
      assert.equal(got[0]?.task.session?.id, session.id);
      assert.equal(got[0]?.task.stream.id, session.streamId);
      assert.equal(got[0]?.task.stream.stream_key, undefined, 'the stream key never goes into an event');
    });

    it('writes recording.ready with the session when the asset becomes ready', async () => {
      const session = await streamWithSession(db, { record: true });
      await recordings.queue(session);
      const asset = await assets.get('alice', session.id);
      const output = { type: 'video', hls: { key: `asset/${asset.playback_id}/hls/index.m3u8` } };
      await db.query(`UPDATE tasks SET phase = 'running' WHERE id = $1`, [asset.task_id]);
      await db.query(`UPDATE tasks SET phase = 'completed', output = $2 WHERE id = $1`, [
        asset.task_id,
        JSON.stringify(output),
      ]);
      assert.equal((await assets.get('alice', session.id)).phase, 'ready');
      const got = await events(session.streamId);
      assert.deepEqual(
        got.map((e) => e.event),
        ['recording.waiting', 'recording.ready'],
      );
      const ready = got[1]?.task as unknown as { session: { id: string }; recording: { playbackId: string } };
      assert.equal(ready.session.id, session.id);
      assert.equal(ready.recording.playbackId, asset.playback_id);
    });

    it('makes the upload task read the archive, and fails in words when it holds nothing', async () => {
      const asked: string[] = [];
      const archive: RecordingArchive = {
        extract: async (o) => {
          asked.push(o.sessionId);
          return undefined;
        },
        archivedUntil: async () => undefined,
      };
      const store = new FolderStore(path.join(dir, 'media'));
      const handler = createUploadHandler({ config: loadConfig({ env: {} }), store, archive });
      const sessionId = randomUUID();
      const ctx = {
        signal: AbortSignal.timeout(10_000),
        scratchDir: dir,
        log: createLogger({ level: 'silent' }),
        progress: () => {},
      };
      await assert.rejects(
        handler(
          { assetId: sessionId, playbackId: 'abcdefghabcdefgh', input: { recording: { sessionId } } },
          ctx as unknown as Parameters<typeof handler>[1],
        ),
        /the live session archived nothing to record/,
      );
      assert.deepEqual(asked, [sessionId]);
    });
  });
}
