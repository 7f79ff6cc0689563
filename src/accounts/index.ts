import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Queryable } from '../db/index.ts';
import { bearerToken } from '../lib/bearer.ts';
import { AuthError, NotFoundError, ValidationError } from '../lib/errors.ts';
import {
  keyView,
  keyViews,
  type KeyView,
  limitColumns,
  ownerDefaultsOf,
  updateKeySettings,
  updateOwnerLimits,
} from './key-settings.ts';
import type { DeferredCount, KeyLimiter, Windows } from './limiter.ts';
import type { LimitColumns, OwnerLimitColumns } from './limit-settings.ts';
import { checkSettings, effectiveLimits, type KeyLimits, type LimitSettings, windowed } from './limits.ts';

export {
  type DeferredCount,
  type Held,
  KeyLimiter,
  keyLimiter,
  type LimiterOptions,
  type ReserveStep,
  type TokensHeld,
  type Windows,
} from './limiter.ts';
export type { BudgetPeriod, KeyLimits, LimitSettings } from './limits.ts';
export { KeyTaskAdmission, type TaskAdmissionOptions } from './task-admission.ts';
export { BUDGET_PERIODS, checkModel } from './limits.ts';
export {
  COUNT_SETTINGS,
  type CountField,
  LIMIT_SETTINGS,
  type LimitDescriptor,
  type LimitKind,
  limitsDocTable,
  type OwnerDescriptor,
  OWNER_SETTINGS,
} from './limit-settings.ts';
export type { KeyView } from './key-settings.ts';

// Owners (tenants) and their API keys. A key is shown once when created and stored only as
// its sha256: 192 random bits need no slow hash, and a lookup stays one indexed query.

export interface Principal {
  owner: string;
  projectId: string;
  keyId: string;
  /** What the key is held to (issue #32); undefined: no limit of any kind. */
  limits?: KeyLimits | undefined;
  /** The key's rate windows after this request was counted (keys with a requests or tokens limit). */
  windows?: Windows | undefined;
  /** This request's count, left to the route (admit's `defer`): KeyLimiter.hold makes it. */
  deferred?: DeferredCount | undefined;
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
  /** Counts requests against key limits (issue #32); without it, limits other than expiry are not enforced. */
  limiter?: KeyLimiter | undefined;
}

export class Accounts {
  readonly #db: Queryable;
  readonly #cacheMs: number;
  readonly #cache = new Map<string, { principal: Principal; until: number }>();
  readonly #limiter: KeyLimiter | undefined;

  constructor(db: Queryable, opts: AccountsOptions = {}) {
    this.#db = db;
    this.#cacheMs = opts.authCacheMs ?? 0;
    this.#limiter = opts.limiter;
  }

  /** The limiter the LLM billing and the task API count charges and tasks with (issue #32). */
  get limiter(): KeyLimiter | undefined {
    return this.#limiter;
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

  /** Creates a key for `owner` (and the owner if needed), with `settings`. The key itself is returned only here. */
  async createKey(
    owner: string,
    settings: LimitSettings = {},
  ): Promise<{ id: string; key: string; owner: string; projectId: string }> {
    // Checked before anything is written: a bad setting creates no key.
    checkSettings(settings, { forKey: true });
    const projectId = await this.ensureOwner(owner);
    const key = KEY_PREFIX + randomBytes(24).toString('base64url');
    const id = randomUUID();
    await this.#db.query('INSERT INTO api_keys (id, owner, key_hash, prefix) VALUES ($1, $2, $3, $4)', [
      id,
      owner,
      hashKey(key),
      key.slice(0, 7),
    ]);
    if (Object.keys(settings).length > 0) await updateKeySettings(this.#db, id, settings);
    return { id, key, owner, projectId };
  }

