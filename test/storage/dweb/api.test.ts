import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { CarBlockIterator } from '@ipld/car';
import * as dagPB from '@ipld/dag-pb';
import { encodeFile } from '@storacha/upload-client/unixfs';
import { delegate } from '@ucanto/core';
import * as ed25519 from '@ucanto/principal/ed25519';
import { CID } from 'multiformats/cid';
import { base64 } from 'multiformats/bases/base64';
import { identity } from 'multiformats/hashes/identity';
import { sha256 } from 'multiformats/hashes/sha2';
import { readManifest } from '../../../src/transcode/c2pa.ts';
import { makeTestCerts, type TestCerts } from '../../helpers/c2pa-certs.ts';
import { makeClip } from '../../helpers/media.ts';
import { startTestServer, waitFor, type TestServer } from '../../helpers/server.ts';
import { startUploadService, type UploadService } from '../../helpers/upload-service.ts';

// Issue 5's acceptance through the real HTTP API: POST /api/transcode with storage
// dweb.storage (and its web3.storage alias) and c2pa: true against a local upload service,
// the request-time proof checks (422, nothing queued), the 422 of a server without C2PA
// settings, and no proof or C2PA key in any response body or log line.

const run = promisify(execFile);
const RAW = 0x55;
type Ability = `${string}/${string}`;
const ABILITIES: readonly Ability[] = ['space/blob/add', 'space/index/add', 'upload/add'];

let svc: UploadService;
let certs: TestCerts;
let server: TestServer;
let key: string;
let input: http.Server;
let inputUrl: string;
let dir: string;
const bodies: string[] = [];

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await server.call(method, path, { key, ...(body === undefined ? {} : { body }) });
  bodies.push(JSON.stringify(res.body), JSON.stringify([...res.headers]));
  return res;
}

/** A base64 proof (the `storacha delegation create --base64` form) from `space` to `audience`. */
async function proofFor(
  space: ed25519.EdSigner,
  audience: { did(): `did:${string}:${string}` },
  opts: { can?: readonly Ability[]; expiration?: number } = {},
): Promise<string> {
  const [first, ...rest] = (opts.can ?? ABILITIES).map((can) => ({ can, with: space.did() }));
  assert.ok(first);
  const d = await delegate({
    issuer: space,
    audience,
    capabilities: [first, ...rest],
    ...(opts.expiration ? { expiration: opts.expiration } : {}),
  });
  const archive = await d.archive();
  assert.ok(archive.ok);
  return CID.createV1(0x0202, identity.digest(archive.ok)).toString(base64);
}

async function newSpace(): Promise<ed25519.EdSigner> {
  const space = await ed25519.generate();
  await svc.provision(space.did());
  return space;
}

function transcodeBody(storage: unknown, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    input: { url: inputUrl },
    storage,
    outputs: { hls: { path: '/out/hls' }, mp4: { path: 'out/mp4' } },
    profiles: [
      { name: '180p0', width: 320, height: 180, bitrate: 300_000 },
      { name: '144p0', width: 256, height: 144, bitrate: 200_000 },
    ],
    ...over,
  };
}

async function completed(id: string): Promise<any> {
  return waitFor(
    async () => {
      const t = (await call('GET', `/api/task/${id}`)).body;
      assert.notEqual(t.status.phase, 'failed', t.status.errorMessage);
      return t.status.phase === 'completed' && t;
    },
    30_000,
    `task ${id} to complete`,
  );
}

/** Every block of every shard the service stored for `root` in `space`, keyed by CID, hashes checked. */
async function storedBlocks(space: `did:key:${string}`, root: string): Promise<Map<string, Uint8Array>> {
  const list = await svc.context.uploadTable.list(space);
  assert.ok(list.ok);
  const upload = list.ok.results.find((u) => u.root.toString() === root);
  assert.ok(upload?.shards?.length, 'the upload lists its shards');
  const blocks = new Map<string, Uint8Array>();
  for (const shard of upload.shards) {
    const got = await svc.context.blobRetriever.stream(shard.multihash);
    assert.ok(got.ok, `shard ${shard} is retrievable`);
    for await (const { cid, bytes } of await CarBlockIterator.fromIterable(Readable.fromWeb(got.ok as never))) {
      assert.deepEqual((await sha256.digest(bytes)).bytes, cid.multihash.bytes, `block ${cid} matches its hash`);
      blocks.set(cid.toString(), bytes);
    }
  }
  return blocks;
}

