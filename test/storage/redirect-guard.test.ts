import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { InputUnreadableError, isRetryable } from '../../src/lib/errors.ts';
import { assertHostAllowed, type Resolve } from '../../src/lib/net-guard.ts';
import { HttpInput } from '../../src/storage/http.ts';
import { redirect, serveFile, startHttp, type TestHttp } from '../helpers/http-input.ts';

// Issue 3: "redirects followed up to a limit, re-checked against the private-address guard
// after each hop". A public first host cannot be had on a machine without network, so two
// loopback servers play the parts: `outside` stands for a public host (the guard is told to
// let its port through), `inside` for an internal one (metadata service, intranet). The
// decision itself is the real guard's: assertHostAllowed with allowPrivate true or false.

let outside: TestHttp;
let inside: TestHttp;
let dir: string;
const body = Buffer.from('media bytes '.repeat(500));

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mp-redirect-guard-'));
  const file = path.join(dir, 'src.bin');
  await writeFile(file, body);
  inside = await startHttp({ '/latest/meta-data': serveFile(file, 'text/plain'), '/v.mp4': serveFile(file) });
  outside = await startHttp({
    '/v.mp4': serveFile(file),
    '/to-inside': redirect(inside.url('/latest/meta-data')),
    '/hop1': redirect('/hop2', 301),
    '/hop2': redirect(inside.url('/v.mp4'), 307),
    '/local-hops': redirect('/v.mp4'),
  });
});
after(async () => {
  await Promise.all([outside?.close(), inside?.close(), rm(dir, { recursive: true, force: true })]);
});

/** An input whose guard treats `outside`'s host:port as public and everything else as what it is (loopback). */
function input(url: string, asked: string[]): HttpInput {
  const publicHost = new URL(outside.url('/')).host;
  return new HttpInput(new URL(url), {
    limits: { maxBytes: 1 << 20, timeoutMs: 10_000, idleTimeoutMs: 5_000 },
    maxRedirects: 5,
    allowPrivate: false,
    checkHost: async (u) => {
      asked.push(u.href);
      await assertHostAllowed(u, { allowPrivate: u.host === publicHost });
    },
  });
}

let n = 0;
const dest = (): string => path.join(dir, `in-${n++}`);

describe('HTTP input: the private-address guard on every redirect hop', () => {
  it('fetches from the allowed host, its own redirects included (the guard asked each hop)', async () => {
    const asked: string[] = [];
    const got = await input(outside.url('/local-hops'), asked).fetch({
      dest: dest(),
      signal: new AbortController().signal,
    });
    assert.deepEqual(await readFile(got.path), body);
    assert.deepEqual(asked, [outside.url('/local-hops'), outside.url('/v.mp4')]);
  });

  it('refuses a redirect from an allowed host to a loopback one, before connecting to it', async () => {
    const asked: string[] = [];
    const before = inside.hits.length;
    const err = await input(outside.url('/to-inside'), asked)
      .fetch({ dest: dest(), signal: new AbortController().signal })
      .then(
        () => assert.fail('the redirect to a loopback address was followed'),
        (e: unknown) => e,
      );
    assert.ok(err instanceof InputUnreadableError, String(err));
    assert.ok(!isRetryable(err), 'a refused address is not worth another try');
    assert.match(
      err.message,
      new RegExp(`http://${new URL(inside.url('/')).host.replace(/\./g, '\\.')} is not allowed: .*loopback`),
    );
    assert.equal(inside.hits.length, before, 'the internal server was never asked');
    assert.deepEqual(asked, [outside.url('/to-inside'), inside.url('/latest/meta-data')]);
  });

  it('checks the third hop as well as the second', async () => {
    const asked: string[] = [];
    const before = inside.hits.length;
    const err = await input(outside.url('/hop1'), asked)
      .fetch({ dest: dest(), signal: new AbortController().signal })
      .then(
        () => assert.fail('the redirect chain ending at a loopback address was followed'),
        (e: unknown) => e,
      );
    assert.ok(err instanceof InputUnreadableError, String(err));
    assert.match(err.message, /is not allowed/);
    assert.equal(inside.hits.length, before);
    assert.deepEqual(asked, [outside.url('/hop1'), outside.url('/hop2'), inside.url('/v.mp4')]);
  });

  it('with no injected check, the default guard refuses loopback on the first hop', async () => {
    const before = outside.hits.length;
    const plain = new HttpInput(new URL(outside.url('/v.mp4')), {
      limits: { maxBytes: 1 << 20, timeoutMs: 10_000, idleTimeoutMs: 5_000 },
      maxRedirects: 5,
      allowPrivate: false,
    });
    const err = await plain.fetch({ dest: dest(), signal: new AbortController().signal }).then(
      () => assert.fail('loopback fetched'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof InputUnreadableError);
    assert.match(err.message, /not allowed.*loopback/);
    assert.equal(outside.hits.length, before);
  });
});

describe('HTTP input: the private-address guard when the socket connects (DNS rebinding, issue #15)', () => {
  it('refuses a name that answered a public address when checked and 127.0.0.1 when the socket resolved it, for good', async () => {
    const before = inside.hits.length;
    const asked: string[] = [];
    const answers = ['93.184.216.34', '127.0.0.1'];
    const resolve: Resolve = async (name) => {
      const address = answers[Math.min(asked.push(name) - 1, answers.length - 1)] ?? '';
      return [{ address, family: 4 }];
    };
    const url = `http://media.rebind.test:${new URL(inside.url('/')).port}/latest/meta-data`;
    const rebound = new HttpInput(new URL(url), {
      limits: { maxBytes: 1 << 20, timeoutMs: 10_000, idleTimeoutMs: 5_000 },
      maxRedirects: 5,
      allowPrivate: false,
      resolve,
    });
    const err = await rebound.fetch({ dest: dest(), signal: new AbortController().signal }).then(
      () => assert.fail('the rebound name was fetched'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof InputUnreadableError, String(err));
    assert.ok(!isRetryable(err), 'a refused address is not worth another try');
    assert.match(
      err.message,
      /http:\/\/media\.rebind\.test:\d+ is not allowed: media\.rebind\.test resolves to a private or reserved address/,
    );
    assert.ok(!err.message.includes('127.0.0.1'), 'where the name points is not said');
    assert.deepEqual(asked, ['media.rebind.test', 'media.rebind.test'], 'asked by the check, then by the socket');
    assert.equal(inside.hits.length, before, 'the internal server was never asked');
  });
});
