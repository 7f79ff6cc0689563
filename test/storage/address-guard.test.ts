import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net, { isIP, type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { InputUnreadableError, StorageDeniedError, isRetryable } from '../../src/lib/errors.ts';
import { addressProblem, hostProblem, type Resolve } from '../../src/lib/net-guard.ts';
import {
  gatewayCandidates,
  isSubdomainGatewayHost,
  pathStyleHint,
  S3InputSource,
  S3ObjectStore,
} from '../../src/storage/index.ts';
import { Worker } from '../../src/tasks/index.ts';
import { createTranscodeHandler } from '../../src/transcode/index.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { startTestServer, transcodeBody, waitFor, type TestServer } from '../helpers/server.ts';

// Issue #15, holes 3 and 8: the private-address guard. Addresses are classified by ipaddr.js
// (the IANA special-purpose registries), IPv6 forms of private IPv4 included, and the S3
// clients refuse a private address when they connect, not only when the request arrives
// (DNS rebinding). Rebinding cannot use real DNS here: the resolver is injected.

/** Special-purpose addresses, each as a URL host, and what the refusal must say. */
const REFUSED: { host: string; says: RegExp }[] = [
  { host: '127.0.0.1', says: /loopback/ },
  { host: '[::1]', says: /loopback/ },
  { host: '[::127.0.0.1]', says: /IPv4-compatible .*127\.0\.0\.1/ },
  { host: '[::ffff:127.0.0.1]', says: /IPv4-mapped .*127\.0\.0\.1, a loopback/ },
  { host: '[::ffff:0:a00:1]', says: /IPv4-translated .*10\.0\.0\.1, a private/ },
  { host: '[2002:7f00:1::]', says: /6to4 .*127\.0\.0\.1, a loopback/ },
  { host: '[2002:c0a8:101::1]', says: /6to4 .*192\.168\.1\.1, a private/ },
  { host: '[2001:0:4136:e378:8000:63bf:80ff:fffe]', says: /Teredo .*127\.0\.0\.1, a loopback/ },
  { host: '[64:ff9b::a9fe:a9fe]', says: /NAT64 .*169\.254\.169\.254, a link-local/ },
  { host: '[64:ff9b:1::7f00:1]', says: /local-use NAT64/ },
  { host: '[2001:db8::1]', says: /documentation/ },
  { host: '[3fff::1]', says: /documentation/ },
  { host: '[fc00::1]', says: /unique-local/ },
  { host: '[fd00:ec2::254]', says: /unique-local/ },
  { host: '[fe80::1]', says: /link-local/ },
  { host: '[fec0::1]', says: /site-local/ },
  { host: '[ff02::1]', says: /multicast/ },
  { host: '[100::1]', says: /discard/ },
  { host: '[2001:20::1]', says: /orchid2/ },
  { host: '[2001:2::1]', says: /benchmarking/ },
  { host: '[::]', says: /unspecified/ },
  { host: '[4000::1]', says: /outside the global unicast space/ },
  { host: '0.0.0.0', says: /unspecified/ },
  { host: '10.0.0.5', says: /private/ },
  { host: '172.16.0.1', says: /private/ },
  { host: '192.168.1.1', says: /private/ },
  { host: '100.64.0.1', says: /carrier-grade NAT/ },
  { host: '169.254.169.254', says: /link-local/ },
  { host: '192.0.0.8', says: /reserved/ },
  { host: '192.0.2.1', says: /documentation/ },
  { host: '198.51.100.7', says: /documentation/ },
  { host: '203.0.113.9', says: /documentation/ },
  { host: '198.18.0.1', says: /reserved/ },
  { host: '198.19.255.254', says: /reserved/ },
  { host: '224.0.0.1', says: /multicast/ },
  { host: '240.0.0.1', says: /reserved/ },
  { host: '255.255.255.255', says: /broadcast/ },
];

const PUBLIC = [
  '8.8.8.8',
  '1.1.1.1',
  '93.184.216.34',
  '2606:4700::1111',
  '2a00:1450:4001:80b::200e',
  '::ffff:8.8.8.8',
  '64:ff9b::808:808',
  '2002:808:808::1',
];

describe('address classifier (ipaddr.js, IANA special-purpose registries)', () => {
  for (const ip of PUBLIC) {
    it(`allows the public address ${ip}`, () => assert.equal(addressProblem(ip), null));
  }
  for (const { host, says } of REFUSED) {
    it(`refuses ${host}`, () => {
      const problem = addressProblem(host);
      assert.ok(problem, `${host} was allowed`);
      assert.match(problem, says);
    });
  }
  it('refuses what is not an IP address', () => assert.equal(addressProblem('example.com'), 'not an IP address'));
});

/** A resolver that answers `answers` in turn (the last one again once they run out), and records each name it was asked. */
function rebinding(...answers: string[]): Resolve & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (hostname: string): Promise<LookupAddress[]> => {
    const address = answers[Math.min(asked.length, answers.length - 1)] ?? '';
    asked.push(hostname);
    return [{ address, family: net.isIP(address) }];
  };
  return Object.assign(resolve, { asked });
}