/** Resolves `/a/b/c` under the UnixFS directory `root` and returns the file's CID and bytes. */
function resolveFile(blocks: Map<string, Uint8Array>, root: string, path: string): { cid: string; bytes: Buffer } {
  const block = (cid: CID): Uint8Array => {
    const b = blocks.get(cid.toString());
    assert.ok(b, `block ${cid} is in the uploaded shards`);
    return b;
  };
  let cid = CID.parse(root);
  for (const name of path.split('/').filter(Boolean)) {
    const link = dagPB.decode(block(cid)).Links.find((l) => l.Name === name);
    assert.ok(link, `${path}: ${name} is in the published tree`);
    cid = link.Hash as CID;
  }
  // The client encodes files with raw leaves: a file is a raw block or a dag-pb tree of them.
  const read = (c: CID): Buffer[] => {
    if (c.code === RAW) return [Buffer.from(block(c))];
    const node = dagPB.decode(block(c));
    assert.ok(node.Links.length > 0, `${c} is a file with raw leaves`);
    return node.Links.flatMap((l) => read(l.Hash as CID));
  };
  return { cid: cid.toString(), bytes: Buffer.concat(read(cid)) };
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mp-dweb-api-'));
  const [src, c, s] = await Promise.all([
    makeClip({ width: 320, height: 180, seconds: 2, fps: '25' }),
    makeTestCerts(),
    startUploadService(),
  ]);
  certs = c;
  svc = s;
  input = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'video/mp4' });
    createReadStream(src).pipe(res);
  });
  await new Promise<void>((r) => input.listen(0, '127.0.0.1', r));
  inputUrl = `http://127.0.0.1:${(input.address() as AddressInfo).port}/input.mp4`;
  server = await startTestServer({
    roles: { api: true, worker: true },
    settings: {
      dwebServiceUrl: svc.url,
      dwebServiceDid: svc.did,
      dwebGateway: 'https://gw.example',
      c2paKey: certs.keyPath,
      c2paCerts: certs.chainPath,
      allowPrivateUrls: true,
      logLevel: 'debug',
    },
  });
  key = await server.key('alice');
});

after(async () => {
  await server?.stop();
  input?.closeAllConnections();
  input?.close();
  await svc?.close();
  await rm(dir, { recursive: true, force: true });
});

const proofs: string[] = [];

