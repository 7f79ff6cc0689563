// UploadStaging with the bucket kind (assets/staging/bucket.ts) on its own, against the test S3
// with S3's minimum part size enforced: the offset is the bucket's (another instance, as
// another process, sees it), bytes under a part wait until a part's worth has arrived, a body
// past its limit leaves the bucket as it was, a newer request takes over from a stale one,
// and the sweep frees what no live upload owns. The HTTP side is test/api/tus-two-processes.test.ts.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import {
  BucketStagingArea,
  type StagedBytes,
  stagingAreaFor,
  UploadStaging,
  uploadSweepJobs,
} from '../../src/assets/index.ts';
import { BadRequestError, PayloadTooLargeError } from '../../src/lib/errors.ts';
import { type BuiltinStore, createBuiltinStore } from '../../src/storage/builtin/index.ts';
import { S3_MIN_PART_BYTES, startS3, storeSettings, type TestS3 } from '../helpers/s3.ts';
import { waitFor } from '../helpers/server.ts';
import { sha256, uploadGrants } from '../helpers/uploads.ts';

const HOUR = 3600_000;

/** An allowance with room for everything: its own rules are test/assets/staging.test.ts's. */
const allowance: StagedBytes = { stage: async (_id, bytes) => bytes.atMost, unstage: async () => {} };

