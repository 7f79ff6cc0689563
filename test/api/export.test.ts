// Exports (issue #28, spec/API.md section C): POST /api/asset/{id}/export to a custom URL (a
// local receiver gets the exact bytes, with the method and headers; 5xx retried, 4xx not,
// redirects not followed, private addresses refused) and to IPFS through a real Storacha
// upload service (the CID of the bytes, computed here on its own, is the asset's
// storage.ipfs.cid; the bytes the service keeps are the asset's), and export-data (a JSON
// document on IPFS). The `livepeer` SDK 3.5 has no export method: the requests go over plain
// HTTP, and every Task and Asset answered is parsed with the SDK's own models. No header value,
// presigned query or proof appears in an answer or a log line.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import * as dagPB from '@ipld/dag-pb';
import { CarBlockIterator } from '@ipld/car';
import { encodeFile } from '@storacha/upload-client/unixfs';
import { delegate } from '@ucanto/core';
import * as ed25519 from '@ucanto/principal/ed25519';
import { Livepeer } from 'livepeer';
import { Asset$inboundSchema } from 'livepeer/models/components/asset.js';
import { Task$inboundSchema } from 'livepeer/models/components/task.js';
import { CID } from 'multiformats/cid';
import { base64 } from 'multiformats/bases/base64';
import { identity } from 'multiformats/hashes/identity';
import { sendFile } from '../../src/assets/export-http.ts';
import { StorageDeniedError, TimeoutError } from '../../src/lib/errors.ts';
import { makeClip } from '../helpers/media.ts';
import { databaseKinds, startTestServer, waitFor, type TestServer } from '../helpers/server.ts';
import { startUploadService, type UploadService } from '../helpers/upload-service.ts';

const HEADER_SECRET = 'Bearer export-header-secret-7f3a';
const QUERY_SECRET = 'X-Amz-Signature=query-secret-c41d';
const RAW = 0x55;
type Ability = `${string}/${string}`;

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

interface Received {
  path: string;
  method: string;
  headers: http.IncomingHttpHeaders;
  sha256: string;
  size: number;
}

