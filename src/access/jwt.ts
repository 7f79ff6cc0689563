import { verify } from 'node:crypto';
import { AuthError } from '../lib/errors.ts';
import type { SigningKey } from './signing-keys.ts';

// The playback JWT of private assets (issue #28), as Livepeer defines it: a JWS in compact
// form (RFC 7515) signed ES256 (RFC 7518 section 3.4: the signature is R || S, 64 bytes,
// which node:crypto reads with dsaEncoding 'ieee-p1363'), whose claims are `sub` (the
// playbackId), `pub` (the signing key's public key, base64 of its PEM as the API shows it:
// how the key is found) and `exp` (required, at most MEDIAPLANE_JWT_MAX_LIFETIME_SECS after
// `iat`). Checked with node:crypto alone; every refusal is an AuthError whose message says
// what is wrong and never repeats the token.

/** What the check needs of the signing keys (SigningKeyStore). */
export interface JwtKeyLookup {
  byPublicKey(publicKey: string): Promise<SigningKey | undefined>;
}

export interface PlaybackJwtCheck {
  token: string;
  /** The asset's playbackId: the token's `sub`. */
  playbackId: string;
  /** The asset's owner: the key must be one of theirs. */
  owner: string;
  /** ms since the epoch (tests); the clock otherwise. */
  now?: number;
  /** The longest a token may be valid for, `exp` after `iat` (or now); absent: no bound. */
  maxLifetimeSecs?: number | undefined;
}

/** How far `exp` and `nbf` may be off between the signer's clock and ours. */
export const CLOCK_SKEW_MS = 30_000;
/** A token of Livepeer's shape is about 600 characters; anything far longer is no token of ours. */
const MAX_TOKEN_LENGTH = 8192;
const PART = /^[A-Za-z0-9_-]+$/;

const refused = (why: string): AuthError => new AuthError(`playback refused: ${why}`);

/** A base64url part as a JSON object, or undefined. */
function jsonPart(part: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** `pub` as the store keeps it: base64 of the PEM; a PEM given as it is (not encoded) is accepted too. */
function storedForm(pub: string): string {
  if (!pub.startsWith('-----BEGIN')) return pub;
  return Buffer.from(`${pub.replace(/\r\n/g, '\n').trim()}\n`).toString('base64');
}

interface Parsed {
  signed: string;
  signature: Buffer;
  claims: Record<string, unknown>;
}

/** The token's parts, its header checked (ES256, nothing critical it does not know). */
function parse(token: string): Parsed {
  const parts = token.split('.');
  const [h, p, s] = parts;
  if (token.length > MAX_TOKEN_LENGTH || parts.length !== 3 || !h || !p || !s || !parts.every((x) => PART.test(x)))
    throw refused('the JWT is malformed (it must be header.payload.signature, each base64url)');
  const header = jsonPart(h);
  const claims = jsonPart(p);
  if (!header || !claims) throw refused('the JWT is malformed (its header and payload must be JSON objects)');
  if (header.alg !== 'ES256') throw refused('the JWT must be signed with ES256 (its header alg)');
  // RFC 7515 section 4.1.11: a critical extension this server does not know makes the token invalid.
  if (header.crit !== undefined)
    throw refused('the JWT has critical header parameters (crit) this server does not know');
  return { signed: `${h}.${p}`, signature: Buffer.from(s, 'base64url'), claims };
}

/**
 * A token valid for longer than `maxSecs` is refused: one leaked in a URL (a shared link, a
 * referrer, a proxy's log) would otherwise open the asset for as long as its signer wrote. The
 * lifetime counts from `iat` (the livepeer SDK's signAccessJwt sets it, exp one day later by
 * default), from now when there is none or it lies ahead, so a future `iat` stretches nothing.
 */
function checkLifetime(o: { exp: number; iat: unknown; now: number; maxSecs: number | undefined }): void {
  if (o.maxSecs === undefined) return;
  const issued = typeof o.iat === 'number' && Number.isFinite(o.iat) ? Math.min(o.iat * 1000, o.now) : o.now;
  if (o.exp * 1000 - issued > o.maxSecs * 1000 + CLOCK_SKEW_MS)
    throw refused(
      `the JWT is valid for too long: this server accepts tokens whose exp is at most ${o.maxSecs} s after their iat (or now)`,
    );
}

/** `exp` (required, and not too far ahead), `nbf` (when given) and `sub` against the asset. */
function checkClaims(claims: Record<string, unknown>, c: PlaybackJwtCheck): string {
  const now = c.now ?? Date.now();
  const { exp, nbf, sub, pub } = claims;
  if (typeof exp !== 'number' || !Number.isFinite(exp))
    throw refused('the JWT has no exp claim (its expiry, in seconds since the epoch)');
  if (exp * 1000 + CLOCK_SKEW_MS <= now) throw refused('the JWT has expired');
  checkLifetime({ exp, iat: claims.iat, now, maxSecs: c.maxLifetimeSecs });
  if (typeof nbf === 'number' && nbf * 1000 - CLOCK_SKEW_MS > now) throw refused('the JWT is not valid yet (nbf)');
  if (typeof sub !== 'string') throw refused("the JWT has no sub claim (the asset's playbackId)");
  if (sub !== c.playbackId) throw refused('the JWT is for another asset (its sub is another playbackId)');
  if (typeof pub !== 'string' || pub === '') throw refused("the JWT has no pub claim (its signing key's public key)");
  return pub;
}

/**
 * The signing key that opens playback of the asset `c` names with `c.token`, or an AuthError
 * saying why not: malformed, not ES256, expired, for another asset, not signed by one of the
 * owner's keys, a signature that does not verify, or a key disabled or deleted. The key is
 * read anew for every token, so a disabled or deleted key stops working at once.
 */
export async function verifyPlaybackJwt(keys: JwtKeyLookup, c: PlaybackJwtCheck): Promise<SigningKey> {
  const { signed, signature, claims } = parse(c.token);
  const pub = checkClaims(claims, c);
  const key = await keys.byPublicKey(storedForm(pub));
  // Another owner's key opens nothing here, and says nothing of that owner either.
  if (!key || key.owner !== c.owner) throw refused("the JWT is not signed by one of this asset's owner's signing keys");
  const pem = Buffer.from(key.publicKey, 'base64').toString('utf8');
  const valid =
    signature.length === 64 &&
    verify('sha256', Buffer.from(signed), { key: pem, dsaEncoding: 'ieee-p1363' }, signature);
  if (!valid) throw refused("the JWT's signature does not verify with its signing key");
  if (key.deletedAt !== null) throw refused("the JWT's signing key was deleted");
  if (key.disabled) throw refused("the JWT's signing key is disabled");
  return key;
}
