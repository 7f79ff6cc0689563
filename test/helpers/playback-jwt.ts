import { createPrivateKey, sign } from 'node:crypto';

// Playback JWTs as a Livepeer customer's backend signs them (issue #28): ES256 over
// base64url(header).base64url(payload), the signature R || S (JOSE), with the private key the
// signing-key route answered once (base64 of its PEM). node:crypto only, as the server's check.

const part = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');

export interface PlaybackClaims {
  sub: string;
  /** The key's publicKey as the API shows it (base64 of its PEM). */
  pub: string;
  /** Seconds since the epoch; default an hour from now. null leaves it out. */
  exp?: number | null;
  [claim: string]: unknown;
}

/** A compact JWS; `header` replaces parts of {alg: ES256, typ: JWT} (a wrong alg, say). */
export function signPlaybackJwt(
  privateKeyB64: string,
  claims: PlaybackClaims,
  header: Record<string, unknown> = {},
): string {
  const { exp, ...rest } = claims;
  const payload = {
    action: 'pull',
    iss: 'Livepeer Studio',
    video: 'none',
    ...rest,
    ...(exp === null ? {} : { exp: exp ?? Math.floor(Date.now() / 1000) + 3600 }),
  };
  const signed = `${part({ alg: 'ES256', typ: 'JWT', ...header })}.${part(payload)}`;
  const key = createPrivateKey(Buffer.from(privateKeyB64, 'base64').toString('utf8'));
  const signature = sign('sha256', Buffer.from(signed), { key, dsaEncoding: 'ieee-p1363' });
  return `${signed}.${signature.toString('base64url')}`;
}