/** A receiver on 127.0.0.1:0: /ok takes the file, /fail500 and /missing refuse it, /redirect sends it to /ok. */
async function startReceiver(): Promise<{ url(p: string): string; got: Received[]; close(): Promise<void> }> {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      got.push({ path, method: req.method ?? '', headers: req.headers, sha256: sha256(body), size: body.length });
      if (path === '/ok') res.writeHead(200).end('stored');
      else if (path === '/fail500') res.writeHead(500).end('try later');
      else if (path === '/redirect') res.writeHead(302, { location: `/ok?${QUERY_SECRET}` }).end();
      else res.writeHead(404).end('no such bucket');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (p) => `http://127.0.0.1:${port}${p}`,
    got,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A base64 delegation of `space`'s upload abilities to `audience` (`storacha delegation create --base64`). */
async function proofFor(space: ed25519.EdSigner, audience: { did(): `did:${string}:${string}` }): Promise<string> {
  const abilities: Ability[] = ['space/blob/add', 'space/index/add', 'upload/add'];
  const [first, ...rest] = abilities.map((can) => ({ can, with: space.did() }));
  assert.ok(first);
  // An hour: ucanto's default is 30 s, which a busy machine outlives before the export runs.
  const expiration = Math.floor(Date.now() / 1000) + 3600;
  const d = await delegate({ issuer: space, audience, capabilities: [first, ...rest], expiration });
  const archive = await d.archive();
  assert.ok(archive.ok);
  return CID.createV1(0x0202, identity.digest(archive.ok)).toString(base64);
}

/** The CID the UnixFS encoder of the Storacha client gives these bytes, computed here on its own. */
async function cidOf(bytes: Buffer): Promise<string> {
  const { cid } = await encodeFile({
    stream: () => Readable.toWeb(Readable.from([bytes])) as ReadableStream<Uint8Array>,
  });
  return cid.toString();
}

/** The bytes of the file `root` as the service keeps it in `space`: every block of its shards, hashes checked. */
async function storedFile(svc: UploadService, space: `did:key:${string}`, root: string): Promise<Buffer> {
  const list = await svc.context.uploadTable.list(space);
  assert.ok(list.ok);
  const upload = list.ok.results.find((u) => u.root.toString() === root);
  assert.ok(upload?.shards?.length, `the upload ${root} is in the space, with its shards`);
  const blocks = new Map<string, Uint8Array>();
  for (const shard of upload.shards) {
    const got = await svc.context.blobRetriever.stream(shard.multihash);
    assert.ok(got.ok, `shard ${shard} is retrievable`);
    for await (const { cid, bytes } of await CarBlockIterator.fromIterable(Readable.fromWeb(got.ok as never)))
      blocks.set(cid.toString(), bytes);
  }
  const read = (c: CID): Buffer[] => {
    const b = blocks.get(c.toString());
    assert.ok(b, `block ${c} is stored`);
    if (c.code === RAW) return [Buffer.from(b)];
    return dagPB.decode(b).Links.flatMap((l) => read(l.Hash as CID));
  };
  return Buffer.concat(read(CID.parse(root)));
}

/** JSON with sorted keys and no spaces, written here on its own (the service's is assets/export.ts stableJson). */
function sortedJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${sortedJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

for (const { kind, skip } of await databaseKinds()) {
  describe(`asset export (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let svc: UploadService;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    let alice: string;
    let sdk: Livepeer;
    let clip: string;
    let asset: { id: string; playbackId: string };
    let operatorSpace: ed25519.EdSigner;
    let agent: ed25519.EdSigner;
    const secrets: string[] = [HEADER_SECRET, 'query-secret-c41d'];
    const answers: string[] = [];

    const call = async (method: string, path: string, body?: unknown) => {
      const res = await server.call(method, path, { key: alice, ...(body === undefined ? {} : { body }) });
      answers.push(JSON.stringify(res.body));
      return res;
    };
    const exportAsset = (body: unknown, id = asset.id) => call('POST', `/api/asset/${id}/export`, body);
    /** The task over plain HTTP once it ended, checked against the SDK's Task model. */
    const ended = async (id: string) => {
      let last: unknown;
      return waitFor(
        async () => {
          const t = (await call('GET', `/api/task/${id}`)).body;
          last = t;
          Task$inboundSchema.parse(t);
          return ['completed', 'failed'].includes(t.status.phase) && t;
        },
        60_000,
        `task ${id} to end`,
      ).catch((err: Error) => {
        throw new Error(`${err.message}; last seen ${JSON.stringify(last)}`);
      });
    };
    const newSpace = async () => {
      const space = await ed25519.generate();
      await svc.provision(space.did());
      return space;
    };

    before(async () => {
      clip = await makeClip({ width: 320, height: 240, seconds: 2 });
      [svc, receiver] = await Promise.all([startUploadService(), startReceiver()]);
      agent = await ed25519.generate();
      operatorSpace = await newSpace();
      const operatorProof = await proofFor(operatorSpace, agent);
      secrets.push(operatorProof.slice(20, 80));
      server = await startTestServer({
        database: kind,
        settings: {
          dwebServiceUrl: svc.url,
          dwebServiceDid: svc.did,
          dwebGateway: 'https://gw.example',
          dwebAgentKey: ed25519.format(agent),
          dwebExportProof: operatorProof,
          maxRetries: 2,
          logLevel: 'debug',
        },
      });
      alice = await server.key('alice');
      sdk = new Livepeer({ apiKey: alice, serverURL: `${server.url}/api` });
      const made = (await sdk.asset.create({ name: 'to export' })).data;
      assert.ok(made);
      asset = { id: made.asset.id, playbackId: made.asset.playbackId ?? '' };
      const put = await fetch(made.url, { method: 'PUT', body: readFileSync(clip) });
      assert.ok(put.ok, `PUT answered ${put.status}`);
      await waitFor(async () => (await sdk.asset.get(asset.id)).asset?.status?.phase === 'ready', 60_000, 'ready');
    });
    after(async () => {
      await server?.stop();
      await receiver?.close();
      await svc?.close();
    });

    it('a custom export PUTs the exact bytes with the headers; the task shows Livepeer params, no secret', async () => {
      const posted = await exportAsset({
        custom: { url: receiver.url(`/ok?${QUERY_SECRET}`), headers: { Authorization: HEADER_SECRET, 'X-Tag': 'a' } },
      });
      assert.equal(posted.status, 200, JSON.stringify(posted.body));
      const task = await ended(posted.body.task.id);
      assert.equal(task.status.phase, 'completed', task.status.errorMessage);
      const got = receiver.got.filter((r) => r.path === '/ok');
      assert.equal(got.length, 1);
      const r = got[0];
      assert.ok(r);
      assert.equal(r.method, 'PUT');
      assert.equal(r.sha256, sha256(readFileSync(clip)), 'the receiver got the exact bytes');
      assert.equal(r.headers['content-length'], String(readFileSync(clip).length));
      assert.equal(r.headers['content-type'], 'video/mp4');
      assert.equal(r.headers.authorization, HEADER_SECRET);
      assert.equal(r.headers['x-tag'], 'a');
      assert.deepEqual(task.params, { export: { custom: { url: receiver.url('/ok'), method: 'PUT' } } });
      assert.equal(task.type, 'export');
      assert.equal(task.inputAssetId, asset.id);
      assert.deepEqual(task.output, { export: {} });
      // A custom export leaves the asset's storage alone (as on Livepeer).
      assert.equal((await call('GET', `/api/asset/${asset.id}`)).body.storage, undefined);
    });

    it('method POST is used when asked (any case)', async () => {
      const posted = await exportAsset({ custom: { url: receiver.url('/ok'), method: 'post' } });
      assert.equal(posted.status, 200, JSON.stringify(posted.body));
      assert.equal((await ended(posted.body.task.id)).status.phase, 'completed');
      assert.equal(receiver.got.filter((r) => r.path === '/ok').at(-1)?.method, 'POST');
    });

    it('a receiver answering 500 is retried, then the task fails saying so', async () => {
      const posted = await exportAsset({ custom: { url: receiver.url(`/fail500?${QUERY_SECRET}`) } });
      const task = await ended(posted.body.task.id);
      assert.equal(task.status.phase, 'failed');
      assert.equal(
        task.status.errorMessage,
        `export to ${receiver.url('/fail500')}: the server answered 500 Internal Server Error`,
      );
      assert.equal(task.status.retries, 2);
      assert.equal(receiver.got.filter((r) => r.path === '/fail500').length, 3, 'one try and two retries');
    });

    it('a receiver answering 404 fails the task at once, with no retry', async () => {
      const posted = await exportAsset({ custom: { url: receiver.url('/missing') } });
      const task = await ended(posted.body.task.id);
      assert.equal(task.status.phase, 'failed');
      assert.equal(
        task.status.errorMessage,
        `export to ${receiver.url('/missing')}: the server answered 404 Not Found`,
      );
      assert.equal(task.status.retries, undefined);
      assert.equal(receiver.got.filter((r) => r.path === '/missing').length, 1);
    });

    it('a redirect is not followed: the task fails at once, naming it', async () => {
      const before = receiver.got.filter((r) => r.path === '/ok').length;
      const posted = await exportAsset({ custom: { url: receiver.url('/redirect') } });
      const task = await ended(posted.body.task.id);
      assert.equal(task.status.phase, 'failed');
      assert.equal(
        task.status.errorMessage,
        `export to ${receiver.url('/redirect')}: the server answered 302 Found, a redirect to ${receiver.url('/ok')}: redirects are not followed; export to the final URL`,
      );
      assert.equal(task.status.retries, undefined);
      assert.equal(receiver.got.filter((r) => r.path === '/ok').length, before, 'the redirect was not followed');
    });

    it('an unreachable receiver fails in words a user understands, after the retries', async () => {
      const closed = http.createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
      const port = (closed.address() as AddressInfo).port;
      await new Promise<void>((r) => closed.close(() => r()));
      const posted = await exportAsset({ custom: { url: `http://127.0.0.1:${port}/x?${QUERY_SECRET}` } });
      const task = await ended(posted.body.task.id);
      assert.equal(task.status.phase, 'failed');
      assert.equal(task.status.errorMessage, `export to http://127.0.0.1:${port}/x: connection refused`);
      assert.equal(task.status.retries, 2);
    });

    it("to IPFS with the caller's proof: the CID of the bytes, in the caller's space, on the asset", async () => {
      const space = await newSpace();
      const proof = await proofFor(space, agent);
      secrets.push(proof.slice(20, 80));
      const posted = await exportAsset({
        ipfs: { credentials: { proof }, nftMetadata: { external_url: 'https://x.example' } },
      });
      assert.equal(posted.status, 200, JSON.stringify(posted.body));
      assert.deepEqual(posted.body.task.params, {
        export: { ipfs: { nftMetadata: { external_url: 'https://x.example' } } },
      });
      const task = await ended(posted.body.task.id);
      assert.equal(task.status.phase, 'completed', task.status.errorMessage);
      const bytes = readFileSync(clip);
      const cid = await cidOf(bytes);
      const out = task.output.export.ipfs;
      assert.equal(out.videoFileCid, cid, "the CID is the bytes' own");
      assert.equal(out.videoFileUrl, `ipfs://${cid}`);
      assert.equal(out.videoFileGatewayUrl, `https://gw.example/ipfs/${cid}`);
      assert.equal(sha256(await storedFile(svc, space.did(), cid)), sha256(bytes), 'the service keeps the exact bytes');
      assert.ok(!(await svc.uploads(operatorSpace.did())).includes(cid), "not in the server's space");
      // The NFT metadata beside it (Livepeer's `file` template) names the video, with the owner's field merged in.
      const meta = JSON.parse((await storedFile(svc, space.did(), out.nftMetadataCid)).toString('utf8'));
      assert.deepEqual(meta, {
        name: 'to export',
        description: 'Video from asset "to export"',
        animation_url: `ipfs://${cid}`,
        properties: { video: `ipfs://${cid}` },
        external_url: 'https://x.example',
      });

      const shown = (await call('GET', `/api/asset/${asset.id}`)).body;
      assert.equal(shown.storage.ipfs.cid, cid);
      assert.equal(shown.storage.ipfs.url, `ipfs://${cid}`);
      assert.equal(shown.storage.ipfs.gatewayUrl, `https://gw.example/ipfs/${cid}`);
      assert.equal(shown.storage.ipfs.nftMetadata.cid, out.nftMetadataCid);
      assert.deepEqual(shown.storage.status, { phase: 'ready', tasks: { last: task.id } });
      Asset$inboundSchema.parse(shown);
      assert.equal((await sdk.asset.get(asset.id)).asset?.storage?.status?.tasks.last, task.id);
    });

    it("to IPFS without a proof ({ipfs: {}}, as Livepeer's clients send it): the server's space", async () => {
      const posted = await exportAsset({ ipfs: {} });
      assert.equal(posted.status, 200, JSON.stringify(posted.body));
      const task = await ended(posted.body.task.id);
      assert.equal(task.status.phase, 'completed', task.status.errorMessage);
      const cid = await cidOf(readFileSync(clip));
      assert.equal(task.output.export.ipfs.videoFileCid, cid);
      assert.ok((await svc.uploads(operatorSpace.did())).includes(cid), "in the server's space");
      const shown = (await call('GET', `/api/asset/${asset.id}`)).body;
      assert.deepEqual(shown.storage.status, { phase: 'ready', tasks: { last: task.id } });
    });

    it('while an IPFS export runs the asset shows it pending; when it fails, the earlier export stands (reverted)', async () => {
      const before = (await call('GET', `/api/asset/${asset.id}`)).body.storage;
      // A space the service never provisioned: the upload is refused, for good.
      const proof = await proofFor(await ed25519.generate(), agent);
      secrets.push(proof.slice(20, 80));
      const posted = await exportAsset({ ipfs: { credentials: { proof } } });
      assert.equal(posted.status, 200, JSON.stringify(posted.body));
      const id = posted.body.task.id;
      const task = await ended(id);
      // Each step was an asset.updated event in the outbox, the asset as it was then.
      const steps = await server.running.core.db.query<{ task: { storage: { status: object } | null } }>(
        `SELECT task FROM task_events WHERE task_id = $1 AND event = 'asset.updated' ORDER BY created_at, id`,
        [asset.id],
      );
      const statuses = steps.map((e) => e.task.storage?.status).filter((st) => JSON.stringify(st ?? {}).includes(id));
      assert.deepEqual(statuses.slice(0, 2), [
        { phase: 'waiting', tasks: { pending: id, last: before.status.tasks.last } },
        { phase: 'processing', tasks: { pending: id, last: before.status.tasks.last } },
      ]);
      assert.equal(task.status.phase, 'failed');
      assert.match(task.status.errorMessage, /the upload service refused the upload/);
      assert.equal(task.status.retries, undefined, 'a refused space is not retried');
      const shown = (await call('GET', `/api/asset/${asset.id}`)).body;
      assert.deepEqual(shown.storage.ipfs, before.ipfs, 'the earlier export stands');
      assert.deepEqual(shown.storage.status, {
        phase: 'reverted',
        errorMessage: task.status.errorMessage,
        tasks: { last: before.status.tasks.last, failed: id },
      });
      Asset$inboundSchema.parse(shown);
    });

    it('export-data puts the JSON document on IPFS: the CID of its sorted-key bytes', async () => {
      const content = { z: 1, a: { y: [1, 'two', null], b: true }, name: 'attestation ü' };
      const posted = await call('POST', '/api/export-data', { content, type: 'attestation', id: 'doc-1' });
      assert.equal(posted.status, 200, JSON.stringify(posted.body));
      const task = await ended(posted.body.task.id);
      assert.equal(task.type, 'export-data');
      assert.equal(task.status.phase, 'completed', task.status.errorMessage);
      assert.deepEqual(task.params, { exportData: { content, ipfs: {}, type: 'attestation', id: 'doc-1' } });
      const bytes = Buffer.from(sortedJson(content));
      const cid = await cidOf(bytes);
      assert.equal(task.output.exportData.ipfs.cid, cid);
      assert.equal(task.output.exportData.ipfs.url, `ipfs://${cid}`);
      assert.deepEqual(JSON.parse((await storedFile(svc, operatorSpace.did(), cid)).toString('utf8')), content);
      // The same document in another key order is the same CID.
      const again = await call('POST', '/api/export-data', { content: { name: content.name, a: content.a, z: 1 } });
      assert.equal((await ended(again.body.task.id)).output.exportData.ipfs.cid, cid);
    });

    it('GET /api/task lists the export tasks with Livepeer params, through the SDK', async () => {
      const all = (await sdk.task.getAll()).data ?? [];
      const exports = all.filter((t) => t.type === 'export');
      assert.ok(exports.length >= 8, `${exports.length} export tasks`);
      assert.ok(exports.every((t) => t.inputAssetId === asset.id));
      assert.ok(exports.some((t) => t.params?.export && 'custom' in t.params.export));
      assert.ok(exports.some((t) => t.params?.export && 'ipfs' in t.params.export));
      assert.ok(exports.some((t) => t.output?.export?.ipfs?.videoFileCid));
      const data = all.filter((t) => t.type === 'export-data');
      assert.equal(data.length, 2);
      assert.ok(data.every((t) => t.params?.exportData && t.output?.exportData?.ipfs?.cid));
    });

    it("bodies that cannot export are 422s naming the field; another owner's asset is a 404", async () => {
      const cases: [unknown, string[]][] = [
        [{}, ['custom, ipfs: give exactly one of them (where the file goes)']],
        [
          { custom: { url: receiver.url('/ok') }, ipfs: {} },
          ['custom, ipfs: give exactly one of them (where the file goes)'],
        ],
        [{ custom: { url: 'ftp://example.com/x' } }, ['custom.url: must be an http:// or https:// URL (not ftp:)']],
        [
          { custom: { url: 'http://user:pw@127.0.0.1:9/x' } },
          ['custom.url: must not hold a user name or password; send credentials in custom.headers'],
        ],
        [{ custom: { url: receiver.url('/ok'), method: 'PATCH' } }, ['custom.method: must be PUT or POST']],
        [
          { custom: { url: receiver.url('/ok'), headers: { 'Content-Length': '1', 'bad name': HEADER_SECRET } } },
          [
            'custom.headers.Content-Length: is set by the export itself and cannot be given',
            'custom.headers: "bad name" is not a valid header name',
          ],
        ],
        [
          { ipfs: { pinata: { jwt: 'x' } } },
          [
            'ipfs.pinata: Piñata is not available on this server: its IPFS exports go to Storacha (ipfs.credentials.proof)',
          ],
        ],
        [
          { ipfs: { nftMetadataTemplate: 'player' } },
          ['ipfs.nftMetadataTemplate: must be "file" (the "player" template needs a player this server does not have)'],
        ],
      ];
      for (const [body, errors] of cases) {
        const res = await exportAsset(body);
        assert.equal(res.status, 422, JSON.stringify(body));
        assert.deepEqual(res.body, { errors }, JSON.stringify(body));
      }
      const other = await ed25519.generate();
      const wrong = await exportAsset({ ipfs: { credentials: { proof: await proofFor(await newSpace(), other) } } });
      assert.equal(wrong.status, 422);
      assert.match(
        wrong.body.errors[0],
        /^ipfs\.credentials\.proof: is delegated to did:key:\S+, not to this service's agent/,
      );

      const bob = await server.key('bob');
      const res = await server.call('POST', `/api/asset/${asset.id}/export`, { key: bob, body: { ipfs: {} } });
      assert.equal(res.status, 404);
      const pending = (await sdk.asset.create({ name: 'not uploaded' })).data;
      const early = await exportAsset({ ipfs: {} }, pending?.asset.id);
      assert.equal(early.status, 422);
      assert.deepEqual(early.body, { errors: ['id: the asset is not ready to be exported (it is uploading)'] });
    });

    it('no header value, presigned query or proof is in any answer or log line', async () => {
      const list = await call('GET', '/api/task?limit=100');
      assert.equal(list.status, 200);
      for (const t of list.body) if (String(t.type).startsWith('export')) Task$inboundSchema.parse(t);
      const text = `${answers.join('\n')}\n${server.logs.text}`;
      for (const s of secrets) assert.ok(!text.includes(s), `${s.slice(0, 12)}… appears`);
      // Nor in the outbox (webhook payloads), nor in a completed task's row: only a task that
      // may still run (a failed one may be retried) keeps them.
      const db = server.running.core.db;
      const kept = await db.query<{ text: string }>(
        `SELECT task::text AS text FROM task_events
         UNION ALL SELECT params::text FROM tasks WHERE type LIKE 'export%' AND phase = 'completed'`,
      );
      assert.ok(kept.length > 10);
      for (const s of secrets) assert.ok(!kept.some((r) => r.text.includes(s)), `${s.slice(0, 12)}… is kept`);
    });
  });
}