  /** Changes a key's limit settings (absent ones stay); false when no key has that id. */
  async updateKey(id: string, settings: LimitSettings): Promise<boolean> {
    const done = await updateKeySettings(this.#db, id, settings);
    this.#forget((p) => p.keyId === id);
    return done;
  }

  /** Changes an owner's default limits (absent ones stay); false when there is no such owner. */
  async updateOwnerLimits(owner: string, settings: LimitSettings): Promise<boolean> {
    const done = await updateOwnerLimits(this.#db, owner, settings);
    this.#forget((p) => p.owner === owner);
    return done;
  }

  /** Keys with their settings and limits: of one owner, or all. */
  keyViews(owner?: string): Promise<KeyView[]> {
    return keyViews(this.#db, owner === undefined ? {} : { owner });
  }

  /** One key of `owner` with its settings and limits; NotFoundError for another owner's. */
  keyView(owner: string, id: string): Promise<KeyView> {
    return keyView(this.#db, owner, id);
  }

  /** Drops cached lookups (a change made in this process holds at once; others' after authCacheMs). */
  #forget(which: (p: Principal) => boolean): void {
    for (const [hash, entry] of this.#cache) if (which(entry.principal)) this.#cache.delete(hash);
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
    this.#forget((p) => p.keyId === id);
    return rows.length > 0;
  }

  /**
   * The principal of a bearer header; AuthError (401) for a missing, unknown or revoked key.
   * The one auth path of every owner-facing route (the task API, the LLM gateway, the ledger),
   * so each says the same thing (issue #16).
   */
  async requirePrincipal(authorization: string | undefined): Promise<Principal> {
    const p = await this.authenticate(authorization);
    if (p) return checkExpiry(p);
    throw unauthorized(authorization);
  }

  /**
   * The auth step of every authenticated route (issue #32): the key (401 when missing, unknown,
   * revoked or expired), then its request counted against its limits (429 past them). A bad key
   * counts against the client's address: past MEDIAPLANE_AUTH_FAILURES_PER_MINUTE a window, its
   * bad keys are answered 429, never a good one (keys are 192 random bits: nobody guesses one,
   * so the limit slows scanners without letting an attacker lock a real key out of a shared address).
   * `defer`: the route counts the request itself (KeyLimiter.hold; countDeferred if it never gets there).
   */
  async admit(
    authorization: string | undefined,
    o: { address: string; defer?: DeferredCount | undefined },
  ): Promise<Principal> {
    const p = await this.authenticate(authorization);
    if (!p) {
      const refused = bearerToken(authorization) ? await this.#limiter?.authFailed(o.address) : undefined;
      throw refused ?? unauthorized(authorization);
    }
    checkExpiry(p);
    const limiter = this.#limiter;
    if (!limiter) return p;
    if (!windowed(p.limits)) {
      limiter.count(p);
      return p;
    }
    // A route that charges (the LLM completions) counts the request in its charge's statement.
    if (o.defer) return { ...p, deferred: o.defer };
    return { ...p, windows: await limiter.admit({ ...p, limits: p.limits }) };
  }

  /** The principal of a bearer header, or null for a missing, unknown or revoked key. */
  async authenticate(authorization: string | undefined): Promise<Principal | null> {
    const token = bearerToken(authorization);
    if (!token) return null;
    const hash = hashKey(token);
    const now = Date.now();
    const cached = this.#cache.get(hash);
    if (cached && cached.until > now) return cached.principal;
    // The key's limits and its owner's defaults come with the same query (issue #32).
    const rows = await this.#db.query<AuthRow>(
      `SELECT k.id, k.owner, o.project_id, k.expires_at, ${KEY_LIMITS}, ${OWNER_LIMITS}
       FROM api_keys k JOIN owners o ON o.name = k.owner LEFT JOIN owner_limits ol ON ol.owner = k.owner
       WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
      [hash],
    );
    const row = rows[0];
    if (!row) {
      this.#cache.delete(hash);
      return null;
    }
    const principal: Principal = { owner: row.owner, projectId: row.project_id, keyId: row.id };
    const limits = effectiveLimits(row, ownerDefaultsOf(row));
    if (limits) principal.limits = limits;
    if (this.#cacheMs > 0) {
      // Bounded: unknown keys are never cached, and expired entries go when it fills up.
      if (this.#cache.size >= 10_000) for (const [h, e] of this.#cache) if (e.until <= now) this.#cache.delete(h);
      if (this.#cache.size < 10_000) this.#cache.set(hash, { principal, until: now + this.#cacheMs });
    }
    return principal;
  }
}

const KEY_LIMITS = limitColumns('k');
const OWNER_LIMITS = limitColumns('ol', 'o_');

interface AuthRow extends LimitColumns, OwnerLimitColumns {
  id: string;
  owner: string;
  project_id: string;
  expires_at: Date | null;
}

/** The 401 of a missing or unknown key. */
function unauthorized(authorization: string | undefined): AuthError {
  return new AuthError(
    bearerToken(authorization) ? 'invalid API key' : 'missing API key: send Authorization: Bearer <key>',
  );
}

/** An expired key is a 401 (checked on every request: a cached lookup expires with it). */
function checkExpiry(p: Principal): Principal {
  const at = p.limits?.expiresAt ?? null;
  if (at !== null && at <= Date.now()) throw new AuthError(`API key expired at ${new Date(at).toISOString()}`);
  return p;
}
