// The `upload` handler on a worker that splits (main.ts): a direct upload longer than the
// chunk threshold is split into pieces that read the asset's own source (no copy of it), write
// under the asset's folder, and whose stitch finishes the asset (transcode/job.ts, finish.ts).
// The pieces run by hand, in order (chunked-helpers.ts); the queue's part is
// test/tasks/pieces.test.ts's, the whole service's chunked-asset.test.ts's.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { assetFinishSteps, createUploadHandler } from '../../src/assets/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import { FolderStore } from '../../src/storage/builtin/folder.ts';
import { createChunkedHandlers } from '../../src/transcode/index.ts';
import { makeClip } from '../helpers/media.ts';
import { fakeContext, runPieces, splitPieces } from '../transcode/chunked-helpers.ts';

const config = loadConfig({
  env: {},
  overrides: { chunkThresholdSecs: 6, chunkSecs: 4, x264Preset: 'ultrafast', perTitle: false },
});
const PID = 'chunkedasset0001';
const SOURCE = `asset/${PID}/source`;

describe('a direct upload longer than the chunk threshold, on a worker that splits', () => {
  let dir: string;
  let store: FolderStore;
  let clip: string;
  const scratch: string[] = [];

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'mp-chunked-asset-'));
    store = new FolderStore(path.join(dir, 'media'));
    clip = await makeClip({ width: 320, height: 180, seconds: 12 });
    await store.putFile(SOURCE, clip, { contentType: 'video/mp4', signal: AbortSignal.timeout(5000) });
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
    for (const s of scratch) await rm(s, { recursive: true, force: true });
  });

  it('is split into pieces that read its source where it is; the stitch makes the AssetOutput', async () => {
    const handler = createUploadHandler({ config, store }, { split: true });
    const params = {
      assetId: '5f7e2b1a-0000-4000-8000-000000000002',
      playbackId: PID,
      input: { key: SOURCE },
      staticMp4: true,
      targetSegmentSizeSecs: 2,
    };
    const pieces = await splitPieces(handler, params, await fakeContext(scratch, { taskId: 'parent1' }));
    assert.deepEqual(
      pieces.map((p) => p.label.replace(/ .*/, '')),
      ['audio', 'video', 'audio', 'video', 'audio', 'video', 'stitch'],
    );
    for (const p of pieces) {
      assert.equal(p.params.stored, SOURCE, 'the pieces read the uploaded source itself');
      assert.equal(p.params.builtinPrefix, `asset/${PID}/`);
    }
    assert.equal(existsSync(path.join(dir, 'media', 'pieces', 'parent1', 'source')), false, 'no copy of the source');
    const handlers = createChunkedHandlers({ config, builtinStore: store, finishSteps: assetFinishSteps() });
    const out = (await runPieces(handlers, pieces, { parentId: 'parent1', scratch })) as Record<string, unknown>;
    const bytes = await readFile(clip);
    assert.equal(out.type, 'video');
    assert.equal(out.size, bytes.length);
    assert.deepEqual(out.hash, [
      { hash: createHash('md5').update(bytes).digest('hex'), algorithm: 'md5' },
      { hash: createHash('sha256').update(bytes).digest('hex'), algorithm: 'sha256' },
    ]);
    assert.deepEqual(out.source, { key: SOURCE });
    assert.deepEqual(out.hls, { key: `asset/${PID}/hls/index.m3u8` });
    const mp4 = out.mp4 as { key: string; size: number }[];
    assert.ok(mp4.length > 0, 'staticMp4: MP4 renditions');
    for (const m of mp4) assert.match(m.key, new RegExp(`^asset/${PID}/mp4/[^/]+\\.mp4$`));
    const spec = out.videoSpec as { duration: number; format: string };
    assert.ok(Math.abs(spec.duration - 12) < 0.1, `duration ${spec.duration}`);
    assert.equal(spec.format, 'mp4');
    for (const key of [SOURCE, `asset/${PID}/hls/index.m3u8`, ...mp4.map((m) => m.key)])
      assert.ok(existsSync(path.join(dir, 'media', key)), key);
    assert.deepEqual(await readFile(path.join(dir, 'media', SOURCE)), bytes, 'the source is untouched');
    assert.equal(existsSync(path.join(dir, 'media', 'pieces', 'parent1')), false, 'the pieces are removed');
  });
});
