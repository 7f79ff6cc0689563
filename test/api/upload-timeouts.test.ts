// Upload bodies and the request timeout (issue #27 follow-up): MEDIAPLANE_REQUEST_TIMEOUT_MS
// guards against slow clients, but an upload's body legitimately takes longer (a 1 GB PUT over
// a slow link was cut with a 408 after 30 s). The upload routes opt out of that deadline and
// get an idle timeout instead (MEDIAPLANE_UPLOAD_IDLE_TIMEOUT_MS): a body that keeps coming is
// taken however long it takes; one that stalls has its connection closed, and a tus client
// resumes from the staged offset. SERIAL in scripts/test.ts: the bodies are sent over seconds
// against sub-second timeouts.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { buffer } from 'node:stream/consumers';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { assetSourceKey } from '../../src/assets/index.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { rawRequest, requestUpload } from '../helpers/uploads.ts';

const REQUEST_TIMEOUT_MS = 500;
const IDLE_TIMEOUT_MS = 1000;
// 25 pieces 100 ms apart: 2.4 s of body, well past the request timeout, never idle for long.
const PIECES = 25;
const EVERY_MS = 100;
const TUS = { 'tus-resumable': '1.0.0' };

type Outcome = { status: number; headers: Record<string, string | string[] | undefined>; body: string } | 'closed';

/**
 * A request whose body goes out in `pieces`, one every `everyMs`; with `stall`, the body stops
 * after that many pieces and the request waits (up to 20 s) for the server to answer or close.
 */
function slowRequest(
  url: string,
  o: { method: string; headers: Record<string, string>; pieces: Buffer[]; everyMs: number; stall?: number },
): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (v: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(giveUp);
      resolve(v);
    };
    const giveUp = setTimeout(() => {
      req.destroy();
      reject(new Error('the server neither answered nor closed the connection within 20 s'));
    }, 20_000);
    const req = request(url, { method: o.method, headers: o.headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => settle({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', () => settle('closed'));
    });
    req.on('error', () => settle('closed'));
    req.on('close', () => setImmediate(() => settle('closed')));
    const send = async () => {
      for (const [i, piece] of o.pieces.entries()) {
        if (o.stall !== undefined && i === o.stall) return;
        if (req.destroyed || settled) return;
        req.write(piece);
        await sleep(o.everyMs);
      }
      req.end();
    };
    send().catch(reject);
  });
}

/** `data` cut into `n` pieces. */
const piecesOf = (data: Buffer, n: number): Buffer[] => {
  const size = Math.ceil(data.length / n);
  return Array.from({ length: n }, (_, i) => data.subarray(i * size, (i + 1) * size)).filter((p) => p.length > 0);
};

describe('upload bodies and the request timeout', () => {
  let server: TestServer;
  let key: string;

  before(async () => {
    server = await startTestServer({
      roles: { api: true, worker: false },
      settings: { requestTimeoutMs: REQUEST_TIMEOUT_MS, uploadIdleTimeoutMs: IDLE_TIMEOUT_MS },
    });
    key = await server.key('alice');
  });
  after(() => server.stop());

  async function stored(playbackId: string): Promise<Buffer | undefined> {
    const store = server.running.core.builtinStore;
    if (!(await store.stat(assetSourceKey(playbackId)))) return undefined;
    return buffer(await store.read(assetSourceKey(playbackId)));
  }

  async function tusCreate(tusEndpoint: string, length: number): Promise<string> {
    const created = await rawRequest(tusEndpoint, {
      method: 'POST',
      headers: { ...TUS, 'upload-length': String(length) },
    });
    assert.equal(created.status, 201);
    return String(created.headers.location);
  }

  const patchHeaders = (offset: number, length: number) => ({
    ...TUS,
    'content-type': 'application/offset+octet-stream',
    'upload-offset': String(offset),
    'content-length': String(length),
  });

  it('takes a direct PUT whose body arrives over longer than the request timeout', async () => {
    const u = await requestUpload(server.url, key);
    const data = randomBytes(PIECES * 4096);
    const res = await slowRequest(u.url, {
      method: 'PUT',
      headers: { 'content-type': 'video/mp4', 'content-length': String(data.length) },
      pieces: piecesOf(data, PIECES),
      everyMs: EVERY_MS,
    });
    assert.ok(res !== 'closed', 'the server closed the upload');
    assert.equal(res.status, 200, res.body);
    assert.deepEqual(await stored(u.asset.playbackId), data);
  });

  it('takes a tus PATCH whose body arrives over longer than the request timeout', async () => {
    const u = await requestUpload(server.url, key);
    const data = randomBytes(PIECES * 4096);
    const location = await tusCreate(u.tusEndpoint, data.length);
    const res = await slowRequest(location, {
      method: 'PATCH',
      headers: patchHeaders(0, data.length),
      pieces: piecesOf(data, PIECES),
      everyMs: EVERY_MS,
    });
    assert.ok(res !== 'closed', 'the server closed the upload');
    assert.equal(res.status, 204, res.body);
    assert.equal(res.headers['upload-offset'], String(data.length));
    assert.deepEqual(await stored(u.asset.playbackId), data);
  });

  it('closes a tus PATCH that stalls past the idle timeout; the upload resumes from the staged offset', async () => {
    const u = await requestUpload(server.url, key);
    const data = randomBytes(10 * 4096);
    const location = await tusCreate(u.tusEndpoint, data.length);
    const pieces = piecesOf(data, 10);
    // Four pieces, then nothing: the server closes the connection (no answer comes).
    const stalled = await slowRequest(location, {
      method: 'PATCH',
      headers: patchHeaders(0, data.length),
      pieces,
      everyMs: 50,
      stall: 4,
    });
    assert.equal(stalled, 'closed');

    const head = await rawRequest(location, { method: 'HEAD', headers: TUS });
    assert.equal(head.status, 200);
    const offset = 4 * 4096;
    assert.equal(head.headers['upload-offset'], String(offset), 'the bytes that came are kept');
    const rest = await rawRequest(location, {
      method: 'PATCH',
      headers: patchHeaders(offset, data.length - offset),
      chunks: [data.subarray(offset)],
    });
    assert.equal(rest.status, 204, rest.body);
    assert.equal(rest.headers['upload-offset'], String(data.length));
    assert.deepEqual(await stored(u.asset.playbackId), data);
  });

  it('still answers 408 to a slow body on any other route', async () => {
    const data = Buffer.from(JSON.stringify({ name: 'slow', url: 'https://example.com/a.mp4' }));
    const res = await slowRequest(`${server.url}/api/asset/upload/url`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'content-length': String(data.length),
      },
      pieces: piecesOf(data, PIECES),
      everyMs: EVERY_MS,
    });
    assert.ok(res !== 'closed', 'a 408 is answered before the connection closes');
    assert.equal(res.status, 408);
    assert.deepEqual(JSON.parse(res.body), {
      errors: [`the request did not arrive in full within ${REQUEST_TIMEOUT_MS} ms`],
    });
    assert.equal(res.headers.connection, 'close');
  });
});
