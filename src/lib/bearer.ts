import { createHash, timingSafeEqual } from 'node:crypto';

// `Authorization: Bearer <token>`, read in one place (issue #16): API keys (the task API, the
// LLM gateway, the ledger) and the orchestrator secret all come this way.

/** The token of an `Authorization: Bearer <token>` header; the scheme word is case-insensitive. */
export function bearerToken(header: string | undefined): string | null {
  const m = /^bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return m?.[1] ?? null;
}

/**
 * Whether the header's bearer token is `secret` (the orchestrator secret: the gateway's
 * registration route, every orchestrator route but /healthz and /metrics). The two are
 * compared as SHA-256 digests, fixed-size, in constant time: comparing the raw bytes had to
 * return early on a length mismatch, which told a prober the secret's length (issue #15). An
 * empty secret matches nothing.
 */
export function secretMatches(header: string | undefined, secret: string): boolean {
  const token = bearerToken(header);
  if (!token || !secret) return false;
  return timingSafeEqual(sha256(token), sha256(secret));
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
