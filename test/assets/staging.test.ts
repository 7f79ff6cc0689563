// UploadStaging (assets/staging.ts) on its own, with the folder kind: the offset is the file's size, the declared
// length outlives the instance (a restart), a newer request takes an upload over from a stale
// one (as tus servers lock), bytes past a limit are taken back, a whole upload moves into the
// store, and the sweep frees what no live upload owns. The HTTP side is test/api/uploads.test.ts.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import {
  FolderStagingArea,
  StagedBytesLimitError,
  UploadOffsetError,
  UploadStaging,
  uploadSweepJobs,
} from '../../src/assets/index.ts';
import type { StagedBytes } from '../../src/assets/index.ts';
import { PayloadTooLargeError } from '../../src/lib/errors.ts';
import { FolderStore } from '../../src/storage/builtin/index.ts';
import { waitFor } from '../helpers/server.ts';
import { uploadGrants } from '../helpers/uploads.ts';

/**
 * One owner's allowance, as AssetStore keeps it in the database (test/assets/store.test.ts
 * holds that side); every reservation asked for is recorded.
 */
class Allowance implements StagedBytes {
  readonly held = new Map<string, number>();
  readonly asked: Array<[string, number, number]> = [];
  cap = Number.MAX_SAFE_INTEGER;
  async stage(assetId: string, bytes: { atLeast: number; atMost: number }): Promise<number> {
    this.asked.push([assetId, bytes.atLeast, bytes.atMost]);
    let others = 0;
    for (const [id, n] of this.held) if (id !== assetId) others += n;
    if (others + bytes.atLeast > this.cap) throw new StagedBytesLimitError({ cap: this.cap, held: others });
    const staged = Math.min(bytes.atMost, this.cap - others);
    this.held.set(assetId, staged);
    return staged;
  }
  async unstage(assetId: string): Promise<void> {
    this.held.delete(assetId);
  }
}