test('dweb.storage with c2pa: true completes; ipfs:// root; paths resolve to the published, Trusted MP4s', async () => {
  const space = await newSpace();
  const proof = await proofFor(space, server.running.core.agent);
  const aliasSpace = await newSpace();
  const aliasProof = await proofFor(aliasSpace, server.running.core.agent);
  proofs.push(proof, aliasProof);

  const posted = await call(
    'POST',
    '/api/transcode',
    transcodeBody({ type: 'dweb.storage', credentials: { proof } }, { c2pa: true }),
  );
  assert.equal(posted.status, 200, JSON.stringify(posted.body));
  assert.deepEqual(posted.body.params['transcode-file'].storage, { type: 'dweb.storage' }, 'the proof is omitted');
  // The alias, smaller: one rendition, MP4 only, unsigned.
  const alias = await call(
    'POST',
    '/api/transcode',
    transcodeBody(
      { type: 'web3.storage', credentials: { proof: aliasProof } },
      {
        outputs: { mp4: { path: '/alias' } },
        profiles: [{ name: '144p0', width: 256, height: 144, bitrate: 200_000 }],
      },
    ),
  );
  assert.equal(alias.status, 200, JSON.stringify(alias.body));

  const task = await completed(posted.body.id);
  const out = task.output.transcodeFile;
  assert.match(out.baseUrl, /^ipfs:\/\/bafy[a-z2-7]+$/);
  const root = out.baseUrl.slice('ipfs://'.length);
  assert.ok((await svc.uploads(space.did())).includes(root), 'the upload service lists the root CID in the space');
  assert.equal(out.hls.path, '/out/hls/index.m3u8');
  assert.deepEqual(out.mp4.map((m: { path: string }) => m.path).sort(), ['/out/mp4/144p0.mp4', '/out/mp4/180p0.mp4']);

  const blocks = await storedBlocks(space.did(), root);
  const master = resolveFile(blocks, root, out.hls.path).bytes.toString('utf8');
  assert.match(master, /^#EXTM3U/);
  for (const name of ['180p0', '144p0']) {
    assert.match(master, new RegExp(`^${name}/index\\.m3u8$`, 'm'));
    const media = resolveFile(blocks, root, `/out/hls/${name}/index.m3u8`).bytes.toString('utf8');
    const segment = media.split('\n').find((l) => l.endsWith('.ts'));
    assert.ok(segment, `${name} lists a segment`);
    assert.ok(resolveFile(blocks, root, `/out/hls/${name}/${segment}`).bytes.length > 0);
  }
  for (const rendition of out.mp4) {
    assert.equal(rendition.signed, true, `${rendition.path} is marked signed`);
    const { cid, bytes } = resolveFile(blocks, root, rendition.path);
    assert.equal(bytes.length, rendition.size, `${rendition.path}: size`);
    const listed = out.files.find((f: { path: string }) => `/${f.path}` === rendition.path);
    assert.equal(listed?.cid, cid, `${rendition.path}: the CID the output lists is the one under the root`);
    assert.equal(listed?.url, `https://gw.example/ipfs/${root}${rendition.path}`);
    const recomputed = await encodeFile({
      stream: () => Readable.toWeb(Readable.from([bytes])) as ReadableStream<Uint8Array>,
    });
    assert.equal(recomputed.cid.toString(), cid, `${rendition.path}: the CID is that of the bytes`);
    const file = join(dir, rendition.path.replaceAll('/', '_'));
    await writeFile(file, bytes);
    const report = await readManifest(file, certs.rootPem);
    assert.equal(report.state, 'Trusted', `${rendition.path}: ${JSON.stringify(report.failures)}`);
    await run('ffmpeg', ['-v', 'error', '-xerror', '-i', file, '-f', 'null', '-']);
  }

  const aliasTask = await completed(alias.body.id);
  const aliasOut = aliasTask.output.transcodeFile;
  assert.match(aliasOut.baseUrl, /^ipfs:\/\/bafy/);
  assert.ok((await svc.uploads(aliasSpace.did())).includes(aliasOut.baseUrl.slice('ipfs://'.length)));
  assert.deepEqual(
    aliasOut.mp4.map((m: { path: string }) => m.path),
    ['/alias/144p0.mp4'],
  );
  assert.deepEqual(aliasTask.params['transcode-file'].storage, { type: 'web3.storage' });
});

test('an upload the service refuses (space never provisioned) fails the task with a message', async () => {
  const proof = await proofFor(await ed25519.generate(), server.running.core.agent);
  proofs.push(proof);
  const posted = await call(
    'POST',
    '/api/transcode',
    transcodeBody(
      { type: 'dweb.storage', credentials: { proof } },
      {
        outputs: { mp4: { path: '/unprovisioned' } },
        profiles: [{ name: '144p0', width: 256, height: 144, bitrate: 200_000 }],
      },
    ),
  );
  assert.equal(posted.status, 200, JSON.stringify(posted.body));
  const task = await waitFor(
    async () => {
      const t = (await call('GET', `/api/task/${posted.body.id}`)).body;
      return t.status.phase === 'failed' && t;
    },
    30_000,
    'the task to fail',
  );
  assert.equal(task.output, undefined);
  // Refused by the service: a user-fixable failure, not retried, and saying why.
  assert.match(
    task.status.errorMessage,
    /^dweb\.storage: the upload service refused the upload: .*has no storage provider/,
  );
  assert.ok(!task.status.retries, 'not retried');
});

test('bad proofs are refused at POST with 422 naming the field and the problem; nothing is queued', async () => {
  const agent = server.running.core.agent;
  const space = await newSpace();
  const other = await ed25519.generate();
  const cases: [string, string, RegExp][] = [
    ['unparseable', 'bm90IGEgcHJvb2Y=', /^storage\.credentials\.proof: cannot be parsed/],
    [
      'another agent',
      await proofFor(space, other),
      new RegExp(
        `^storage\\.credentials\\.proof: is delegated to ${other.did()}, not to this service's agent ${agent.did()}`,
      ),
    ],
    [
      'expired',
      await proofFor(space, agent, { expiration: Math.floor(Date.now() / 1000) - 60 }),
      /^storage\.credentials\.proof: has expired/,
    ],
    [
      'no upload/add',
      await proofFor(space, agent, { can: ['space/blob/add', 'space/index/add'] }),
      /^storage\.credentials\.proof: lacks upload\/add/,
    ],
  ];
  const before = (await call('GET', '/api/task?limit=100')).body.length;
  for (const [what, proof, message] of cases) {
    proofs.push(proof);
    for (const type of ['dweb.storage', 'web3.storage']) {
      const res = await call('POST', '/api/transcode', transcodeBody({ type, credentials: { proof } }));
      assert.equal(res.status, 422, `${what} (${type})`);
      assert.equal(res.body.errors.length, 1, JSON.stringify(res.body));
      assert.match(res.body.errors[0], message, what);
    }
  }
  assert.equal((await call('GET', '/api/task?limit=100')).body.length, before, 'no task was created');
});

test('a server without C2PA settings refuses c2pa: true with 422', async () => {
  const plain = await startTestServer({
    roles: { api: true, worker: false },
    settings: { dwebServiceUrl: svc.url, dwebServiceDid: svc.did },
  });
  try {
    const k = await plain.key('bob');
    const proof = await proofFor(await newSpace(), plain.running.core.agent);
    proofs.push(proof);
    const res = await plain.call('POST', '/api/transcode', {
      key: k,
      body: transcodeBody({ type: 'dweb.storage', credentials: { proof } }, { c2pa: true }),
    });
    bodies.push(JSON.stringify(res.body));
    assert.equal(res.status, 422);
    assert.deepEqual(res.body, { errors: ['c2pa: C2PA signing is not configured on this server'] });
    assert.deepEqual((await plain.call('GET', '/api/task', { key: k })).body, []);
    assert.ok(!plain.logs.text.includes(proof.slice(8, 60)), 'the proof is in no log line');
  } finally {
    await plain.stop();
  }
});

test('no proof and no C2PA key in any response body or log line', async () => {
  const pem = await readFile(certs.keyPath, 'utf8');
  const keyLines = pem.split('\n').filter((l) => l && !l.startsWith('-----'));
  assert.ok(keyLines.length > 0 && proofs.length >= 8);
  const logs = server.logs.text;
  assert.ok(logs.includes('C2PA signing enabled'), 'the logs were captured');
  const seen = bodies.join('\n');
  for (const proof of proofs) {
    // Slices past the common multibase/CID prefix, so a partial quote is caught too.
    for (const part of [proof, proof.slice(8, 48), proof.slice(-40)]) {
      assert.ok(!seen.includes(part), 'the proof is in no response body');
      assert.ok(!logs.includes(part), 'the proof is in no log line');
    }
  }
  assert.ok(
    svc.requests.every((r) => proofs.every((p) => !r.includes(p.slice(8, 48)))),
    'no proof in a URL sent to the upload service',
  );
  for (const line of keyLines) {
    assert.ok(!seen.includes(line), 'the C2PA key is in no response body');
    assert.ok(!logs.includes(line), 'the C2PA key is in no log line');
  }
});
