import { createHmac } from 'node:crypto';

// Livepeer's webhook signature (livepeer/studio, packages/api/src/webhooks/cannon.ts
// `signatureHeaders` and controllers/helpers.ts `sign`): `Livepeer-Signature: t=<ms>,v1=<hex>`
// where v1 is the HMAC-SHA256 of the raw request body alone, keyed by the shared secret,
// and t is the envelope's `timestamp`. The body carries that timestamp too, so it is signed
// through the body; a receiver that checks it against t refuses a replayed old delivery.

export const SIGNATURE_HEADER = 'Livepeer-Signature';

/** Hex HMAC-SHA256 of `body` keyed by `secret`. */
export function signBody(body: string, secret: string): string {
  return createHmac('sha256', secret).update(body, 'utf8').digest('hex');
}

/** The signature header for `body` sent at `timestamp` (ms); none without a secret. */
export function signatureHeaders(body: string, secret: string | null, timestamp: number): Record<string, string> {
  if (!secret) return {};
  return { [SIGNATURE_HEADER]: `t=${timestamp},v1=${signBody(body, secret)}` };
}
