// The playback JWT check (issue #28) on its own: each rule a token can break gives its own
// 401 message, which never repeats the token; a token that keeps them all gives its key.

import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { CLOCK_SKEW_MS, type SigningKey, verifyPlaybackJwt } from '../../src/access/index.ts';
import { AuthError } from '../../src/lib/errors.ts';
import { signPlaybackJwt } from '../helpers/playback-jwt.ts';

function keyPair(): { pub: string; priv: string } {
  const pair = generateKeyPairSync('ec', {
    namedCurve: 'P-256',
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { pub: Buffer.from(pair.publicKey).toString('base64'), priv: Buffer.from(pair.privateKey).toString('base64') };
}

const alice = keyPair();
const bob = keyPair();
const stored = (pub: string, owner: string, over: Partial<SigningKey> = {}): SigningKey => ({
  id: `id-${owner}`,
  owner,
  projectId: 'p',
  name: 'k',
  publicKey: pub,
  disabled: false,
  createdAt: new Date(),
  lastSeen: null,
  deletedAt: null,
  ...over,
});
let aliceKey = stored(alice.pub, 'alice');
const keys = {
  byPublicKey: async (pub: string) => [aliceKey, stored(bob.pub, 'bob')].find((k) => k.publicKey === pub),
};
const PLAYBACK = 'abcd1234efgh5678';
const check = (token: string, now?: number) =>
  verifyPlaybackJwt(keys, { token, playbackId: PLAYBACK, owner: 'alice', ...(now === undefined ? {} : { now }) });

/** The AuthError message of a refused token (and that it does not hold the token). */
async function refusal(token: string, now?: number): Promise<string> {
  try {
    await check(token, now);
  } catch (err) {
    assert.ok(err instanceof AuthError, String(err));
    assert.equal(err.statusCode, 401);
    assert.ok(!err.message.includes(token), 'the message repeats the token');
    return err.message;
  }
  assert.fail('the token was accepted');
}

const good = (over: Record<string, unknown> = {}, header: Record<string, unknown> = {}) =>
  signPlaybackJwt(alice.priv, { sub: PLAYBACK, pub: alice.pub, ...over }, header);

describe('verifyPlaybackJwt', () => {
  it("accepts an ES256 token for the asset signed by one of its owner's keys", async () => {
    assert.equal((await check(good())).id, 'id-alice');
  });

  it('accepts `pub` as the PEM itself, not base64 of it', async () => {
    const pem = Buffer.from(alice.pub, 'base64').toString('utf8').trim();
    assert.equal((await check(good({ pub: pem }))).id, 'id-alice');
  });

  it('refuses what is no JWT, or no ES256 one', async () => {
    assert.match(await refusal('not-a-token'), /malformed/);
    assert.match(await refusal('a.b.c'), /malformed/);
    assert.match(await refusal(`${good()}.x`), /malformed/);
    assert.match(await refusal('x'.repeat(9000)), /malformed/);
    assert.match(await refusal(good({}, { alg: 'HS256' })), /must be signed with ES256/);
    assert.match(await refusal(good({}, { alg: 'none' })), /must be signed with ES256/);
    assert.match(await refusal(good({}, { crit: ['b64'] })), /critical header/);
  });

  it('refuses a token without exp, expired beyond the skew, or not valid yet; a second of skew passes', async () => {
    const now = Date.now();
    const sec = Math.floor(now / 1000);
    assert.match(await refusal(good({ exp: null })), /no exp claim/);
    assert.match(await refusal(good({ exp: sec - 3600 })), /expired/);
    assert.match(await refusal(good({ exp: sec - CLOCK_SKEW_MS / 1000 - 1 }), now), /expired/);
    assert.equal((await check(good({ exp: sec - 1 }), now)).id, 'id-alice');
    assert.match(await refusal(good({ nbf: sec + 3600 })), /not valid yet/);
  });

  it('refuses a token valid for longer than the server allows, counted from iat, else from now', async () => {
    const now = Date.now();
    const sec = Math.floor(now / 1000);
    const DAY = 86_400;
    const within = (claims: Record<string, unknown>) =>
      verifyPlaybackJwt(keys, { token: good(claims), playbackId: PLAYBACK, owner: 'alice', now, maxLifetimeSecs: DAY });
    const tooLong = async (claims: Record<string, unknown>) => {
      const err = await within(claims).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof AuthError, `accepted ${JSON.stringify(claims)}`);
      assert.match(err.message, /valid for too long: this server accepts tokens whose exp is at most 86400 s after/);
    };
    // The livepeer SDK's signAccessJwt: iat now, exp a day later (its default expiration).
    assert.equal((await within({ iat: sec, exp: sec + DAY })).id, 'id-alice');
    assert.equal((await within({ iat: sec - DAY / 2, exp: sec + DAY / 2 })).id, 'id-alice');
    assert.equal((await within({ exp: sec + DAY })).id, 'id-alice', 'no iat: counted from now');
    await tooLong({ iat: sec, exp: sec + 2 * DAY });
    await tooLong({ iat: sec - 3600, exp: sec + DAY });
    await tooLong({ exp: sec + 2 * DAY });
    await tooLong({ exp: sec + 100 * 365 * DAY });
    await tooLong({ iat: sec + DAY, exp: sec + 2 * DAY });
    assert.equal((await check(good({ exp: sec + 2 * DAY }))).id, 'id-alice', 'no bound given: none applies');
  });

  it('refuses a token for another asset, or without sub or pub', async () => {
    assert.match(await refusal(good({ sub: 'otherplayback000' })), /for another asset/);
    assert.match(await refusal(good({ sub: undefined })), /no sub claim/);
    assert.match(await refusal(good({ pub: undefined })), /no pub claim/);
  });

  it("refuses another owner's key, an unknown key, and a signature that does not verify", async () => {
    const bobs = signPlaybackJwt(bob.priv, { sub: PLAYBACK, pub: bob.pub });
    assert.match(await refusal(bobs), /not signed by one of this asset's owner's signing keys/);
    assert.match(await refusal(good({ pub: keyPair().pub })), /not signed by one of/);
    // Signed by bob's private key while naming alice's public key.
    const forged = signPlaybackJwt(bob.priv, { sub: PLAYBACK, pub: alice.pub });
    assert.match(await refusal(forged), /signature does not verify/);
    const [h, p] = good().split('.');
    assert.match(await refusal(`${h}.${p}.${Buffer.alloc(72).toString('base64url')}`), /signature does not verify/);
  });

  it('refuses a disabled or deleted key, once the signature holds', async () => {
    aliceKey = stored(alice.pub, 'alice', { disabled: true });
    assert.match(await refusal(good()), /signing key is disabled/);
    aliceKey = stored(alice.pub, 'alice', { deletedAt: new Date() });
    assert.match(await refusal(good()), /signing key was deleted/);
    aliceKey = stored(alice.pub, 'alice');
  });
});
