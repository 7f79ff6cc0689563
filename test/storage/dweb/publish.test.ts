import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { inspect, promisify } from 'node:util';
import { encodeFile } from '@storacha/upload-client/unixfs';
import { delegate } from '@ucanto/core';
import * as ed25519 from '@ucanto/principal/ed25519';
import { CID } from 'multiformats/cid';
import { base64 } from 'multiformats/bases/base64';
import { identity } from 'multiformats/hashes/identity';
import { ValidationError } from '../../../src/lib/errors.ts';
import {
  DwebObjectStore,
  loadAgent,
  publishDirectory,
  validateDwebProof,
  type AgentSigner,
} from '../../../src/storage/dweb/index.ts';
import { runAgentCommand } from '../../../src/cli/agent.ts';
import { loadConfig } from '../../../src/config/index.ts';
import { startUploadService, type UploadService } from '../../helpers/upload-service.ts';

const run = promisify(execFile);
let svc: UploadService;
let agent: AgentSigner;
let space: ed25519.EdSigner;
let dataDir: string;

const ALL = ['space/blob/add', 'space/index/add', 'upload/add'];

/** A base64 delegation as `storacha delegation create --base64` prints it (a CID of the CAR archive). */
async function makeProof(
  opts: { audience?: { did(): `did:${string}:${string}` }; can?: string[]; expiration?: number } = {},
): Promise<string> {
  const d = await delegate({
    issuer: space,
    audience: opts.audience ?? agent,
    capabilities: (opts.can ?? ALL).map((can) => ({ can, with: space.did() })) as [
      { can: `${string}/${string}`; with: `did:key:${string}` },
    ],
    expiration: opts.expiration ?? Math.floor(Date.now() / 1000) + 3600,
  });
  const archive = await d.archive();
  assert.ok(archive.ok);
  return CID.createV1(0x0202, identity.digest(archive.ok)).toString(base64);
}

function serviceOpts(proof: string) {
  return { proof, agent, serviceUrl: svc.url, serviceDid: svc.did, gateway: 'https://gw.example/' };
}

before(async () => {
  svc = await startUploadService();
  dataDir = await mkdtemp(join(tmpdir(), 'mp-dweb-data-'));
  agent = await loadAgent({ dataDir, dwebAgentKey: undefined });
  space = await ed25519.generate();
  await svc.provision(space.did());
});
after(() => svc.close());

test('the agent key is generated once, kept in the data dir, and printed by `mediaplane agent did`', async () => {
  const again = await loadAgent({ dataDir, dwebAgentKey: undefined });
  assert.equal(again.did(), agent.did());
  assert.match(agent.did(), /^did:key:z6Mk/);
  const lines: string[] = [];
  const config = loadConfig({ env: { MEDIAPLANE_DATA_DIR: dataDir } });
  assert.equal(await runAgentCommand(['did'], { config, out: (l) => lines.push(l) }), 0);
  assert.deepEqual(lines, [agent.did()]);
  // A key given by the setting wins over the file.
  const given = await ed25519.generate();
  assert.equal((await loadAgent({ dataDir, dwebAgentKey: ed25519.format(given) })).did(), given.did());
  assert.equal(await runAgentCommand(['nope'], { config, out: () => {}, err: () => {} }), 2);
});

test('a delegated upload completes, the service lists the root, and file CIDs match the bytes', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'mp-dweb-out-'));
  await mkdir(join(dir, 'out/hls/360p0'), { recursive: true });
  await mkdir(join(dir, 'out/mp4'), { recursive: true });
  await run('ffmpeg', [
    '-v',
    'error',
    '-f',
    'lavfi',
    '-i',
    'testsrc=size=256x144:rate=25',
    '-t',
    '2',
    '-c:v',
    'libx264',
    '-preset',
    'ultrafast',
    '-movflags',
    '+faststart',
    join(dir, 'out/mp4/360p0.mp4'),
  ]);
  await writeFile(join(dir, 'out/hls/index.m3u8'), '#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000000\n360p0/index.m3u8\n');
  await writeFile(join(dir, 'out/hls/360p0/index.m3u8'), '#EXTM3U\n#EXTINF:2,\n0.ts\n#EXT-X-ENDLIST\n');
  await writeFile(join(dir, 'out/hls/360p0/0.ts'), Buffer.alloc(3 * 188, 0x47));
  const proof = await makeProof();
  const result = await publishDirectory(dir, serviceOpts(proof));
  assert.deepEqual((await svc.uploads(space.did())).includes(result.rootCid), true);
  assert.deepEqual(
    result.files.map((f) => f.path),
    ['out/hls/360p0/0.ts', 'out/hls/360p0/index.m3u8', 'out/hls/index.m3u8', 'out/mp4/360p0.mp4'],
  );
  for (const f of result.files) {
    const bytes = await readFile(join(dir, f.path));
    const { cid } = await encodeFile({
      stream: () => Readable.toWeb(Readable.from([bytes])) as ReadableStream<Uint8Array>,
    });
    assert.equal(f.cid, cid.toString(), `CID of ${f.path}`);
    assert.equal(f.size, bytes.length);
    assert.equal(f.url, `https://gw.example/ipfs/${result.rootCid}/${f.path}`);
  }
  // Nothing the service saw carried the proof in a URL.
  assert.ok(svc.requests.every((r) => !r.includes(proof.slice(10, 60))));
});