describe('export address guard and timeouts', () => {
  let server: TestServer;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let key: string;
  before(async () => {
    receiver = await startReceiver();
    server = await startTestServer({ settings: { allowPrivateUrls: false } });
    key = await server.key('alice');
  });
  after(async () => {
    await server?.stop();
    await receiver?.close();
  });

  it('a private address is refused (422) without MEDIAPLANE_ALLOW_PRIVATE_URLS; IPFS needs a proof here', async () => {
    const made = await server.call('POST', '/api/asset/request-upload', { key, body: { name: 'x' } });
    const id = made.body.asset.id;
    const port = new URL(receiver.url('/')).port;
    const cases: [string, string][] = [
      [receiver.url('/ok'), `custom.url: http://127.0.0.1:${port} is not allowed: 127.0.0.1 is a loopback address`],
      [
        `http://localhost:${port}/ok`,
        `custom.url: http://localhost:${port} is not allowed: localhost is a loopback name`,
      ],
      ['http://10.1.2.3/x', 'custom.url: http://10.1.2.3 is not allowed: 10.1.2.3 is a private address'],
    ];
    for (const [url, error] of cases) {
      const res = await server.call('POST', `/api/asset/${id}/export`, { key, body: { custom: { url } } });
      assert.equal(res.status, 422);
      assert.equal(res.body.errors.length, 1);
      assert.ok(res.body.errors[0].startsWith(error), res.body.errors[0]);
    }
    const ipfs = await server.call('POST', `/api/asset/${id}/export`, { key, body: { ipfs: {} } });
    assert.equal(ipfs.status, 422);
    assert.match(ipfs.body.errors[0], /^ipfs\.credentials\.proof: is required: this server has no Storacha space/);
    assert.deepEqual(receiver.got, []);
  });

  it('at run time too: a name that resolves to a private address when the socket connects is refused, not retried', async () => {
    const port = Number(new URL(receiver.url('/')).port);
    let lookups = 0;
    // Public for the check before the request, loopback when the socket connects (DNS rebinding).
    const resolve = async () => [{ address: lookups++ === 0 ? '93.184.215.14' : '127.0.0.1', family: 4 }];
    const err = await sendFile({
      url: `http://export.example:${port}/ok?${QUERY_SECRET}`,
      method: 'PUT',
      headers: { authorization: HEADER_SECRET },
      body: Readable.from([Buffer.from('bytes')]),
      size: 5,
      contentType: 'video/mp4',
      allowPrivate: false,
      timeoutMs: 10_000,
      idleTimeoutMs: 10_000,
      signal: new AbortController().signal,
      resolve,
    }).catch((e: unknown) => e);
    assert.ok(err instanceof StorageDeniedError, String(err));
    assert.equal(err.retryable, false);
    assert.equal(
      err.message,
      `export to http://export.example:${port}/ok: http://export.example:${port} is not allowed: export.example resolves to a private or reserved address (the operator can allow it with MEDIAPLANE_ALLOW_PRIVATE_URLS=true)`,
    );
    assert.equal(lookups, 2);
    assert.deepEqual(receiver.got, []);
  });

  it('a receiver that takes the bytes and never answers times out, retryable', async () => {
    const stalled = http.createServer((req) => req.resume());
    await new Promise<void>((r) => stalled.listen(0, '127.0.0.1', r));
    const port = (stalled.address() as AddressInfo).port;
    const err = await sendFile({
      url: `http://127.0.0.1:${port}/x`,
      method: 'PUT',
      headers: {},
      body: Readable.from([Buffer.alloc(1000)]),
      size: 1000,
      contentType: 'video/mp4',
      allowPrivate: true,
      timeoutMs: 60_000,
      idleTimeoutMs: 300,
      signal: new AbortController().signal,
    }).catch((e: unknown) => e);
    stalled.closeAllConnections();
    stalled.close();
    assert.ok(err instanceof TimeoutError, String(err));
    assert.equal(err.retryable, true);
    assert.equal(err.message, `export to http://127.0.0.1:${port}/x: nothing moved for 0.3 s`);
  });
});
