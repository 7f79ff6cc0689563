// A short in-memory cache of authenticated API keys for the gateway's hot path: without it
// every chat request pays an embedded-database query (about 1.2 ms with PGlite, measured by
// bench/llm.ts's spans) before its first token.
//
// Revocation: a key found valid is trusted for at most `ttlMs` (default 2 s) after it was
// looked up, so `keys revoke` takes effect on the gateway within that time, even while the
// key keeps sending requests. Unknown and revoked keys are never cached: a new key works at
// once and a wrong one always costs a lookup. Keys are held as SHA-256 digests, not as text.

import { createHash } from 'node:crypto';

export interface KeyPrincipal {
  owner: string;
}

export interface KeyCacheOptions<P extends KeyPrincipal> {
  /** The authoritative lookup (the accounts database): null for a missing, unknown or revoked key. */
  authenticate: (authorization: string | undefined) => Promise<P | null>;
  /** How long a valid key is trusted without asking again; 0 turns the cache off. */
  ttlMs?: number;
  /** Most keys held; the oldest lookup is dropped first. */
  maxEntries?: number;
  /** The clock, in ms (tests pass their own). */
  now?: () => number;
}

export const KEY_CACHE_TTL_MS = 2000;

export class KeyCache<P extends KeyPrincipal> {
  readonly #authenticate: (authorization: string | undefined) => Promise<P | null>;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, { principal: P; until: number }>();

  constructor(opts: KeyCacheOptions<P>) {
    this.#authenticate = opts.authenticate;
    this.#ttlMs = opts.ttlMs ?? KEY_CACHE_TTL_MS;
    this.#maxEntries = opts.maxEntries ?? 10_000;
    this.#now = opts.now ?? Date.now;
    if (!(this.#ttlMs >= 0 && this.#ttlMs <= 60_000)) throw new RangeError(`ttlMs: must be from 0 to 60000 (got ${this.#ttlMs})`);
  }

  async authenticate(authorization: string | undefined): Promise<P | null> {
    if (!authorization || this.#ttlMs === 0) return this.#authenticate(authorization);
    const digest = createHash('sha256').update(authorization).digest('base64');
    const now = this.#now();
    const hit = this.#entries.get(digest);
    if (hit && hit.until > now) return hit.principal;
    if (hit) this.#entries.delete(digest);
    const principal = await this.#authenticate(authorization);
    if (principal) {
      if (this.#entries.size >= this.#maxEntries) {
        const oldest = this.#entries.keys().next();
        if (!oldest.done) this.#entries.delete(oldest.value);
      }
      this.#entries.set(digest, { principal, until: now + this.#ttlMs });
    }
    return principal;
  }
}