describe('UploadStaging', () => {
  let root: string;
  let dir: string;
  let store: FolderStore;
  let staging: UploadStaging;
  const allowance = new Allowance();
  // What completing an upload tells the database: whether the upload could still finish.
  const finished: [string, number][] = [];
  let canFinish = true;
  const sessions = {
    finish: async (id: string, size: number) => {
      finished.push([id, size]);
      return canFinish;
    },
  };
  const stagingIn = (folder: string) =>
    new UploadStaging({ area: new FolderStagingArea(folder, store), store, maxBytes: 10_000, allowance, sessions });
  const grant = uploadGrants();
  const bytes = (size: number, byte = 0x61) => Buffer.alloc(size, byte);

  before(() => {
    root = mkdtempSync(path.join(tmpdir(), 'mediaplane-staging-'));
    dir = path.join(root, 'uploads');
    store = new FolderStore(path.join(root, 'media'));
    staging = stagingIn(dir);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('keeps the offset (the file) and the declared length (the sidecar) across instances', async () => {
    const g = grant();
    await staging.create(g, { length: 5000 });
    const now = await staging.append(g.assetId, Readable.from([bytes(700), bytes(300)]), { expectedOffset: 0 });
    assert.equal(now.offset, 1000);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    const restarted = stagingIn(dir);
    const later = await restarted.status(g.assetId);
    assert.deepEqual(later, { offset: 1000, length: 5000, expiresAt: g.expiresAt });
    await assert.rejects(
      restarted.append(g.assetId, Readable.from([bytes(10)]), { expectedOffset: 900 }),
      UploadOffsetError,
    );
  });

  it('a newer request takes the upload over from a stale one, which lets go with the bytes it wrote', async () => {
    const g = grant();
    await staging.create(g, { length: 5000 });
    // A connection that sent 1000 bytes and then nothing (half-open, as after a network drop).
    const stale = new PassThrough();
    const first = staging.append(g.assetId, stale, { expectedOffset: 0 });
    stale.write(bytes(1000));
    await waitFor(async () => statSync(path.join(dir, g.assetId)).size === 1000, 5000, 'the first bytes to land');
    const resumed = staging.append(g.assetId, Readable.from([bytes(4000, 0x62)]), { expectedOffset: 1000 });
    await assert.rejects(first, /took over/);
    assert.ok(stale.destroyed, 'the stale request is ended');
    assert.equal((await resumed).offset, 5000);
    const file = await readFile(path.join(dir, g.assetId));
    assert.equal(file.subarray(0, 1000).toString(), 'a'.repeat(1000));
    assert.equal(file.subarray(1000).toString(), 'b'.repeat(4000));
  });

  it('bytes past the declared length or maxBytes are taken back (413), those before are kept', async () => {
    const g = grant();
    await staging.create(g, { length: 2000 });
    await staging.append(g.assetId, Readable.from([bytes(500)]), { expectedOffset: 0 });
    await assert.rejects(
      staging.append(g.assetId, Readable.from([bytes(1000), bytes(1000)]), { expectedOffset: 500 }),
      PayloadTooLargeError,
    );
    assert.equal((await staging.status(g.assetId))?.offset, 500);
    await assert.rejects(staging.create(grant(), { length: 10_001 }), PayloadTooLargeError);
    const direct = grant();
    await assert.rejects(staging.put(direct, Readable.from([bytes(6000), bytes(6000)]), {}), PayloadTooLargeError);
    assert.ok(!readdirSync(dir).some((f) => f.startsWith(direct.assetId)), 'a refused direct upload keeps nothing');
  });

  it("a declared length is reserved of the owner's allowance before a byte is written; one that does not fit changes nothing", async () => {
    // The uploads of the tests before stay as they are: counted from here, they hold nothing.
    allowance.held.clear();
    allowance.cap = 3000;
    try {
      const first = grant();
      await staging.create(first, { length: 2000 });
      assert.equal(allowance.held.get(first.assetId), 2000);
      await staging.append(first.assetId, Readable.from([bytes(100)]), { expectedOffset: 0 });
      const second = grant();
      await assert.rejects(staging.create(second, { length: 1001 }), StagedBytesLimitError);
      assert.ok(!existsSync(path.join(dir, second.assetId)), 'nothing is staged for the refused upload');
      await assert.rejects(staging.create(first, { length: 3001 }), PayloadTooLargeError, 'nor is a larger restart');
      assert.equal((await staging.status(first.assetId))?.offset, 100, 'which leaves the upload as it was');
      await assert.rejects(
        staging.put(second, Readable.from([bytes(1001)]), { length: 1001 }),
        StagedBytesLimitError,
        'a direct PUT with its Content-Length',
      );
      await staging.remove(first.assetId);
      assert.equal(allowance.held.has(first.assetId), false, 'removing the upload frees its share');
      await staging.create(second, { length: 3000 });
      await staging.remove(second.assetId);
    } finally {
      allowance.cap = Number.MAX_SAFE_INTEGER;
    }
  });

  it('a streamed direct PUT reserves ahead of its bytes and stops, keeping nothing, where the allowance ends', async () => {
    // The uploads of the tests before stay as they are: counted from here, they hold nothing.
    allowance.held.clear();
    allowance.cap = 5000;
    try {
      const other = grant();
      await staging.create(other, { length: 2000 });
      const streamed = grant();
      const chunks = [bytes(1000), bytes(1000), bytes(1000), bytes(1000)];
      await assert.rejects(staging.put(streamed, Readable.from(chunks), {}), (err: Error) => {
        assert.ok(err instanceof StagedBytesLimitError);
        assert.match(err.message, /at most 5000 bytes \(MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER\)/);
        return true;
      });
      assert.ok(!readdirSync(dir).some((f) => f.startsWith(streamed.assetId)), 'nothing is kept');
      assert.equal(allowance.held.has(streamed.assetId), false, 'nor held');
      const steps = allowance.asked.filter(([id]) => id === streamed.assetId).map(([, least]) => least);
      assert.deepEqual(steps, [1000, 4000], 'one reservation ahead (up to maxBytes), then the one that did not fit');

      const fits = grant();
      await staging.put(fits, Readable.from([bytes(1500), bytes(1500)]), {});
      assert.equal((await staging.status(fits.assetId))?.offset, 3000, 'exactly the room left is taken');
      await staging.remove(fits.assetId);
      await staging.remove(other.assetId);
    } finally {
      allowance.cap = Number.MAX_SAFE_INTEGER;
    }
  });

  it('complete moves the whole file to the source key and queues it; an upload that cannot finish leaves nothing', async () => {
    const g = grant();
    await staging.put(g, Readable.from([bytes(1234)]), {});
    finished.length = 0;
    const ok = await staging.complete(g);
    assert.ok(ok);
    assert.deepEqual(finished, [[g.assetId, 1234]]);
    assert.equal((await store.stat(`asset/${g.playbackId}/source`))?.size, 1234);
    assert.ok(!readdirSync(dir).some((f) => f.startsWith(g.assetId)));

    const gone = grant();
    await staging.put(gone, Readable.from([bytes(10)]), {});
    canFinish = false;
    try {
      assert.equal(await staging.complete(gone), false);
    } finally {
      canFinish = true;
    }
    assert.equal(await store.stat(`asset/${gone.playbackId}/source`), undefined, 'the stored file goes too');
  });

  it('the sweep fails expired uploads and frees what no live upload owns', async () => {
    const live = grant();
    const expired = grant(-1000);
    const failed = grant();
    const deleted = grant();
    for (const g of [live, expired, failed, deleted]) await staging.create(g, { length: 100 });
    writeFileSync(path.join(dir, 'orphan-without-sidecar'), 'x');
    const asked: string[][] = [];
    const sessions = {
      expire: async () => [failed.assetId],
      // The asset of `deleted` was deleted (by a request to any process): its upload ended.
      ended: async (ids: string[]) => {
        asked.push(ids);
        return ids.filter((id) => id === deleted.assetId);
      },
    };
    const [expiry, leftovers, ended] = uploadSweepJobs(sessions, staging);
    assert.equal(await expiry?.run(10), 1);
    assert.ok(!existsSync(path.join(dir, failed.assetId)), 'the bytes of an upload the sweep failed are freed');
    assert.equal(await leftovers?.run(10), 2, 'the expired upload and the orphan');
    assert.ok(existsSync(path.join(dir, live.assetId)));
    assert.ok(existsSync(path.join(dir, `${live.assetId}.json`)));
    assert.ok(!existsSync(path.join(dir, expired.assetId)));
    assert.ok(!existsSync(path.join(dir, 'orphan-without-sidecar')));
    assert.ok(allowance.held.has(deleted.assetId));
    assert.equal(await ended?.run(10), 1, 'the upload whose asset was deleted');
    assert.ok(!existsSync(path.join(dir, deleted.assetId)), 'its bytes are freed before its URL expires');
    assert.equal(allowance.held.has(deleted.assetId), false, 'and its share of the allowance');
    assert.ok(asked.at(-1)?.includes(live.assetId), 'every upload staged here is asked about');
    assert.ok(existsSync(path.join(dir, live.assetId)), 'a live upload stays');
  });
});
