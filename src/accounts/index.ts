import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Queryable } from '../db/index.ts';
import { bearerToken } from '../lib/bearer.ts';
import { AuthError, NotFoundError, ValidationError } from '../lib/errors.ts';

// Owners (tenants) and their API keys. A key is shown once when created and stored only as
// its sha256: 192 random bits need no slow hash, and a lookup stays one indexed query.

export interface Principal {
  owner: string;
  projectId: string;
  keyId: string;
}

export interface KeyInfo {
  id: string;
  owner: string;
  prefix: string;
  createdAt: Date;
  revokedAt: Date | null;
}

const KEY_PREFIX = 'mp_';
const OWNER_RE = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$/;

function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export interface AccountsOptions {
  /**
   * How long a successful key lookup is reused, in ms (0: never). Every authenticated
   * request otherwise costs a database round trip; the price is that a key revoked by
   * another process keeps working for up to this long (revoking in this process is at once).
   */
  authCacheMs?: number;
}

export class Accounts {
  readonly #db: Queryable;
  readonly #cacheMs: number;
  readonly #cache = new Map<string, { principal: Principal; until: number }>();

  constructor(db: Queryable, opts: AccountsOptions = {}) {
    this.#db = db;
    this.#cacheMs = opts.authCacheMs ?? 0;
  }

  /** Creates the owner if it does not exist yet; returns its project id. */
  async ensureOwner(name: string): Promise<string> {
    if (!OWNER_RE.test(name))
      throw new ValidationError(`owner: must be 1-128 letters, digits or _ . @ - (got ${JSON.stringify(name)})`);
    const rows = await this.#db.query<{ project_id: string }>(
      `INSERT INTO owners (name, project_id) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING project_id`,
      [name, randomUUID()],
    );
    const row = rows[0];
    if (!row) throw new NotFoundError(`owner ${name} could not be created`);
    return row.project_id;
  }

  /** Creates a key for `owner` (and the owner if needed). The key itself is returned only here. */
  async createKey(owner: string): Promise<{ id: string; key: string; owner: string; projectId: string }> {
    const projectId = await this.ensureOwner(owner);
    const key = KEY_PREFIX + randomBytes(24).toString('base64url');
    const id = randomUUID();
    await this.#db.query('INSERT INTO api_keys (id, owner, key_hash, prefix) VALUES ($1, $2, $3, $4)', [
      id,
      owner,
      hashKey(key),
      key.slice(0, 7),
    ]);
    return { id, key, owner, projectId };
  }

  async listKeys(owner?: string): Promise<KeyInfo[]> {
    const rows = await this.#db.query<{
      id: string;
      owner: string;
      prefix: string;
      created_at: Date;
      revoked_at: Date | null;
    }>(
      `SELECT id, owner, prefix, created_at, revoked_at FROM api_keys
       WHERE $1::text IS NULL OR owner = $1 ORDER BY created_at, id`,
      [owner ?? null],
    );
    return rows.map((r) => ({
      id: r.id,
      owner: r.owner,
      prefix: r.prefix,
      createdAt: new Date(r.created_at),
      revokedAt: r.revoked_at ? new Date(r.revoked_at) : null,
    }));
  }

  /** Revokes a key by its id; true when a live key was revoked. */
  async revokeKey(id: string): Promise<boolean> {
    if (!/^[0-9a-f-]{36}$/i.test(id)) return false;
    const rows = await this.#db.query(
      'UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id',
      [id],
    );
    for (const [hash, entry] of this.#cache) if (entry.principal.keyId === id) this.#cache.delete(hash);
    return rows.length > 0;
  }

  /**
   * The principal of a bearer header; AuthError (401) for a missing, unknown or revoked key.
   * The one auth path of every owner-facing route (the task API, the LLM gateway, the ledger),
   * so each says the same thing (issue #16).
   */
  async requirePrincipal(authorization: string | undefined): Promise<Principal> {
    const p = await this.authenticate(authorization);
    if (p) return p;
    throw new AuthError(
      bearerToken(authorization) ? 'invalid API key' : 'missing API key: send Authorization: Bearer <key>',
    );
  }

  /** The principal of a bearer header, or null for a missing, unknown or revoked key. */
  async authenticate(authorization: string | undefined): Promise<Principal | null> {
    const token = bearerToken(authorization);
    if (!token) return null;
    const hash = hashKey(token);
    const now = Date.now();
    const cached = this.#cache.get(hash);
    if (cached && cached.until > now) return cached.principal;
    const rows = await this.#db.query<{ id: string; owner: string; project_id: string }>(
      `SELECT k.id, k.owner, o.project_id FROM api_keys k JOIN owners o ON o.name = k.owner
       WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
      [hash],
    );
    const row = rows[0];
    if (!row) {
      this.#cache.delete(hash);
      return null;
    }
    const principal = { owner: row.owner, projectId: row.project_id, keyId: row.id };
    if (this.#cacheMs > 0) {
      // Bounded: unknown keys are never cached, and expired entries go when it fills up.
      if (this.#cache.size >= 10_000) for (const [h, e] of this.#cache) if (e.until <= now) this.#cache.delete(h);
      if (this.#cache.size < 10_000) this.#cache.set(hash, { principal, until: now + this.#cacheMs });
    }
    return principal;
  }
}
