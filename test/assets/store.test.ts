// The assets domain's store (issue #27) on both databases: an asset follows its task through
// the trigger of migration 010 whatever moves the task (the real Queue and TaskStore, as a
// worker and the API drive them), every change writes its asset event into the outbox, and
// the upload sessions (grant, finish, expire) grant exactly what they should.

import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import {
  type AssetRow,
  AssetStore,
  type AssetStoreOptions,
  type CreateAsset,
  StagedBytesLimitError,
  UPLOAD_EXPIRED_MESSAGE,
} from '../../src/assets/index.ts';
import type { Db } from '../../src/db/index.ts';
import { NotFoundError, TooManyRequestsError, UpstreamUnavailableError } from '../../src/lib/errors.ts';
import { FolderStore } from '../../src/storage/builtin/folder.ts';
import type { BuiltinStore } from '../../src/storage/builtin/index.ts';
import { Queue, TASK_EVENTS_CHANNEL, TaskStore } from '../../src/tasks/index.ts';
import { databaseKinds, openTestDb } from '../helpers/server.ts';

const PROJECT = '00000000-0000-4000-8000-000000000000';

interface EventRow {
  event: string;
  owner: string;
  task: AssetRow & { created_at: string; updated_at: string };
}

for (const { kind, skip } of await databaseKinds()) {
  describe(`assets store (${kind} database)`, { skip }, () => {
    let db: Db;
    let tasks: TaskStore;
    let queue: Queue;
    let dir: string;
    let files: BuiltinStore;
    let assets: AssetStore;
    const storeWith = (o: Partial<AssetStoreOptions> = {}) =>
      new AssetStore(db, { tasks, store: files, uploadExpiryMs: 60_000, maxStagedBytesPerOwner: 1e12, ...o });

    before(async () => {
      db = await openTestDb(kind);
      for (const owner of ['alice', 'bob', 'carol'])
        await db.query('INSERT INTO owners (name, project_id) VALUES ($1, $2)', [owner, PROJECT]);
      tasks = new TaskStore(db);
      queue = new Queue(db, { leaseMs: 60_000, maxRetries: 1, maxCrashRetries: 1 });
      dir = await mkdtemp(path.join(tmpdir(), 'mediaplane-assets-'));
      files = new FolderStore(dir);
      assets = storeWith();
    });
    // A test's unfinished task must not be the next test's claim.
    afterEach(() => db.query(`UPDATE tasks SET phase = 'cancelled' WHERE phase IN ('pending', 'waiting', 'running')`));
    after(async () => {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    });

    const request = (over: Partial<CreateAsset> = {}): CreateAsset => ({
      owner: 'alice',
      projectId: PROJECT,
      name: 'holiday.mp4',
      source: { type: 'url', url: 'https://videos.example.com/holiday.mp4' },
      spec: { staticMp4: true },
      requesterId: null,
      maxQueuedPerOwner: 100,
      task: { type: 'upload', params: { input: { url: 'https://videos.example.com/holiday.mp4' }, staticMp4: true } },
      ...over,
    });
    const upload = (over: Partial<CreateAsset> = {}) =>
      assets.create(
        request({ source: { type: 'directUpload' }, task: { type: 'upload', params: {} }, upload: true, ...over }),
      );
    const events = (assetId: string) =>
      db.query<EventRow>('SELECT event, owner, task FROM task_events WHERE task_id = $1 ORDER BY created_at, id', [
        assetId,
      ]);
    /** Runs `step` and returns the asset events it wrote, as [event, phase] pairs. */
    async function written(assetId: string, step: () => Promise<unknown>): Promise<Array<[string, string]>> {
      const before = (await events(assetId)).length;
      await step();
      return (await events(assetId)).slice(before).map((e) => [e.event, e.task.phase]);
    }
    async function claim(taskId: string): Promise<void> {
      const rows = await queue.claim('w1', 1);
      assert.deepEqual(
        rows.map((r) => r.id),
        [taskId],
        'the task under test is the one claimed',
      );
    }
    const phase = async (a: { id: string; owner: string }) => (await assets.get(a.owner, a.id)).phase;

    it('a direct upload: uploading with a pending task, the token stored only as its hash', async () => {
      const { asset, task, uploadToken } = await upload();
      assert.equal(asset.phase, 'uploading');
      assert.match(asset.playback_id, /^[a-z0-9]{16}$/);
      assert.equal(asset.type, 'video');
      assert.equal(asset.progress, null);
      assert.deepEqual(asset.source, { type: 'directUpload' });
      assert.deepEqual(asset.spec, { staticMp4: true });
      assert.ok(asset.created_at instanceof Date);
      assert.equal(task.phase, 'pending');
      assert.equal(task.scheduled_at, null, 'a pending task is not scheduled yet');
      assert.equal(asset.task_id, task.id);
      assert.deepEqual(task.params, {
        assetId: asset.id,
        playbackId: asset.playback_id,
        input: { key: `asset/${asset.playback_id}/source` },
      });
      assert.match(uploadToken ?? '', /^[A-Za-z0-9_-]{43}$/, '32 random bytes, base64url');
      const stored = await db.query<{ token_hash: string }>(
        'SELECT token_hash FROM asset_uploads WHERE asset_id = $1',
        [asset.id],
      );
      assert.equal(stored.length, 1);
      assert.notEqual(stored[0]?.token_hash, uploadToken);
      const dump = JSON.stringify(await db.query('SELECT * FROM asset_uploads'));
      assert.ok(!dump.includes(uploadToken ?? '?'), 'the token is nowhere in the table');
      const [created, ...more] = await events(asset.id);
      assert.equal(more.length, 0);
      assert.equal(created?.event, 'asset.created');
      assert.equal(created?.owner, 'alice');
      assert.equal(created?.task.id, asset.id);
      assert.equal(created?.task.playback_id, asset.playback_id);
      assert.equal(created?.task.phase, 'uploading');
      assert.deepEqual(
        Object.keys(created?.task ?? {}).sort(),
        Object.keys(asset).sort(),
        "the event's asset is AssetRow's columns",
      );
      // The task itself has its own event under its own id.
      const spawned = await db.query<{ event: string }>('SELECT event FROM task_events WHERE task_id = $1', [task.id]);
      assert.deepEqual(
        spawned.map((e) => e.event),
        ['task.spawned'],
      );
    });

    it('grant, finish, then the queue moves the asset: waiting, processing, ready', async () => {
      const { asset, task, uploadToken = '' } = await upload();
      const grant = await assets.grant(uploadToken);
      assert.deepEqual(
        { ...grant, expiresAt: undefined },
        { assetId: asset.id, playbackId: asset.playback_id, taskId: task.id, owner: 'alice', expiresAt: undefined },
      );
      assert.ok(grant && grant.expiresAt.getTime() > Date.now() + 50_000, 'expires after uploadExpiryMs');
      assert.deepEqual(await written(asset.id, () => assets.finish(asset.id, 1234)), [['asset.updated', 'waiting']]);
      assert.equal((await tasks.get('alice', task.id)).phase, 'waiting');
      assert.equal(await assets.grant(uploadToken), undefined, 'a finished upload takes no more bytes');
      assert.equal(await assets.finish(asset.id, 1234), true, 'finishing again (a retried request) is no error');
      assert.deepEqual(await written(asset.id, () => claim(task.id)), [['asset.updated', 'processing']]);
      await queue.progress(task.id, 'w1', 0.4);
      const processing = await assets.get('alice', asset.id);
      assert.equal(processing.phase, 'processing');
      assert.equal(processing.progress, 0.4, "the task's progress, joined");
      const output = {
        type: 'audio',
        videoSpec: { format: 'mp4', duration: 2, tracks: [{ type: 'audio', codec: 'aac' }] },
        size: 1234,
        hash: [{ hash: 'abc', algorithm: 'md5' }],
        source: { key: `asset/${asset.playback_id}/source` },
        hls: { key: `asset/${asset.playback_id}/hls/index.m3u8` },
      };
      assert.deepEqual(await written(asset.id, () => queue.complete(task.id, 'w1', output)), [
        ['asset.ready', 'ready'],
      ]);
      const ready = await assets.get('alice', asset.id);
      assert.equal(ready.phase, 'ready');
      assert.equal(ready.type, 'audio', 'the type the task found, copied from its output');
      assert.deepEqual(ready.output, output);
      assert.equal(ready.progress, null);
      assert.equal(ready.error_message, null);
      assert.ok(ready.updated_at.getTime() >= asset.updated_at.getTime());
      const last = (await events(asset.id)).at(-1);
      assert.deepEqual(last?.task.output, output);
    });

    it('failures, retries and a cancel move the asset too', async () => {
      const { asset, task } = await assets.create(request());
      assert.equal(asset.phase, 'waiting');
      assert.equal(task.phase, 'waiting');
      await claim(task.id);
      const retry = { message: 'the input server answered 503', retryable: true, backoffMs: 0 };
      assert.deepEqual(await written(asset.id, () => queue.fail(task.id, 'w1', retry)), [['asset.updated', 'waiting']]);
      assert.equal((await assets.get('alice', asset.id)).error_message, null, 'not failed while a retry is due');
      await claim(task.id);
      assert.deepEqual(await written(asset.id, () => queue.fail(task.id, 'w1', retry)), [['asset.failed', 'failed']]);
      const failed = await assets.get('alice', asset.id);
      assert.equal(failed.phase, 'failed');
      assert.equal(failed.error_message, 'the input server answered 503');
      assert.equal((await events(asset.id)).at(-1)?.task.error_message, 'the input server answered 503');
      assert.deepEqual(await written(asset.id, () => tasks.retry('alice', task.id)), [['asset.updated', 'waiting']]);
      assert.deepEqual(await written(asset.id, () => tasks.cancel('alice', task.id)), [['asset.failed', 'failed']]);
      assert.match((await assets.get('alice', asset.id)).error_message ?? '', /cancelled/);
    });

    it('a lease taken back from a dead worker is an update of the asset', async () => {
      const { asset, task } = await assets.create(request());
      await claim(task.id);
      await db.query(`UPDATE tasks SET lease_until = now() - interval '1 second' WHERE id = $1`, [task.id]);
      assert.deepEqual(await written(asset.id, () => queue.reapExpired()), [['asset.updated', 'waiting']]);
    });

    it("progress writes are no asset events, and other task types' changes leave assets alone", async () => {
      const { asset, task } = await assets.create(request());
      await claim(task.id);
      assert.deepEqual(await written(asset.id, () => queue.progress(task.id, 'w1', 0.5)), []);
      const before = (
        await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM task_events WHERE event LIKE 'asset.%'`)
      )[0];
      const other = await tasks.create({
        owner: 'alice',
        projectId: PROJECT,
        type: 'transcode-file',
        params: {},
        requesterId: null,
        maxQueuedPerOwner: 100,
      });
      await tasks.cancel('alice', other.id);
      const now = (
        await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM task_events WHERE event LIKE 'asset.%'`)
      )[0];
      assert.equal(now?.n, before?.n);
    });

    it("asset events wake the outbox's listeners with the asset's id", async () => {
      const heard: string[] = [];
      const stop = await db.listen(TASK_EVENTS_CHANNEL, (id) => heard.push(id));
      try {
        const { asset, task } = await assets.create(request());
        await claim(task.id);
        // NOTIFY is delivered on commit; the listener's connection reads it soon after.
        for (let i = 0; i < 200 && heard.filter((h) => h === asset.id).length < 2; i++)
          await new Promise((r) => setTimeout(r, 10));
        assert.equal(heard.filter((h) => h === asset.id).length, 2, 'created, then processing (from the trigger)');
      } finally {
        await stop();
      }
    });

    it('the queue limit refuses the asset and its task alike', async () => {
      const before = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM assets');
      await assert.rejects(assets.create(request({ maxQueuedPerOwner: 0 })), TooManyRequestsError);
      const after = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM assets');
      assert.equal(after[0]?.n, before[0]?.n);
    });

    it('list pages newest first; deleted assets are left out', async () => {
      const made: AssetRow[] = [];
      for (let i = 0; i < 5; i++) made.push((await assets.create(request({ owner: 'carol', name: `v${i}` }))).asset);
      const gone = made[2] as AssetRow;
      await assets.remove('carol', gone.id);
      const names: string[] = [];
      let cursor: string | undefined;
      for (;;) {
        const page = await assets.list('carol', { limit: 2, ...(cursor ? { cursor } : {}) });
        assert.ok(page.assets.length <= 2);
        names.push(...page.assets.map((a) => a.name));
        if (!page.next) break;
        cursor = page.next;
      }
      assert.deepEqual(names, ['v4', 'v3', 'v1', 'v0']);
      assert.deepEqual((await assets.list('carol', { limit: 10, cursor: 'nonsense' })).assets, []);
      assert.deepEqual((await assets.list('bob', { limit: 10 })).assets, [], "no other owner's assets");
    });

    it("another owner's asset, a deleted one and a non-UUID id are not found", async () => {
      const { asset } = await assets.create(request());
      await assert.rejects(assets.get('bob', asset.id), NotFoundError);
      await assert.rejects(assets.update('bob', asset.id, { name: 'mine' }), NotFoundError);
      await assert.rejects(assets.remove('bob', asset.id), NotFoundError);
      await assert.rejects(assets.get('alice', 'not-a-uuid'), NotFoundError);
      await assert.rejects(assets.update('alice', 'x', {}), NotFoundError);
      await assert.rejects(assets.remove('alice', 'x'), NotFoundError);
      assert.equal((await assets.get('alice', asset.id)).name, 'holiday.mp4', "bob's update changed nothing");
      await assets.remove('alice', asset.id);
      await assert.rejects(assets.get('alice', asset.id), NotFoundError);
      await assert.rejects(assets.remove('alice', asset.id), NotFoundError);
    });

    it('update renames and sets or clears the playback policy, with asset.updated', async () => {
      const { asset } = await assets.create(request());
      const policy = { type: 'jwt' };
      let row: AssetRow | undefined;
      assert.deepEqual(
        await written(asset.id, async () => {
          row = await assets.update('alice', asset.id, { name: 'renamed', playbackPolicy: policy });
        }),
        [['asset.updated', 'waiting']],
      );
      assert.equal(row?.name, 'renamed');
      assert.deepEqual(row?.playback_policy, policy);
      assert.equal((await events(asset.id)).at(-1)?.task.name, 'renamed');
      const kept = await assets.update('alice', asset.id, { name: 'again' });
      assert.deepEqual(kept.playback_policy, policy, 'a policy not named is kept');
      const cleared = await assets.update('alice', asset.id, { playbackPolicy: null });
      assert.equal(cleared.playback_policy, null);
      assert.equal(cleared.name, 'again');
      assert.deepEqual(await assets.byPlaybackId(asset.playback_id), await assets.get('alice', asset.id));
      assert.equal(await assets.byPlaybackId('nosuchplayback00'), undefined);
    });

    /** Files of an asset in the store, as its task would have written them. */
    async function putFiles(playbackId: string): Promise<void> {
      const src = path.join(dir, `src-${playbackId}`);
      await writeFile(src, 'bytes');
      const writer = files.writer(`asset/${playbackId}/`);
      const o = { contentType: 'application/octet-stream', signal: AbortSignal.timeout(10_000) };
      for (const key of ['source', 'hls/index.m3u8', 'hls/720p0/0.ts', 'hls/thumbnails/poster.jpg'])
        await writer.put(key, { file: src }, o);
      await rm(src);
    }
    const stored = async (playbackId: string) =>
      (await readdir(path.join(dir, 'asset', playbackId), { recursive: true }).catch(() => [])).length;

    it("remove deletes every file of the asset (and no other's), cancels its task, writes asset.deleted", async () => {
      const { asset, task } = await assets.create(request());
      const other = (await assets.create(request())).asset;
      await putFiles(asset.playback_id);
      await putFiles(other.playback_id);
      assert.ok((await stored(asset.playback_id)) > 0);
      assert.deepEqual(await written(asset.id, () => assets.remove('alice', asset.id)), [['asset.deleted', 'deleted']]);
      assert.equal(await stored(asset.playback_id), 0, 'the files are gone');
      assert.ok((await stored(other.playback_id)) > 0, "another asset's files stay");
      assert.equal((await tasks.get('alice', task.id)).phase, 'cancelled');
      const [row] = await db.query<{ phase: string; deleted_at: Date | null }>(
        'SELECT phase, deleted_at FROM assets WHERE id = $1',
        [asset.id],
      );
      assert.equal(row?.phase, 'deleted', 'the cancel did not turn it into failed');
      assert.ok(row?.deleted_at instanceof Date);
      assert.equal(await assets.byPlaybackId(asset.playback_id), undefined);
    });

    it('a ready asset is deleted at once, its finished task left as it was', async () => {
      const { asset, task } = await assets.create(request());
      await claim(task.id);
      await queue.complete(task.id, 'w1', { type: 'video', videoSpec: { tracks: [] }, size: 1, hash: [] });
      await putFiles(asset.playback_id);
      await assets.remove('alice', asset.id);
      assert.equal(await stored(asset.playback_id), 0);
      assert.equal((await tasks.get('alice', task.id)).phase, 'completed');
      await assert.rejects(assets.get('alice', asset.id), NotFoundError);
    });

    it('a store that fails leaves the asset deleting; a later remove finishes it', async () => {
      const { asset } = await assets.create(request());
      await putFiles(asset.playback_id);
      const failing: BuiltinStore = Object.assign(Object.create(files) as BuiltinStore, {
        removePrefix: () => Promise.reject(new UpstreamUnavailableError('the store answered 503')),
      });
      await assert.rejects(storeWith({ store: failing }).remove('alice', asset.id), /503/);
      assert.equal(await phase(asset), 'deleting');
      assert.equal(await assets.byPlaybackId(asset.playback_id), undefined, 'no playback while deleting');
      assert.ok((await stored(asset.playback_id)) > 0);
      await assets.remove('alice', asset.id);
      assert.equal(await stored(asset.playback_id), 0);
      assert.deepEqual(
        (await events(asset.id)).map((e) => e.event),
        ['asset.created', 'asset.deleted'],
      );
    });

    it('an asset whose task was running stays deleting until finishDeletes removes its files again', async () => {
      const { asset, task } = await assets.create(request());
      await claim(task.id);
      await putFiles(asset.playback_id);
      await assets.remove('alice', asset.id);
      assert.equal((await tasks.get('alice', task.id)).phase, 'cancelled');
      assert.equal(await stored(asset.playback_id), 0);
      assert.equal(await phase(asset), 'deleting');
      // The cancelled worker's last segment lands after the remove.
      await putFiles(asset.playback_id);
      assert.equal(await assets.finishDeletes(10), 0, 'not before the grace period');
      assert.equal(await storeWith({ deleteGraceMs: 0 }).finishDeletes(10), 1);
      assert.equal(await stored(asset.playback_id), 0);
      await assert.rejects(assets.get('alice', asset.id), NotFoundError);
      assert.equal((await events(asset.id)).at(-1)?.event, 'asset.deleted');
    });

    it('grant: a wrong, expired or deleted upload grants nothing', async () => {
      const { asset, uploadToken = '' } = await upload();
      assert.equal(await assets.grant('x'.repeat(43)), undefined);
      assert.equal(await assets.grant(''), undefined);
      assert.equal(await assets.grant(uploadToken.slice(0, -1)), undefined);
      assert.ok(await assets.grant(uploadToken));
      await db.query(`UPDATE asset_uploads SET expires_at = now() - interval '1 second' WHERE asset_id = $1`, [
        asset.id,
      ]);
      assert.equal(await assets.grant(uploadToken), undefined, 'expired');

      const deleted = await upload();
      await assets.remove('alice', deleted.asset.id);
      assert.equal(await assets.grant(deleted.uploadToken ?? ''), undefined, 'its asset deleted');
      assert.equal(await assets.finish(deleted.asset.id, 10), false);
      assert.equal(await assets.finish('not-a-uuid', 10), false);
    });

    it("stage: an owner's unfinished uploads hold at most maxStagedBytesPerOwner; finishing, deleting and unstaging free it", async () => {
      const capped = storeWith({ maxStagedBytesPerOwner: 1000 });
      const a = await upload({ owner: 'carol' });
      const b = await upload({ owner: 'carol' });
      const c = await upload({ owner: 'carol' });
      assert.equal(await capped.stage(a.asset.id, { atLeast: 600, atMost: 600 }), 600);
      await assert.rejects(capped.stage(b.asset.id, { atLeast: 500, atMost: 500 }), (err: Error) => {
        assert.ok(err instanceof StagedBytesLimitError);
        assert.equal(err.statusCode, 413);
        assert.match(
          err.message,
          /at most 1000 bytes \(MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER\) and the others hold 600/,
        );
        assert.match(err.message, /finish or delete pending uploads/);
        return true;
      });
      assert.equal(
        await capped.stage(b.asset.id, { atLeast: 100, atMost: 5000 }),
        400,
        'as much as fits, up to atMost',
      );
      assert.equal(
        await capped.stage(a.asset.id, { atLeast: 500, atMost: 500 }),
        500,
        "an upload's own bytes are replaced",
      );
      const bob = await upload({ owner: 'bob' });
      assert.equal(
        await capped.stage(bob.asset.id, { atLeast: 1000, atMost: 1000 }),
        1000,
        'another owner counts apart',
      );

      await capped.finish(a.asset.id, 500);
      assert.equal(
        await capped.stage(c.asset.id, { atLeast: 600, atMost: 600 }),
        600,
        'a finished upload holds nothing',
      );
      // Deleted: its bytes are still on a disk until the staging sweep frees them (unstage).
      await capped.remove('carol', b.asset.id);
      await capped.unstage(c.asset.id);
      const d = await upload({ owner: 'carol' });
      await assert.rejects(capped.stage(d.asset.id, { atLeast: 1000, atMost: 1000 }), StagedBytesLimitError);
      assert.deepEqual(
        (await capped.ended([a.asset.id, b.asset.id, c.asset.id, d.asset.id, PROJECT, 'nope'])).sort(),
        [a.asset.id, b.asset.id, PROJECT].sort(),
        'finished, deleted, or no upload at all; a non-UUID is no id of ours',
      );
      await capped.unstage(b.asset.id);
      assert.equal(
        await capped.stage(d.asset.id, { atLeast: 1000, atMost: 1000 }),
        1000,
        'deleted and unstaged, it holds nothing',
      );
      await assert.rejects(
        capped.stage(b.asset.id, { atLeast: 1, atMost: 1 }),
        NotFoundError,
        'a deleted upload takes no bytes',
      );
      // The staging sweep frees these once afterEach fails their assets; here, by hand.
      for (const u of [d, bob]) await capped.unstage(u.asset.id);
    });

    it('stage: reservations made at once never pass the cap together (the owner is locked while counting)', async () => {
      const capped = storeWith({ maxStagedBytesPerOwner: 1000 });
      const ups = await Promise.all(Array.from({ length: 10 }, () => upload({ owner: 'carol' })));
      const results = await Promise.allSettled(ups.map((u) => capped.stage(u.asset.id, { atLeast: 300, atMost: 300 })));
      const taken = results.filter((r) => r.status === 'fulfilled');
      assert.equal(taken.length, 3, 'three of 300 bytes fit in 1000');
      for (const r of results)
        if (r.status === 'rejected') assert.ok(r.reason instanceof StagedBytesLimitError, String(r.reason));
      const [held] = await db.query<{ bytes: string }>(
        `SELECT sum(u.staged_bytes)::text AS bytes FROM asset_uploads u JOIN assets a ON a.id = u.asset_id
         WHERE a.owner = 'carol' AND a.phase = 'uploading' AND u.finished_at IS NULL`,
      );
      assert.equal(held?.bytes, '900');
    });

    it('expire fails the unfinished uploads past their expiry, their tasks and assets', async () => {
      const late = await upload();
      const fresh = await upload();
      const done = await upload();
      await assets.finish(done.asset.id, 5);
      await db.query(
        `UPDATE asset_uploads SET expires_at = now() - interval '1 second' WHERE asset_id = ANY($1::uuid[])`,
        [[late.asset.id, done.asset.id]],
      );
      let expired: string[] = [];
      assert.deepEqual(
        await written(late.asset.id, async () => {
          expired = await assets.expire(10);
        }),
        [['asset.failed', 'failed']],
      );
      // (The test before left an expired upload of its own.)
      assert.ok(expired.includes(late.asset.id), 'the unfinished one past its expiry');
      assert.ok(!expired.includes(done.asset.id) && !expired.includes(fresh.asset.id), 'no finished or fresh one');
      const task = await tasks.get('alice', late.task.id);
      assert.equal(task.phase, 'failed');
      assert.equal(task.error_message, UPLOAD_EXPIRED_MESSAGE);
      const asset = await assets.get('alice', late.asset.id);
      assert.equal(asset.phase, 'failed');
      assert.equal(asset.error_message, UPLOAD_EXPIRED_MESSAGE);
      assert.deepEqual(await assets.expire(10), [], 'expired once');
      assert.equal(await assets.finish(late.asset.id, 5), false, 'an expired upload cannot finish');
      assert.equal(await phase(fresh.asset), 'uploading');
      assert.ok(await assets.grant(fresh.uploadToken ?? ''));
      // One deleted while uploading: freed too, and stays deleted.
      const gone = await upload();
      await assets.remove('alice', gone.asset.id);
      await db.query(`UPDATE asset_uploads SET expires_at = now() - interval '1 second' WHERE asset_id = $1`, [
        gone.asset.id,
      ]);
      assert.deepEqual(await assets.expire(10), [gone.asset.id]);
      const [row] = await db.query<{ phase: string }>('SELECT phase FROM assets WHERE id = $1', [gone.asset.id]);
      assert.equal(row?.phase, 'deleted');
    });
  });
}
