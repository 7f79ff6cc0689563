import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createReadStream } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pino } from 'pino';
import { encodeFile } from '@storacha/upload-client/unixfs';
import { delegate } from '@ucanto/core';
import * as ed25519 from '@ucanto/principal/ed25519';
import { CID } from 'multiformats/cid';
import { base64 } from 'multiformats/bases/base64';
import { identity } from 'multiformats/hashes/identity';
import { loadConfig } from '../../../src/config/index.ts';
import { dwebStoreFactory, loadAgent } from '../../../src/storage/dweb/index.ts';
import { createTranscodeHandler } from '../../../src/transcode/index.ts';
import { loadC2paSigner, readManifest } from '../../../src/transcode/c2pa.ts';
import { layout } from '../../../src/transcode/outputs/mp4.ts';
import { makeTestCerts } from '../../helpers/c2pa-certs.ts';
import { makeClip } from '../../helpers/media.ts';
import { startUploadService, type UploadService } from '../../helpers/upload-service.ts';

// The issue 5 acceptance path through the real pipeline: a transcode with c2pa: true and
// storage dweb.storage against the local upload service.

let svc: UploadService;
let input: http.Server;
let inputUrl: string;
let dir: string;

before(async () => {
  svc = await startUploadService();
  dir = await mkdtemp(join(tmpdir(), 'mp-dweb-e2e-'));
  const src = await makeClip({ width: 320, height: 180, seconds: 2, fps: '25' });
  input = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'video/mp4' });
    createReadStream(src).pipe(res);
  });
  await new Promise<void>((r) => input.listen(0, '127.0.0.1', r));
  inputUrl = `http://127.0.0.1:${(input.address() as AddressInfo).port}/input.mp4`;
});
after(async () => {
  input.closeAllConnections();
  input.close();
  await svc.close();
});

test('transcode with c2pa: true to dweb.storage: ipfs:// root, signed Trusted MP4s, CIDs of the produced bytes', async () => {
  const certs = await makeTestCerts();
  const config = loadConfig({
    env: {},
    overrides: {
      dataDir: join(dir, 'data'),
      allowPrivateUrls: true,
      dwebServiceUrl: svc.url,
      dwebServiceDid: svc.did,
      dwebGateway: 'https://gw.example',
      c2paKey: certs.keyPath,
      c2paCerts: certs.chainPath,
    },
  });
  const agent = await loadAgent(config);
  const signer = await loadC2paSigner(config);
  const space = await ed25519.generate();
  await svc.provision(space.did());
  const d = await delegate({
    issuer: space,
    audience: agent,
    capabilities: [
      { can: 'space/blob/add', with: space.did() },
      { can: 'space/index/add', with: space.did() },
      { can: 'upload/add', with: space.did() },
    ],
  });
  const archive = await d.archive();
  assert.ok(archive.ok);
  const proof = CID.createV1(0x0202, identity.digest(archive.ok)).toString(base64);
  const factory = dwebStoreFactory(config, agent);
  const handler = createTranscodeHandler({
    config,
    c2paSigner: signer,
    objectStores: { 'dweb.storage': factory, 'web3.storage': factory },
  });
  const scratchDir = await mkdtemp(join(tmpdir(), 'mp-dweb-scratch-'));
  const logs: string[] = [];
  const log = pino({ level: 'trace' }, { write: (l: string) => void logs.push(l) });
  const out = await handler(
    {
      input: { url: inputUrl },
      storage: { type: 'web3.storage', credentials: { proof } },
      outputs: { mp4: { path: '/out/mp4' }, hls: { path: '/out/hls' } },
      profiles: [{ name: '180p0', width: 320, height: 180, bitrate: 300_000 }],
      c2pa: true,
    },
    { taskId: 't1', attempt: 1, signal: new AbortController().signal, scratchDir, progress: () => {}, log },
  );
  assert.match(out.baseUrl ?? '', /^ipfs:\/\/bafy/);
  const root = (out.baseUrl ?? '').slice('ipfs://'.length);
  assert.ok((await svc.uploads(space.did())).includes(root));
  assert.equal(out.mp4?.[0]?.path, '/out/mp4/180p0.mp4');
  assert.equal(out.mp4?.[0]?.signed, true);
  const files = out.files as { path: string; cid: string; url: string }[];
  const mp4 = files.find((f) => `/${f.path}` === out.mp4?.[0]?.path);
  assert.ok(mp4, 'the MP4 is in the published tree under its requested path');
  assert.equal(mp4.url, `https://gw.example/ipfs/${root}/out/mp4/180p0.mp4`);
  // The MP4 the pipeline produced (still in the scratch dir) is Trusted, and its bytes are what was published.
  const produced = join(scratchDir, 'out', layout.mp4File('180p0'));
  const report = await readManifest(produced, certs.rootPem);
  assert.equal(report.state, 'Trusted', JSON.stringify(report.failures));
  const bytes = await readFile(produced);
  const { cid } = await encodeFile({
    stream: () => Readable.toWeb(Readable.from([bytes])) as ReadableStream<Uint8Array>,
  });
  assert.equal(mp4.cid, cid.toString());
  assert.ok(
    logs.every((l) => !l.includes(proof.slice(0, 40))),
    'the proof is in no log line',
  );
  assert.ok(!JSON.stringify(out).includes(proof.slice(0, 40)), 'the proof is not in the output');
});
