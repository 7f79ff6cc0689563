// Issue #30: a chunked run's MP4s are signed as a single run's are (issue 5): the stitch
// signs each joined MP4, naming the input as its parent by hash.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/index.ts';
import { FolderStore } from '../../src/storage/builtin/index.ts';
import { readManifest } from '../../src/transcode/c2pa.ts';
import { createChunkedHandlers, createTranscodeHandler, loadC2paSigner } from '../../src/transcode/index.ts';
import { makeTestCerts, type TestCerts } from '../helpers/c2pa-certs.ts';
import type { TestHttp } from '../helpers/http-input.ts';
import { makeClip } from '../helpers/media.ts';
import { fakeContext, runPieces, servedInput, splitPieces } from './chunked-helpers.ts';

const scratch: string[] = [];
let web: TestHttp;
let certs: TestCerts;
let root: string;

let close: (() => Promise<void>) | undefined;

before(async () => {
  certs = await makeTestCerts();
  ({ root, web, close } = await servedInput(scratch, {
    prefix: 'mp-chunked-c2pa-',
    route: '/in.mp4',
    clip: await makeClip({ width: 640, height: 360, seconds: 24 }),
  }));
});
after(async () => {
  await close?.();
});

describe('a chunked transcode with C2PA', () => {
  it('signs each stitched MP4 with the input as its parent', async () => {
    const config = loadConfig({
      env: {},
      overrides: {
        allowPrivateUrls: true,
        x264Preset: 'ultrafast',
        chunkThresholdSecs: 10,
        chunkSecs: 8,
        perTitle: false,
        c2paKey: certs.keyPath,
        c2paCerts: certs.chainPath,
      },
    });
    const deps = {
      config,
      builtinStore: new FolderStore(path.join(root, 'media')),
      c2paSigner: await loadC2paSigner(config),
    };
    const params = {
      input: { url: web.url('/in.mp4') },
      outputs: { mp4: { path: '/mp4' } },
      profiles: [{ name: '240p', width: 426, height: 240, bitrate: 400_000 }],
      targetSegmentSizeSecs: 2,
      c2pa: true,
    };
    const ctx = await fakeContext(scratch, { taskId: 'signed' });
    const pieces = await splitPieces(createTranscodeHandler(deps, { split: true }), params, ctx);
    assert.equal(pieces.filter((p) => p.type === 'transcode-chunk').length, 3);
    const out = (await runPieces(createChunkedHandlers(deps), pieces, { parentId: 'signed', scratch })) as {
      mp4: { path: string; signed?: boolean }[];
    };
    assert.equal(out.mp4[0]?.signed, true);
    const r = await readManifest(path.join(root, 'media', 'task', 'signed', 'mp4', '240p.mp4'), certs.rootPem);
    assert.equal(r.state, 'Trusted', JSON.stringify(r.failures));
    const assertions = (r.activeManifest?.assertions ?? []) as {
      label: string;
      data: { actions?: { action: string }[] };
    }[];
    const actions = assertions.find((a) => a.label.startsWith('c2pa.actions'))?.data.actions?.map((a) => a.action);
    assert.deepEqual(actions, ['c2pa.opened', 'c2pa.transcoded']);
  });
});