describe('UploadStaging in a bucket', () => {
  let s3: TestS3;
  let bucket = '';
  let root = '';
  let store: BuiltinStore;
  let staging: UploadStaging;
  const finished: [string, number][] = [];
  const sessions = {
    finish: async (id: string, size: number) => {
      finished.push([id, size]);
      return true;
    },
  };
  /** An UploadStaging of its own, as another API process has, with its own data dir. */
  const apiProcess = (name: string) => {
    const dataDir = path.join(root, name);
    const area = stagingAreaFor(store, dataDir);
    return new UploadStaging({ area, store, maxBytes: 20 * 1024 * 1024, allowance, sessions });
  };
  const grant = uploadGrants();
  const stagedKeys = async (assetId: string) =>
    (await s3.keys(bucket)).filter((k) => k.startsWith(`media/uploads/${assetId}/`));

  before(async () => {
    s3 = await startS3({ minPartBytes: S3_MIN_PART_BYTES });
    bucket = await s3.createBucket();
    root = mkdtempSync(path.join(tmpdir(), 'mediaplane-staging-bucket-'));
    store = createBuiltinStore({
      dataDir: root,
      ...storeSettings(s3, bucket),
      s3MaxAttempts: 2,
      uploadPartSizeBytes: 8 * 1024 * 1024,
      inputTimeoutMs: 30_000,
      inputIdleTimeoutMs: 30_000,
    });
    staging = apiProcess('a');
  });
  after(async () => {
    await s3?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('is the kind chosen for a bucket store', () => {
    assert.ok(stagingAreaFor(store, root) instanceof BucketStagingArea);
  });

  it('keeps bytes under a part until a part’s worth is in; the offset is the bucket’s, for any process', async () => {
    const g = grant();
    const file = Buffer.alloc(S3_MIN_PART_BYTES + 3000);
    for (let i = 0; i < file.length; i += 997) file[i] = i % 256;
    await staging.create(g, { length: file.length });
    await staging.append(g.assetId, Readable.from([file.subarray(0, 1000)]), { expectedOffset: 0 });
    const other = apiProcess('b');
    assert.equal((await other.status(g.assetId))?.offset, 1000, 'another process sees the offset');
    assert.deepEqual(await stagedKeys(g.assetId), [
      `media/uploads/${g.assetId}/incomplete`,
      `media/uploads/${g.assetId}/info`,
    ]);
    // A part's worth: the incomplete bytes and these go up as one part of over 5 MiB.
    const middle = file.subarray(1000, S3_MIN_PART_BYTES + 1000);
    await other.append(g.assetId, Readable.from([middle]), { expectedOffset: 1000 });
    assert.deepEqual(await stagedKeys(g.assetId), [`media/uploads/${g.assetId}/info`], 'no incomplete bytes left');
    const last = await staging.append(g.assetId, Readable.from([file.subarray(S3_MIN_PART_BYTES + 1000)]), {
      expectedOffset: S3_MIN_PART_BYTES + 1000,
    });
    assert.equal(last.offset, file.length);
    finished.length = 0;
    assert.ok(await other.complete(g));
    assert.deepEqual(finished, [[g.assetId, file.length]]);
    const source = await s3.get(bucket, `media/asset/${g.playbackId}/source`);
    assert.equal(sha256(source.body), sha256(file));
    assert.deepEqual(await stagedKeys(g.assetId), []);
  });

  it('a streamed direct PUT (no length) and an empty upload complete, their last part as small as it is', async () => {
    const streamed = grant();
    const bytes = Buffer.from('a streamed body of no declared length');
    await staging.put(streamed, Readable.from([bytes.subarray(0, 10), bytes.subarray(10)]), {});
    assert.ok(await staging.complete(streamed));
    assert.deepEqual((await s3.get(bucket, `media/asset/${streamed.playbackId}/source`)).body, bytes);
    const empty = grant();
    await staging.create(empty, { length: 0 });
    assert.ok(await staging.complete(empty));
    assert.equal((await s3.head(bucket, `media/asset/${empty.playbackId}/source`)).size, 0);
    assert.deepEqual([...(await stagedKeys(streamed.assetId)), ...(await stagedKeys(empty.assetId))], []);
  });

  it('a body past the declared length is refused (413) and leaves the bucket as it was', async () => {
    const g = grant();
    await staging.create(g, { length: 2000 });
    await staging.append(g.assetId, Readable.from([Buffer.alloc(500)]), { expectedOffset: 0 });
    await assert.rejects(
      staging.append(g.assetId, Readable.from([Buffer.alloc(1000), Buffer.alloc(1000)]), { expectedOffset: 500 }),
      PayloadTooLargeError,
    );
    assert.equal((await staging.status(g.assetId))?.offset, 500);
    await staging.remove(g.assetId);
    assert.deepEqual(await stagedKeys(g.assetId), []);
  });

  it('a body that breaks off keeps what arrived, for the client to resume from (400 saying so)', async () => {
    const g = grant();
    await staging.create(g, { length: 5000 });
    const cut = new PassThrough();
    const appending = staging.append(g.assetId, cut, { expectedOffset: 0 });
    cut.write(Buffer.alloc(1200, 0x61));
    const spool = path.join(root, 'a', 'upload-spool');
    const spooled = () => readdirSync(spool).map((f) => statSync(path.join(spool, f)).size);
    await waitFor(async () => spooled().includes(1200), 5000, 'the first bytes to arrive');
    cut.destroy(new Error('connection reset'));
    await assert.rejects(appending, BadRequestError);
    assert.equal((await apiProcess('b').status(g.assetId))?.offset, 1200);
    await staging.remove(g.assetId);
  });

  it('a newer request takes the upload over from a stale one, which keeps the bytes it sent', async () => {
    const g = grant();
    await staging.create(g, { length: 5000 });
    const stale = new PassThrough();
    const first = staging.append(g.assetId, stale, { expectedOffset: 0 });
    stale.write(Buffer.alloc(1000, 0x61));
    // The request's bytes wait in the spool folder while it lasts.
    const spool = path.join(root, 'a', 'upload-spool');
    const spooled = () => readdirSync(spool).map((f) => statSync(path.join(spool, f)).size);
    await waitFor(async () => spooled()[0] === 1000, 5000, 'the first bytes to arrive');
    const now = await apiProcess('b').status(g.assetId);
    assert.equal(now?.offset, 0, 'bytes of a request still in flight are not the upload’s yet');
    const takenOver = assert.rejects(first, /took over/);
    const resumedAt = await staging.status(g.assetId);
    await takenOver;
    assert.ok(stale.destroyed, 'the stale request is ended');
    assert.equal(resumedAt?.offset, 1000, 'what it sent is kept');
    const done = await staging.append(g.assetId, Readable.from([Buffer.alloc(4000, 0x62)]), { expectedOffset: 1000 });
    assert.equal(done.offset, 5000);
    assert.ok(await staging.complete(g));
    const source = (await s3.get(bucket, `media/asset/${g.playbackId}/source`)).body;
    assert.equal(source.toString(), 'a'.repeat(1000) + 'b'.repeat(4000));
  });

  it('a spool file a stopped process left is freed on the first request, a fresh one is kept', async () => {
    const spool = path.join(root, 'restarted', 'upload-spool');
    mkdirSync(spool, { recursive: true });
    const old = path.join(spool, 'left-by-a-crash');
    const fresh = path.join(spool, 'being-written');
    writeFileSync(old, 'x');
    writeFileSync(fresh, 'y');
    const twoHoursAgo = new Date(Date.now() - 2 * HOUR);
    utimesSync(old, twoHoursAgo, twoHoursAgo);
    const g = grant();
    await apiProcess('restarted').create(g, { length: 10 });
    assert.ok(!existsSync(old));
    assert.ok(existsSync(fresh));
  });

  it('the sweep frees expired uploads and those whose asset is gone, parts and all', async () => {
    const live = grant();
    const expired = grant(-1000);
    const deleted = grant();
    for (const g of [live, expired, deleted]) {
      await staging.create(g, { length: 100 });
      await staging.append(g.assetId, Readable.from([Buffer.alloc(10)]), { expectedOffset: 0 });
    }
    const sweeping = apiProcess('c');
    const [, leftovers, ended] = uploadSweepJobs(
      { expire: async () => [], ended: async (ids) => ids.filter((id) => id === deleted.assetId) },
      sweeping,
    );
    assert.equal(await leftovers?.run(10), 1, 'the expired upload, found by another process');
    assert.deepEqual(await stagedKeys(expired.assetId), []);
    assert.equal(await ended?.run(10), 1, 'the upload whose asset was deleted');
    assert.deepEqual(await stagedKeys(deleted.assetId), []);
    assert.equal((await staging.status(live.assetId))?.offset, 10, 'a live upload stays');
  });
});
