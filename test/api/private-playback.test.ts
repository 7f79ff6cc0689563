// Issue #28 acceptance, private playback: an asset with playbackPolicy jwt (made by a direct
// upload of a short clip) answers 401 for its playlists, segments and source without a valid
// JWT: none, an expired one, one for another asset, one signed by another owner's key, one
// whose key was disabled or deleted. A valid one opens them as `?jwt=` or as the
// `Livepeer-Jwt` header, and headless Chromium plays the asset with hls.js given only the
// tokenized playbackUrl: the playlists it fetches carry the token on every URI they list, and
// the storyboard its sprite images. A token valid for longer than the server's bound (a day by
// default) is refused, and the asset's allowedOrigins hold beside its tokens.
// Tokens are signed here with node:crypto from the private key the signing-key route answered.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import { type BrowserPlayer, startBrowserPlayer } from '../helpers/browser.ts';
import { makeClip } from '../helpers/media.ts';
import { signPlaybackJwt } from '../helpers/playback-jwt.ts';
import { startS3 } from '../helpers/s3.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

const SMALL = [{ name: '216p0', width: 384, height: 216, bitrate: 400_000 }];
const KEYS = '/api/access-control/signing-key';

interface Key {
  id: string;
  publicKey: string;
  privateKey: string;
}

let server: TestServer;
let player: BrowserPlayer | undefined;
let skip = '';
let alice = '';
let bob = '';
let sdk: Livepeer;
/** alice's key for the tokens that must work; `rotating` is disabled and deleted along the way. */
let main: Key;
let rotating: Key;
let bobs: Key;
let asset: {
  id: string;
  playbackId: string;
  playbackUrl: string;
  downloadUrl: string;
  playbackPolicy?: { type: string };
};
let otherPlaybackId = '';
/** The files a player reads: master, rendition playlist, a segment, and the source download. */
let files: { master: string; rendition: string; segment: string; source: string };
const issued: string[] = [];