describe('host names', () => {
  it('refuses localhost names without asking DNS, with or without the root dot (RFC 6761)', async () => {
    const resolve = rebinding('93.184.216.34');
    for (const host of ['localhost', 'localhost.', 'api.localhost', 'a.b.localhost.']) {
      const problem = await hostProblem(new URL(`http://${host}:9000/`), { allowPrivate: false, resolve });
      assert.match(problem ?? '', /is a loopback name/, host);
    }
    assert.deepEqual(resolve.asked, []);
  });

  it('resolves a fully qualified name without its root dot and checks every address', async () => {
    const resolve = rebinding('127.0.0.1');
    const problem =
      (await hostProblem(new URL('http://media.example.com./a.mp4'), { allowPrivate: false, resolve })) ?? '';
    assert.equal(problem, 'media.example.com. resolves to a private or reserved address');
    assert.deepEqual(resolve.asked, ['media.example.com']);
    const mixed: Resolve = async () => [
      { address: '93.184.216.34', family: 4 },
      { address: 'fd00::1', family: 6 },
    ];
    const mixedProblem =
      (await hostProblem(new URL('http://mixed.example.com/'), { allowPrivate: false, resolve: mixed })) ?? '';
    assert.equal(mixedProblem, 'mixed.example.com resolves to a private or reserved address');
    assert.ok(!mixedProblem.includes('fd00'), 'where the name points is not said');
    assert.equal(
      await hostProblem(new URL('http://media.example.com/'), {
        allowPrivate: false,
        resolve: rebinding('93.184.216.34'),
      }),
      null,
    );
  });
});

const CIDV1 = 'bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi';
const CIDV0 = 'QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG';

describe('subdomain-style gateway URLs', () => {
  it('finds the CID label anywhere before .ipfs. or .ipns.', () => {
    for (const host of [`${CIDV1}.ipfs.dweb.link`, `x.${CIDV1}.ipfs.dweb.link`, `a.b.${CIDV1}.ipns.gw.example.com`])
      assert.ok(isSubdomainGatewayHost(host), host);
    for (const host of ['my.ipfs.example.com', `${CIDV1}.ipfs`, 'ipfs.io', `${CIDV1}.example.com`])
      assert.ok(!isSubdomainGatewayHost(host), host);
    assert.throws(
      () => gatewayCandidates(`https://x.${CIDV1}.ipfs.dweb.link/f.mp4`, { ipfsGateways: [], arweaveGateways: [] }),
      /not supported.*https:\/\/dweb\.link\/ipfs\//,
    );
  });

  it('hints the path-style URL with its port, and does not invent the letter case of a CIDv0', () => {
    assert.equal(
      pathStyleHint(new URL(`https://x.${CIDV1}.ipfs.dweb.link:8443/v/f.mp4?x=1`)),
      `https://dweb.link:8443/ipfs/${CIDV1}/v/f.mp4`,
    );
    const v0 = pathStyleHint(new URL(`https://${CIDV0}.ipfs.dweb.link/f.mp4`)) ?? '';
    assert.ok(v0.startsWith('https://dweb.link/ipfs/<CID>/f.mp4'), v0);
    assert.match(v0, /original letter case/);
    assert.ok(!v0.includes(CIDV0.toLowerCase()), 'a lowercased CIDv0 is not a CID');
    assert.equal(pathStyleHint(new URL('https://dweb.link/ipfs/x/f.mp4')), null);
  });
});