test('the dweb ObjectStore collects files and streams, publishes on close and answers ipfs://<root>', async () => {
  const proof = await makeProof({ can: ['space/*', 'upload/*'] });
  const store = new DwebObjectStore({ ...serviceOpts(proof), stagingParent: tmpdir() });
  const src = join(await mkdtemp(join(tmpdir(), 'mp-dweb-src-')), 'a.mp4');
  await writeFile(src, 'not really an mp4');
  const signal = new AbortController().signal;
  await store.check(signal);
  await store.put('out/mp4/a.mp4', { file: src }, { contentType: 'video/mp4', signal });
  await store.put(
    'out/hls/index.m3u8',
    { stream: Readable.from(['#EXTM3U\n']) },
    { contentType: 'application/vnd.apple.mpegurl', signal },
  );
  const { baseUrl } = await store.close(signal);
  assert.equal(baseUrl, `ipfs://${store.published?.rootCid}`);
  assert.ok((await svc.uploads(space.did())).includes(store.published?.rootCid ?? ''));
  assert.deepEqual(
    store.published?.files.map((f) => f.path),
    ['out/hls/index.m3u8', 'out/mp4/a.mp4'],
  );
  assert.ok(!inspect(store, { depth: 5 }).includes(proof.slice(10, 60)), 'the store does not show the proof');
  await assert.rejects(store.put('../escape', { file: src }, { contentType: 'x', signal }));
});

test('bad proofs are refused with messages that name the field and the problem, never the proof', async () => {
  const other = await ed25519.generate();
  const cases: [string, Promise<string>, RegExp][] = [
    ['unparseable', Promise.resolve('bm90IGEgcHJvb2Y='), /storage\.credentials\.proof: cannot be parsed/],
    [
      'another agent',
      makeProof({ audience: other }),
      /storage\.credentials\.proof: is delegated to did:key:\S+, not to this service's agent/,
    ],
    [
      'expired',
      makeProof({ expiration: Math.floor(Date.now() / 1000) - 60 }),
      /storage\.credentials\.proof: has expired/,
    ],
    [
      'no upload/add',
      makeProof({ can: ['space/blob/add', 'space/index/add'] }),
      /storage\.credentials\.proof: lacks upload\/add/,
    ],
    ['nothing', makeProof({ can: ['space/info'] }), /lacks space\/blob\/add, space\/index\/add, upload\/add/],
  ];
  for (const [name, p, re] of cases) {
    const proof = await p;
    await assert.rejects(validateDwebProof(proof, { agentDid: agent.did() }), (e: unknown) => {
      assert.ok(e instanceof ValidationError, name);
      assert.equal(e.statusCode, 422);
      assert.match(e.message, re, name);
      assert.ok(!inspect(e, { depth: 10 }).includes(proof.slice(0, 40)), `${name}: the proof is not in the error`);
      return true;
    });
  }
  // publishDirectory checks too, before uploading anything.
  await assert.rejects(
    publishDirectory(await mkdtemp(join(tmpdir(), 'mp-dweb-x-')), serviceOpts(await makeProof({ audience: other }))),
    ValidationError,
  );
});

test('an upload the service refuses (space not provisioned) fails as storage denied without the proof in the message', async () => {
  const unprovisioned = await ed25519.generate();
  const d = await delegate({
    issuer: unprovisioned,
    audience: agent,
    capabilities: ALL.map((can) => ({ can, with: unprovisioned.did() })) as [
      { can: `${string}/${string}`; with: `did:key:${string}` },
    ],
  });
  const archive = await d.archive();
  assert.ok(archive.ok);
  const proof = CID.createV1(0x0202, identity.digest(archive.ok)).toString(base64);
  const dir = await mkdtemp(join(tmpdir(), 'mp-dweb-deny-'));
  await writeFile(join(dir, 'a.txt'), 'hello');
  await assert.rejects(publishDirectory(dir, serviceOpts(proof)), (e: unknown) => {
    assert.ok(e instanceof Error);
    assert.match(e.message, /^dweb\.storage: /);
    assert.ok(!inspect(e, { depth: 10 }).includes(proof.slice(0, 40)), 'no proof in the error');
    return true;
  });
});