async function newKey(apiKey: string): Promise<Key> {
  const res = await server.call('POST', KEYS, { key: apiKey, body: {} });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

/** A token for `playbackId` signed by `key` (alice's main key and the asset by default). */
function token(o: { key?: Key; sub?: string; exp?: number; iat?: number } = {}): string {
  const key = o.key ?? main;
  const t = signPlaybackJwt(key.privateKey, {
    sub: o.sub ?? asset.playbackId,
    pub: key.publicKey,
    ...(o.exp === undefined ? {} : { exp: o.exp }),
    ...(o.iat === undefined ? {} : { iat: o.iat }),
  });
  issued.push(t);
  return t;
}

const withJwt = (url: string, jwt: string): string => `${url}${url.includes('?') ? '&' : '?'}jwt=${jwt}`;

/** The first URI line of a playlist, resolved against its URL (query left out, as a player does). */
function firstUri(text: string, base: string): string {
  const line = text.split('\n').find((l) => l.trim() !== '' && !l.startsWith('#'));
  assert.ok(line, `a URI in ${text}`);
  const url = new URL(line.trim(), base);
  url.search = '';
  return url.href;
}

/** A jwt asset of `apiKey`'s, uploaded with a direct PUT of `clip` and ready. */
async function privateAsset(on: TestServer, apiKey: string, clip: string): Promise<typeof asset> {
  const created = await on.call('POST', '/api/asset/request-upload', {
    key: apiKey,
    body: { name: 'private clip', playbackPolicy: { type: 'jwt' }, profiles: SMALL },
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const put = await fetch(created.body.url, { method: 'PUT', body: readFileSync(clip) });
  assert.ok(put.ok, `PUT answered ${put.status}`);
  return waitFor(
    async () => {
      const got = await on.call('GET', `/api/asset/${created.body.asset.id}`, { key: apiKey });
      if (got.body.status?.phase === 'failed') throw new Error(got.body.status.errorMessage);
      return got.body.status?.phase === 'ready' ? got.body : undefined;
    },
    120_000,
    'the private asset to be ready',
  );
}

before(async () => {
  const clip = await makeClip({ width: 384, height: 216, seconds: 4 });
  server = await startTestServer({});
  alice = await server.key('alice');
  bob = await server.key('bob');
  sdk = new Livepeer({ apiKey: alice, serverURL: `${server.url}/api` });
  [main, rotating, bobs] = [await newKey(alice), await newKey(alice), await newKey(bob)];

  asset = await privateAsset(server, alice, clip);
  const other = await server.call('POST', '/api/asset/request-upload', {
    key: alice,
    body: { name: 'another private one', playbackPolicy: { type: 'jwt' } },
  });
  otherPlaybackId = other.body.asset.playbackId;

  // The layout, read with a valid token in the header (answers the playlists as stored).
  const header = { 'livepeer-jwt': token() };
  const master = await fetch(asset.playbackUrl, { headers: header });
  assert.equal(master.status, 200);
  const rendition = firstUri(await master.text(), asset.playbackUrl);
  const media = await fetch(rendition, { headers: header });
  assert.equal(media.status, 200);
  const segment = firstUri(await media.text(), rendition);
  files = { master: asset.playbackUrl, rendition, segment, source: asset.downloadUrl };

  const started = await startBrowserPlayer();
  if ('skip' in started) skip = started.skip;
  else player = started;
});

after(async () => {
  await player?.close();
  await server?.stop();
});

/** Every file answers 401 with `why` in its message, CORS kept so a page can read it. */
async function allRefused(o: { jwt?: string; header?: string }, why: RegExp): Promise<void> {
  for (const [name, url] of Object.entries(files)) {
    const res = await fetch(o.jwt === undefined ? url : withJwt(url, o.jwt), {
      headers: o.header === undefined ? {} : { 'livepeer-jwt': o.header },
    });
    const body = await res.text();
    assert.equal(res.status, 401, `${name}: ${res.status} ${body}`);
    const errors = JSON.parse(body).errors as string[];
    assert.equal(errors.length, 1);
    assert.match(errors[0] ?? '', why, name);
    for (const t of [o.jwt, o.header]) if (t) assert.ok(!body.includes(t), `${name}: the answer repeats the token`);
    assert.equal(res.headers.get('access-control-allow-origin'), '*', `${name}: CORS on the 401`);
  }
}

/** Every file answers 200 with the token, each `private, no-store`. */
async function allOpen(o: { jwt?: string; header?: string }): Promise<void> {
  for (const [name, url] of Object.entries(files)) {
    const res = await fetch(o.jwt === undefined ? url : withJwt(url, o.jwt), {
      headers: o.header === undefined ? {} : { 'livepeer-jwt': o.header },
    });
    await res.arrayBuffer();
    assert.equal(res.status, 200, `${name}: ${res.status}`);
    assert.equal(res.headers.get('cache-control'), 'private, no-store', name);
  }
}

describe('private playback (playbackPolicy jwt)', () => {
  it('the asset shows its policy; the playback info has it too, with URLs that carry no token', async () => {
    assert.deepEqual(asset.playbackPolicy, { type: 'jwt' });
    const info = await sdk.playback.get(asset.playbackId);
    assert.equal(info.playbackInfo?.meta.playbackPolicy?.type, 'jwt');
    const urls = info.playbackInfo?.meta.source.map((s) => s.url) ?? [];
    assert.ok(urls.length >= 2, JSON.stringify(urls));
    for (const url of urls) assert.ok(!url.includes('?'), url);
  });

  it('without a token the playlists, a segment and the source are refused: 401 saying so', async () => {
    await allRefused({}, /this asset is private; send a JWT as \?jwt= or the Livepeer-Jwt header/);
  });

  it('refuses an expired token, one for another asset, one of another owner, a malformed one', async () => {
    const expired = token({ exp: Math.floor(Date.now() / 1000) - 3600 });
    await allRefused({ jwt: expired }, /the JWT has expired/);
    await allRefused({ header: expired }, /the JWT has expired/);
    await allRefused({ jwt: token({ sub: otherPlaybackId }) }, /the JWT is for another asset/);
    await allRefused({ jwt: token({ key: bobs }) }, /not signed by one of this asset's owner's signing keys/);
    await allRefused({ jwt: 'not.a.jwt' }, /malformed/);
  });

  it('opens every file with a valid token as ?jwt= or as the Livepeer-Jwt header', async () => {
    await allOpen({ jwt: token() });
    await allOpen({ header: token() });
  });

  it('a playlist opened with ?jwt= lists every URI with the token; one opened by the header is as stored', async () => {
    const jwt = token();
    const master = await (await fetch(withJwt(files.master, jwt))).text();
    const uris = master.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'));
    assert.ok(uris.length > 0);
    for (const uri of uris) assert.ok(uri.endsWith(`?jwt=${jwt}`), uri);
    const media = await (await fetch(withJwt(files.rendition, jwt))).text();
    const segments = media.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'));
    for (const uri of segments) assert.ok(uri.endsWith(`?jwt=${jwt}`), uri);
    const head = await fetch(withJwt(files.rendition, jwt), { method: 'HEAD' });
    assert.equal(Number(head.headers.get('content-length')), Buffer.byteLength(media));
    const plain = await (await fetch(files.master, { headers: { 'livepeer-jwt': jwt } })).text();
    assert.ok(!plain.includes('jwt='), 'the header is sent again by its player: no token in the playlist');
    const preflight = await fetch(files.master, { method: 'OPTIONS' });
    assert.match(preflight.headers.get('access-control-allow-headers') ?? '', /Livepeer-Jwt/);
  });

  it('the storyboard opened with ?jwt= names its sprite images with the token, and they open', async () => {
    const info = await sdk.playback.get(asset.playbackId);
    const vtt = info.playbackInfo?.meta.source.find((s) => s.type === 'text/vtt')?.url;
    assert.ok(vtt, 'the playback info lists the storyboard');
    const jwt = token();
    const res = await fetch(withJwt(vtt, jwt));
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'private, no-store');
    const text = await res.text();
    const images = text.split('\n').filter((l) => /\.jpe?g([?#]|$)/.test(l.trim()));
    assert.ok(images.length > 0, text);
    for (const uri of images) assert.ok(uri.includes(`?jwt=${jwt}#`), uri);
    // A player resolves each against the storyboard's URL and fetches it, fragment left out.
    const sprite = new URL(images[0] ?? '', withJwt(vtt, jwt));
    sprite.hash = '';
    const image = await fetch(sprite);
    await image.arrayBuffer();
    assert.equal(image.status, 200, sprite.href);
    assert.equal(image.headers.get('content-type'), 'image/jpeg');
    const plain = await (await fetch(vtt, { headers: { 'livepeer-jwt': jwt } })).text();
    assert.ok(!plain.includes('jwt='), 'opened by the header: as stored');
  });

  it('refuses a token valid for longer than a day (MEDIAPLANE_JWT_MAX_LIFETIME_SECS); a day, as the SDK signs, opens', async () => {
    const now = Math.floor(Date.now() / 1000);
    const why =
      /the JWT is valid for too long: this server accepts tokens whose exp is at most 86400 s after their iat/;
    await allRefused({ jwt: token({ exp: now + 30 * 86_400 }) }, why);
    await allRefused({ header: token({ iat: now, exp: now + 2 * 86_400 }) }, why);
    await allOpen({ jwt: token({ iat: now, exp: now + 86_400 }) });
  });

  it('plays in Chromium with hls.js given only the tokenized playbackUrl', async (t) => {
    if (!player) return t.skip(skip);
    const played = await player.playHls(withJwt(asset.playbackUrl, token()));
    assert.equal(played.error, undefined, played.log.join('\n'));
    assert.ok(played.played > 0.5, `played ${played.played} s`);
    assert.equal(played.videoHeight, 216);
  });

  it('a disabled key stops working at once and works again when enabled; a deleted key stops for good', async () => {
    const jwt = token({ key: rotating });
    await allOpen({ jwt });
    const other = new Livepeer({ apiKey: alice, serverURL: `${server.url}/api` });
    assert.equal((await other.accessControl.update({ disabled: true }, rotating.id)).statusCode, 204);
    await allRefused({ jwt }, /the JWT's signing key is disabled/);
    await other.accessControl.update({ disabled: false }, rotating.id);
    await allOpen({ jwt });
    assert.equal((await other.accessControl.delete(rotating.id)).statusCode, 204);
    await allRefused({ jwt }, /the JWT's signing key was deleted/);
    await allOpen({ jwt: token() });
  });

  it('PATCH to public opens the files to anyone, back to jwt closes them; webhook is a 422', async () => {
    const pub = await sdk.asset.update({ playbackPolicy: { type: 'public' as never } }, asset.id);
    assert.equal(pub.asset?.playbackPolicy?.type, 'public');
    const open = await fetch(files.segment);
    await open.arrayBuffer();
    assert.equal(open.status, 200);
    assert.match(open.headers.get('cache-control') ?? '', /^public/);
    const jwt = await sdk.asset.update({ playbackPolicy: { type: 'jwt' as never } }, asset.id);
    assert.equal(jwt.asset?.playbackPolicy?.type, 'jwt');
    await allRefused({}, /this asset is private/);
    const webhook = await server.call('PATCH', `/api/asset/${asset.id}`, {
      key: alice,
      body: { playbackPolicy: { type: 'webhook', webhookId: 'x' } },
    });
    assert.equal(webhook.status, 422);
    const said =
      'playbackPolicy.type: must be "public" or "jwt" (webhook playback policies are not supported on this server)';
    assert.ok(webhook.body.errors.includes(said), JSON.stringify(webhook.body));
  });

  it('allowedOrigins holds for a private asset too: an unlisted origin is a 403 even with a valid token', async () => {
    const limit = { type: 'jwt', allowedOrigins: ['https://good.example'] };
    const patched = await server.call('PATCH', `/api/asset/${asset.id}`, {
      key: alice,
      body: { playbackPolicy: limit },
    });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    try {
      const jwt = token();
      const evil = await fetch(withJwt(files.segment, jwt), { headers: { origin: 'https://evil.example' } });
      assert.equal(evil.status, 403);
      assert.match(await evil.text(), /does not allow the page's origin/);
      const good = await fetch(withJwt(files.master, jwt), { headers: { origin: 'https://good.example' } });
      assert.equal(good.status, 200);
      assert.ok((await good.text()).includes(`?jwt=${jwt}`));
      assert.equal(good.headers.get('access-control-allow-origin'), 'https://good.example');
      assert.match(good.headers.get('vary') ?? '', /\bOrigin\b/);
      const noToken = await fetch(files.segment, { headers: { origin: 'https://good.example' } });
      assert.equal(noToken.status, 401, 'a listed origin still needs the token');
      await allOpen({ jwt });
    } finally {
      await server.call('PATCH', `/api/asset/${asset.id}`, { key: alice, body: { playbackPolicy: { type: 'jwt' } } });
    }
  });

  it('no token and no private key is in a log line', () => {
    assert.ok(issued.length >= 8, `${issued.length} tokens`);
    for (const t of issued) assert.ok(!server.logs.text.includes(t), 'a token is in the logs');
    for (const k of [main, rotating, bobs])
      assert.ok(!server.logs.text.includes(k.privateKey), 'a private key is in the logs');
  });
});

describe('private playback from a bucket store that redirects (MEDIAPLANE_STORE_SERVE=redirect)', () => {
  // A private playlist is served through, never redirected (its URIs must resolve against the
  // service, which checks each); the files it lists answer a 302 to a presigned URL once the
  // token holds, and a 401 without one, before anything is signed.
  it('serves the playlists through, rewritten; redirects a segment only with a valid token', async () => {
    // Through the helper's proxy: uploads stage in the bucket as multipart uploads, whose
    // ListParts s3rver lacks and the proxy answers. The redirect is only looked at, not followed.
    const s3 = await startS3();
    const on = await startTestServer({
      settings: {
        storeUrl: `s3://${await s3.createBucket()}/store`,
        storeEndpoint: s3.endpoint,
        storeAccessKeyId: s3.credentials.accessKeyId,
        storeSecretAccessKey: s3.credentials.secretAccessKey,
        storeServe: 'redirect',
      },
    });
    try {
      const owner = await on.key('carol');
      const res = await on.call('POST', KEYS, { key: owner });
      const key: Key = res.body;
      const made = await privateAsset(on, owner, await makeClip({ width: 384, height: 216, seconds: 4 }));
      const jwt = signPlaybackJwt(key.privateKey, { sub: made.playbackId, pub: key.publicKey });
      const master = await fetch(withJwt(made.playbackUrl, jwt), { redirect: 'manual' });
      assert.equal(master.status, 200);
      assert.equal(master.headers.get('cache-control'), 'private, no-store');
      const rendition = new URL(
        (await master.text()).split('\n').find((l) => l !== '' && !l.startsWith('#')) ?? '',
        made.playbackUrl,
      ).href;
      assert.ok(rendition.endsWith(`?jwt=${jwt}`), rendition);
      const media = await fetch(rendition, { redirect: 'manual' });
      assert.equal(media.status, 200);
      const segment = new URL(
        (await media.text()).split('\n').find((l) => l !== '' && !l.startsWith('#')) ?? '',
        rendition,
      );
      assert.equal(segment.searchParams.get('jwt'), jwt);
      const redirected = await fetch(segment, { redirect: 'manual' });
      assert.equal(redirected.status, 302);
      assert.ok(redirected.headers.get('location')?.startsWith(`${s3.endpoint}/`));
      segment.search = '';
      const refused = await fetch(segment, { redirect: 'manual' });
      assert.equal(refused.status, 401);
      assert.equal(refused.headers.get('location'), null);
    } finally {
      await on.stop();
      await s3.close();
    }
  });
});
