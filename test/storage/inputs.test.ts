import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/index.ts';
import {
  CancelledError,
  InputTooLargeError,
  InputUnreadableError,
  TimeoutError,
  UpstreamUnavailableError,
  isRetryable,
} from '../../src/lib/errors.ts';
import { createInputSource, gatewayCandidates } from '../../src/storage/index.ts';
import { redirect, serveFile, stall, startHttp, status, type TestHttp } from '../helpers/http-input.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';

let web: TestHttp;
let gwDown: TestHttp;
let s3: TestS3;
let dir: string;
let file: string;
const body = Buffer.from('0123456789'.repeat(1000));

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mp-inputs-'));
  file = path.join(dir, 'src.bin');
  await writeFile(file, body);
  web = await startHttp({
    '/a.mp4': serveFile(file),
    '/hop1': redirect('/hop2'),
    '/hop2': redirect('/a.mp4', 301),
    '/loop': redirect('/loop'),
    '/gone': status(404),
    '/denied': status(403),
    '/broken': status(503),
    '/stall': stall(),
    '/ipfs/bafyCID/v.mp4': serveFile(file),
  });
  gwDown = await startHttp({ '/ipfs/bafyCID/v.mp4': status(502) });
  s3 = await startS3();
});
after(async () => {
  await Promise.all([web?.close(), gwDown?.close(), s3?.close(), rm(dir, { recursive: true, force: true })]);
});

const base = { allowPrivateUrls: true, inputIdleTimeoutMs: 300 };
const cfg = (o: Record<string, unknown> = {}) => loadConfig({ env: {}, overrides: { ...base, ...o } });
let n = 0;
async function fetchInput(url: string, o: Record<string, unknown> = {}, signal = new AbortController().signal) {
  const dest = path.join(dir, `in-${n++}`);
  return createInputSource({ url }, cfg(o)).fetch({ dest, signal });
}
async function failure(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => assert.fail('expected a failure'),
    (e: Error) => e,
  );
}