// One API server for the file, as deployed: private addresses refused (the setting is off).
let server: TestServer;
let key: string;
before(async () => {
  server = await startTestServer({
    roles: { api: true, worker: false },
    settings: { allowPrivateUrls: false, maxRetries: 2 },
  });
  key = await server.key('alice');
});
after(() => server?.stop());

const publicInput = { url: 'https://93.184.216.34/a.mp4' };
const ALLOW_HINT = ' (the operator can allow it with MEDIAPLANE_ALLOW_PRIVATE_URLS=true)';

describe('POST /api/transcode refuses special-purpose addresses (MEDIAPLANE_ALLOW_PRIVATE_URLS off)', () => {
  const creds = { accessKeyId: 'AKIATESTKEY', secretAccessKey: 'sEcReT/do-not-leak+123' };
  const publicStorage = { type: 's3', endpoint: 'https://93.184.216.34', bucket: 'out', credentials: creds };

  async function errors(body: Record<string, unknown>): Promise<{ status: number; errors: string[] }> {
    const res = await server.call('POST', '/api/transcode', { key, body: transcodeBody(body) });
    return { status: res.status, errors: res.body.errors ?? [] };
  }

  it('accepts public addresses (the control)', async () => {
    const res = await server.call('POST', '/api/transcode', {
      key,
      body: transcodeBody({ input: publicInput, storage: publicStorage }),
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  });

  for (const { host, says } of [
    ...REFUSED,
    { host: 'localhost.', says: /loopback name/ },
    { host: 'x.localhost', says: /loopback name/ },
  ]) {
    it(`refuses ${host} in input.url, storage.endpoint and input.endpoint`, async () => {
      const asInput = await errors({ input: { url: `http://${host}/a.mp4` }, storage: publicStorage });
      const asStorage = await errors({
        input: publicInput,
        storage: { ...publicStorage, endpoint: `http://${host}:9000` },
      });
      const asS3Input = await errors({
        input: { type: 's3', endpoint: `https://${host}`, bucket: 'in', path: '/a.mp4', credentials: creds },
        storage: publicStorage,
      });
      for (const [field, res] of [
        ['input.url', asInput],
        ['storage.endpoint', asStorage],
        ['input.endpoint', asS3Input],
      ] as const) {
        assert.equal(res.status, 422, `${field} ${host}: ${JSON.stringify(res.errors)}`);
        const mine = res.errors.filter((e) => e.startsWith(`${field}: address not allowed: `));
        assert.equal(mine.length, 1, `${field} ${host}: ${JSON.stringify(res.errors)}`);
        assert.match(mine[0] ?? '', says);
        // The refusal says how to allow it: a first local try meets this answer.
        assert.ok(mine[0]?.endsWith(ALLOW_HINT), `${field} ${host} names the setting: ${mine[0]}`);
        assert.equal(res.errors.length, 1, `only ${field} is refused: ${JSON.stringify(res.errors)}`);
      }
    });
  }

  it('refuses a subdomain-style gateway URL with an extra label, hinting the path style with its port', async () => {
    const res = await errors({
      input: { url: `https://x.${CIDV1}.ipfs.dweb.link:8443/f.mp4` },
      storage: publicStorage,
    });
    assert.equal(res.status, 422);
    assert.ok(
      res.errors.includes(
        `input.url: subdomain-style gateway URLs are not supported; use the path style https://GATEWAY/ipfs/CID/file (for this URL: https://dweb.link:8443/ipfs/${CIDV1}/f.mp4)`,
      ),
      JSON.stringify(res.errors),
    );
    const v0 = await errors({ input: { url: `https://${CIDV0}.ipfs.dweb.link/f.mp4` }, storage: publicStorage });
    assert.equal(v0.status, 422);
    assert.match(
      v0.errors.join(' '),
      /for this URL: https:\/\/dweb\.link\/ipfs\/<CID>\/f\.mp4, with the CIDv0 written in its original letter case/,
    );
  });

  // Issue #25, hole 11: `vm resolves to 127.0.0.1` in a 422 mapped internal DNS for anyone
  // with a key. The answer says the rule, not where the name points.
  it('a name that resolves to a private address: the 422 says the rule, not the address (task input and webhook)', async (t) => {
    const internal = await internalName();
    if (!internal) return t.skip(`this host's name (${os.hostname()}) does not resolve to a private address here`);
    const { name, addresses } = internal;
    const task = await errors({ input: { url: `http://${name}/a.mp4` }, storage: publicStorage });
    assert.equal(task.status, 422);
    assert.deepEqual(task.errors, [
      `input.url: address not allowed: ${name} resolves to a private or reserved address (the operator can allow it with MEDIAPLANE_ALLOW_PRIVATE_URLS=true)`,
    ]);
    const hook = await server.call('POST', '/api/webhook', {
      key,
      body: { name: 'internal', url: `http://${name}:8080/hook`, events: ['task.completed'] },
    });
    assert.equal(hook.status, 422);
    assert.deepEqual(hook.body.errors, [
      `url: address not allowed: ${name} resolves to a private or reserved address (the operator can allow it with MEDIAPLANE_ALLOW_PRIVATE_URLS=true)`,
    ]);
    for (const answer of [JSON.stringify(task), JSON.stringify(hook.body)])
      for (const address of addresses) assert.ok(!answer.includes(address), `${address} is not said: ${answer}`);
  });
});

/** This host's own name when the system resolver points it at addresses that are not public (an /etc/hosts line). */
async function internalName(): Promise<{ name: string; addresses: string[] } | undefined> {
  const name = os.hostname();
  const all = await lookup(name, { all: true }).catch(() => []);
  const addresses = all.map((a) => a.address).filter((a) => addressProblem(a) !== null);
  return addresses.length > 0 && !isIP(name) ? { name, addresses } : undefined;
}

/** A TCP relay to `port` on 127.0.0.1 that counts the connections it was asked for. */
async function countingRelay(
  port: number,
): Promise<{ port: number; connections: () => number; close: () => Promise<void> }> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    connections++;
    const upstream = net.connect(port, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined).on('close', () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('S3 clients refuse a private address when they connect (DNS rebinding)', () => {
  let s3: TestS3;
  let relay: Awaited<ReturnType<typeof countingRelay>>;
  let dir: string;
  let bucket: string;
  const body = Buffer.alloc(3 * 1024 * 1024, 7); // over the SDK's 2 MiB `Expect: 100-continue` threshold
  const limits = { maxBytes: 64 << 20, timeoutMs: 20_000, idleTimeoutMs: 10_000 };
  let rebindEndpoint: string;

  before(async () => {
    s3 = await startS3();
    relay = await countingRelay(Number(new URL(s3.endpoint).port));
    dir = await mkdtemp(path.join(os.tmpdir(), 'mp-address-guard-'));
    await writeFile(path.join(dir, 'big.bin'), body);
    bucket = await s3.createBucket();
    await s3.put(bucket, 'in/a.mp4', 'video bytes');
    // The name the attacker controls: public when checked, 127.0.0.1 when the SDK connects.
    rebindEndpoint = `http://media.rebind.test:${relay.port}`;
  });
  after(async () => {
    await Promise.all([relay?.close(), rm(dir, { recursive: true, force: true })]);
    await s3?.close();
  });

  const loc = (endpoint: string) => ({ endpoint, bucket, region: s3.region, credentials: s3.credentials });
  const signal = () => new AbortController().signal;

  it('the relay reaches the S3 server when private addresses are allowed (the control)', async () => {
    const before = relay.connections();
    const input = new S3InputSource(
      { ...loc(`http://127.0.0.1:${relay.port}`), path: '/in/a.mp4' },
      { limits, maxAttempts: 3, allowPrivate: true },
    );
    const got = await input.fetch({ dest: path.join(dir, 'control'), signal: signal() });
    assert.equal(got.size, 'video bytes'.length);
    assert.ok(relay.connections() > before);
  });

  it('GetObject: an input endpoint that rebinds to 127.0.0.1 is refused at connect time, not retried', async () => {
    const before = relay.connections();
    const resolve = rebinding('93.184.216.34', '127.0.0.1');
    const input = new S3InputSource(
      { ...loc(rebindEndpoint), path: '/in/a.mp4' },
      { limits, maxAttempts: 3, allowPrivate: false, resolve },
    );
    const err = await input.fetch({ dest: path.join(dir, 'rebound'), signal: signal() }).then(
      () => assert.fail('the rebound endpoint was read'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof InputUnreadableError, String(err));
    assert.ok(!isRetryable(err));
    assert.match(
      err.message,
      /input S3 endpoint is not allowed: media\.rebind\.test resolves to a private or reserved address/,
    );
    assert.ok(err.message.endsWith(ALLOW_HINT), err.message);
    assert.ok(!err.message.includes('127.0.0.1'), 'where the name points is not said');
    assert.deepEqual(
      resolve.asked,
      ['media.rebind.test', 'media.rebind.test'],
      'asked by the check, then once by the socket: the SDK did not retry',
    );
    assert.equal(relay.connections(), before, 'the S3 server got no connection');
  });

  it('HeadBucket (storage check): a storage endpoint that rebinds is refused at connect time, not retried', async () => {
    const before = relay.connections();
    const resolve = rebinding('93.184.216.34', '127.0.0.1');
    const store = new S3ObjectStore(loc(rebindEndpoint), {
      maxAttempts: 3,
      partSizeBytes: 8 << 20,
      allowPrivate: false,
      resolve,
    });
    try {
      const err = await store.check(signal()).then(
        () => assert.fail('the rebound endpoint was reached'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof StorageDeniedError, String(err));
      assert.ok(!isRetryable(err));
      assert.match(
        err.message,
        /storage endpoint is not allowed: media\.rebind\.test resolves to a private or reserved address/,
      );
      assert.ok(!err.message.includes('127.0.0.1'), 'where the name points is not said');
      assert.equal(resolve.asked.length, 2);
      assert.equal(relay.connections(), before);
    } finally {
      await store.discard();
    }
  });

  it('PutObject over 2 MiB, a streamed upload and a multipart upload all go through the guarded lookup', async () => {
    const before = relay.connections();
    const resolve = rebinding('127.0.0.1');
    const store = new S3ObjectStore(loc(rebindEndpoint), {
      maxAttempts: 3,
      partSizeBytes: 5 << 20,
      allowPrivate: false,
      resolve,
    });
    const opts = { contentType: 'video/mp4', signal: signal() };
    try {
      const bodies = [{ file: path.join(dir, 'big.bin') }, { stream: Readable.from([body]) }];
      for (const put of bodies) {
        const err = await store.put('out/big.bin', put, opts).then(
          () => assert.fail('uploaded to a rebound endpoint'),
          (e: unknown) => e,
        );
        assert.ok(err instanceof StorageDeniedError, String(err));
        assert.match(err.message, /resolves to a private or reserved address/);
        assert.ok(!err.message.includes('127.0.0.1'), 'where the name points is not said');
      }
      const multipart = await store.parts.open('out/parts.bin', opts).then(
        () => assert.fail('a multipart upload was opened'),
        (e: unknown) => e,
      );
      assert.ok(multipart instanceof StorageDeniedError, String(multipart));
      assert.equal(resolve.asked.length, 3, 'one lookup per upload: no retries');
      assert.equal(relay.connections(), before);
      assert.deepEqual(await s3.keys(bucket), ['in/a.mp4']);
    } finally {
      await store.discard();
    }
  });
});

describe('a transcode task whose storage endpoint rebinds', () => {
  let s3: TestS3;
  let relay: Awaited<ReturnType<typeof countingRelay>>;
  let worker: Worker;
  const resolve = rebinding('93.184.216.34', '127.0.0.1');

  before(async () => {
    s3 = await startS3();
    relay = await countingRelay(Number(new URL(s3.endpoint).port));
    // The API takes the task (`.test` names never resolve, and a name that does not resolve is
    // left to fail when fetched); the worker's store resolves it with the rebinding resolver.
    const config = loadConfig({ env: {}, overrides: { allowPrivateUrls: false } });
    const handler = createTranscodeHandler({
      config,
      objectStores: {
        s3: (storage) => {
          if (storage.type !== 's3') throw new Error('s3 only');
          return new S3ObjectStore(storage, {
            maxAttempts: 3,
            partSizeBytes: config.uploadPartSizeBytes,
            allowPrivate: false,
            resolve,
          });
        },
      },
    });
    worker = new Worker({
      db: server.running.core.db,
      queue: server.running.core.queue,
      handlers: { 'transcode-file': handler },
      log: createLogger({ level: 'silent' }),
      scratchRoot: path.join(server.dataDir, 'scratch'),
      concurrency: 1,
      pollMs: 50,
      heartbeatMs: 200,
      retryBackoffMs: 20,
    });
    await worker.start();
  });
  after(async () => {
    await worker?.stop(500);
    await relay?.close();
    await s3?.close();
  });

  it('fails at once (not retryable, retries not spent), naming the rule, and the S3 server gets no connection', async () => {
    const bucket = await s3.createBucket();
    const { accessKeyId, secretAccessKey } = s3.credentials;
    const storage = {
      type: 's3',
      endpoint: `http://media.rebind.test:${relay.port}`,
      bucket,
      credentials: { accessKeyId, secretAccessKey },
    };
    const created = await server.call('POST', '/api/transcode', {
      key,
      body: transcodeBody({ input: publicInput, storage }),
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const id = created.body.id as string;
    const failed = await waitFor(
      async () => {
        const t = (await server.call('GET', `/api/task/${id}`, { key })).body;
        return t.status.phase === 'failed' ? t : null;
      },
      20_000,
      'the task to fail',
    );
    assert.match(
      failed.status.errorMessage,
      /storage endpoint is not allowed: media\.rebind\.test resolves to a private or reserved address/,
    );
    assert.ok(
      failed.status.errorMessage.endsWith(ALLOW_HINT),
      `the task's error names the setting: ${failed.status.errorMessage}`,
    );
    assert.ok(!JSON.stringify(failed).includes('127.0.0.1'), 'the task does not say where the name points');
    assert.equal(failed.status.retries, undefined, 'no retry was spent');
    assert.deepEqual(resolve.asked, ['media.rebind.test', 'media.rebind.test'], 'one run: the check, then the socket');
    assert.equal(relay.connections(), 0);
    assert.deepEqual(await s3.keys(bucket), []);
  });
});