describe('HTTP input', () => {
  it('streams the body to the scratch file', async () => {
    const got = await fetchInput(web.url('/a.mp4'));
    assert.equal(got.size, body.length);
    assert.deepEqual(await readFile(got.path), body);
  });

  it('follows redirects up to the limit', async () => {
    assert.equal((await fetchInput(web.url('/hop1'))).size, body.length);
    const err = await failure(fetchInput(web.url('/hop1'), { maxRedirects: 1 }));
    assert.ok(err instanceof InputUnreadableError);
    assert.match(err.message, /redirected more than 1 times/);
    assert.ok((await failure(fetchInput(web.url('/loop')))) instanceof InputUnreadableError);
  });

  it('refuses loopback addresses unless the operator allows them', async () => {
    const err = await failure(fetchInput(web.url('/a.mp4'), { allowPrivateUrls: false }));
    assert.ok(err instanceof InputUnreadableError);
    assert.match(err.message, /not allowed.*loopback/);
  });

  it('says 404 and 403 in words and does not retry them; retries 503', async () => {
    const gone = await failure(fetchInput(web.url('/gone')));
    assert.ok(gone instanceof InputUnreadableError && !isRetryable(gone));
    assert.match(gone.message, /not found \(HTTP 404/);
    const denied = await failure(fetchInput(web.url('/denied')));
    assert.match(denied.message, /denied \(HTTP 403/);
    const down = await failure(fetchInput(web.url('/broken')));
    assert.ok(down instanceof UpstreamUnavailableError && isRetryable(down));
  });

  it('refuses an input over the size limit', async () => {
    const err = await failure(fetchInput(web.url('/a.mp4'), { inputMaxBytes: 5000 }));
    assert.ok(err instanceof InputTooLargeError && !isRetryable(err));
    assert.match(err.message, /too large/);
  });

  it('gives up on a stalled download (idle timeout) and on the total timeout', async () => {
    const idle = await failure(fetchInput(web.url('/stall')));
    assert.ok(idle instanceof TimeoutError, String(idle));
    const total = await failure(fetchInput(web.url('/stall'), { inputIdleTimeoutMs: 10_000, inputTimeoutMs: 200 }));
    assert.ok(total instanceof TimeoutError, String(total));
  });

  it('stops at once when the job is cancelled', async () => {
    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(), 100);
    const err = await failure(fetchInput(web.url('/stall'), { inputIdleTimeoutMs: 10_000 }, ctrl.signal));
    assert.ok(err instanceof CancelledError, String(err));
  });

  it('keeps query strings (signed URL secrets) out of messages', async () => {
    const err = await failure(fetchInput(`${web.url('/gone')}?X-Amz-Signature=topsecret`));
    assert.ok(!err.message.includes('topsecret'));
  });
});

describe('content-addressed inputs', () => {
  const gws = { ipfsGateways: ['https://gw.one', 'https://gw.two/'], arweaveGateways: ['https://arweave.net'] };
  it('maps ipfs://, ar:// and path-style URLs onto the configured gateways', () => {
    assert.deepEqual(gatewayCandidates('ipfs://bafyCID/v.mp4', gws), [
      'https://gw.one/ipfs/bafyCID/v.mp4',
      'https://gw.two/ipfs/bafyCID/v.mp4',
    ]);
    assert.deepEqual(gatewayCandidates('ar://TXID', gws), ['https://arweave.net/TXID']);
    assert.deepEqual(gatewayCandidates('https://other.gw/ipfs/bafyCID/v.mp4', gws), [
      'https://other.gw/ipfs/bafyCID/v.mp4',
      'https://gw.one/ipfs/bafyCID/v.mp4',
      'https://gw.two/ipfs/bafyCID/v.mp4',
    ]);
    assert.equal(gatewayCandidates('https://example.com/v.mp4', gws), null);
    // A subdomain-style gateway URL carries a real (long) CID label; a short label is a host.
    assert.throws(
      () =>
        gatewayCandidates(
          'https://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi.ipfs.dweb.link/v.mp4',
          gws,
        ),
      /path style/,
    );
    assert.equal(gatewayCandidates('https://media.ipfs.example.com/v.mp4', gws), null);
  });

  it('falls back to the next gateway when one is down', async () => {
    const got = await fetchInput('ipfs://bafyCID/v.mp4', { ipfsGateways: [gwDown.url(''), web.url('')] });
    assert.equal(got.size, body.length);
    assert.ok(gwDown.hits.includes('/ipfs/bafyCID/v.mp4'));
  });

  it('is retryable when every gateway is down', async () => {
    const err = await failure(fetchInput('ipfs://bafyCID/v.mp4', { ipfsGateways: [gwDown.url('')] }));
    assert.ok(err instanceof UpstreamUnavailableError);
  });
});

describe('S3 input', () => {
  it('downloads an object, and names the bucket (not the secret) when refused', async () => {
    const bucket = await s3.createBucket();
    await s3.put(bucket, 'in/video.mp4', body);
    const input = {
      type: 's3' as const,
      endpoint: s3.endpoint,
      bucket,
      path: '/in/video.mp4',
      credentials: s3.credentials,
    };
    const got = await createInputSource(input, cfg()).fetch({
      dest: path.join(dir, 's3-in'),
      signal: new AbortController().signal,
    });
    assert.deepEqual(await readFile(got.path), body);

    const bad = {
      ...input,
      credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: 'not-the-secret' },
    };
    const err = await failure(
      createInputSource(bad, cfg()).fetch({ dest: path.join(dir, 's3-bad'), signal: new AbortController().signal }),
    );
    assert.ok(err instanceof InputUnreadableError, String(err));
    assert.match(err.message, new RegExp(bucket));
    assert.ok(!err.message.includes('not-the-secret'));

    const missing = await failure(
      createInputSource({ ...input, path: 'nope.mp4' }, cfg()).fetch({
        dest: path.join(dir, 's3-none'),
        signal: new AbortController().signal,
      }),
    );
    assert.ok(missing instanceof InputUnreadableError);
    assert.match(missing.message, /not found/);
  });
});
