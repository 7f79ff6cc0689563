import { generateKeyPair, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import type { Db } from '../db/index.ts';
import { NotFoundError, ValidationError } from '../lib/errors.ts';
import { isUuid } from '../lib/ids.ts';
import { NEWEST_FIRST, olderThanCursor, paged } from '../lib/paging.ts';

// Signing keys (issue #28, Livepeer's access-control signing keys): all their SQL, in one
// place. A key is an ES256 pair made here with node:crypto, as livepeer/studio makes it
// (P-256, the public half as SPKI PEM, the private half as PKCS#8 PEM, each answered as
// base64 of its PEM). Only the public half is stored; the private half is returned once by
// `create` and never written, logged or kept in memory past that call.

const makeKeyPair = promisify(generateKeyPair);

/** A signing key as the store keeps it (never its private half). */
export interface SigningKey {
  id: string;
  owner: string;
  projectId: string;
  name: string;
  /** Base64 of the SPKI PEM: what the API shows and what a JWT's `pub` claim names. */
  publicKey: string;
  disabled: boolean;
  createdAt: Date;
  lastSeen: Date | null;
  deletedAt: Date | null;
}

export interface SigningKeyPage {
  limit: number;
  cursor?: string | undefined;
}

const COLUMNS = `id, owner, project_id AS "projectId", name, public_key AS "publicKey", disabled,
  created_at AS "createdAt", last_seen AS "lastSeen", deleted_at AS "deletedAt"`;

/** Livepeer lets an owner keep 10 keys ("delete some first"). */
const DEFAULT_MAX_PER_OWNER = 10;
/** lastSeen is for people ("is this key still used?"): one write a minute a key is plenty. */
const SEEN_EVERY_MS = 60_000;

export class SigningKeyStore {
  readonly #db: Db;
  readonly #maxPerOwner: number;
  /** When this process last wrote each key's last_seen (ids only: nothing to invalidate). */
  readonly #seenAt = new Map<string, number>();

  constructor(db: Db, opts: { maxPerOwner?: number } = {}) {
    this.#db = db;
    this.#maxPerOwner = opts.maxPerOwner ?? DEFAULT_MAX_PER_OWNER;
  }

  /**
   * A new key pair: the key as stored and its private half (base64 of its PKCS#8 PEM), which
   * only this answer ever holds. Without a name, Livepeer's "Signing Key <n>". An owner with
   * `maxPerOwner` keys gets a 422, as an owner with too many webhooks does (Livepeer answers
   * 403): deleting one lifts it, waiting does not.
   */
  async create(
    owner: string,
    projectId: string,
    o: { name?: string | undefined } = {},
  ): Promise<{ key: SigningKey; privateKey: string }> {
    const pair = await makeKeyPair('ec', {
      namedCurve: 'P-256',
      publicKeyEncoding: { type: 'spki', format: 'pem' },
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    });
    const publicKey = Buffer.from(pair.publicKey).toString('base64');
    const key = await this.#db.tx(async (q) => {
      // Two creates of one owner take turns, so neither passes the count the other fills.
      await q.query('SELECT 1 FROM owners WHERE name = $1 FOR UPDATE', [owner]);
      const rows = await q.query<SigningKey>(
        `WITH live AS (SELECT count(*)::int AS n FROM signing_keys WHERE owner = $2 AND deleted_at IS NULL)
         INSERT INTO signing_keys (id, owner, project_id, name, public_key)
         SELECT $1, $2, $3, COALESCE($4, 'Signing Key ' || (live.n + 1)), $5 FROM live WHERE live.n < $6
         RETURNING ${COLUMNS}`,
        [randomUUID(), owner, projectId, o.name ?? null, publicKey, this.#maxPerOwner],
      );
      return rows[0];
    });
    if (!key)
      throw new ValidationError(
        `an owner may have at most ${this.#maxPerOwner} signing keys; delete one before creating another`,
      );
    return { key, privateKey: Buffer.from(pair.privateKey).toString('base64') };
  }

  /** Newest first, deleted ones left out; `next` is the cursor of the following page, when there is one. */
  async list(owner: string, page: SigningKeyPage): Promise<{ keys: SigningKey[]; next: string | null }> {
    if (page.cursor !== undefined && !isUuid(page.cursor)) return { keys: [], next: null };
    // The cursor is the last id of the previous page (deleted since or not); (created_at, id) orders ties.
    const rows = await this.#db.query<SigningKey>(
      `SELECT ${COLUMNS} FROM signing_keys WHERE owner = $1 AND deleted_at IS NULL
         AND ${olderThanCursor({ table: 'signing_keys', cursor: '$2', scope: 'owner = $1' })} ${NEWEST_FIRST} LIMIT $3`,
      [owner, page.cursor ?? null, page.limit + 1],
    );
    const { items, next } = paged(rows, page.limit);
    return { keys: items, next };
  }

  /** The owner's key; another owner's, a deleted one or an id that is no UUID: NotFoundError. */
  async get(owner: string, id: string): Promise<SigningKey> {
    if (!isUuid(id)) throw new NotFoundError();
    const rows = await this.#db.query<SigningKey>(
      `SELECT ${COLUMNS} FROM signing_keys WHERE id = $1 AND owner = $2 AND deleted_at IS NULL`,
      [id, owner],
    );
    return found(rows[0]);
  }

  /** PATCH: a new name and/or `disabled`; a disabled key's tokens are refused from the next request on. */
  async update(owner: string, id: string, p: { name?: string; disabled?: boolean }): Promise<SigningKey> {
    if (!isUuid(id)) throw new NotFoundError();
    const rows = await this.#db.query<SigningKey>(
      `UPDATE signing_keys SET name = COALESCE($3, name), disabled = COALESCE($4, disabled)
       WHERE id = $1 AND owner = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
      [id, owner, p.name ?? null, p.disabled ?? null],
    );
    return found(rows[0]);
  }

  /** Soft delete: the key leaves the list and its tokens are refused from the next request on. */
  async remove(owner: string, id: string): Promise<void> {
    if (!isUuid(id)) throw new NotFoundError();
    const rows = await this.#db.query(
      `UPDATE signing_keys SET deleted_at = now() WHERE id = $1 AND owner = $2 AND deleted_at IS NULL RETURNING id`,
      [id, owner],
    );
    found(rows[0]);
  }

  /**
   * Any owner's key by its public key (base64 of its PEM, as a JWT's `pub` names it), deleted
   * and disabled ones included so that a refusal can say why. Read from the database on every
   * call (its unique index): nothing is cached, so a PATCH or DELETE holds from the next request.
   */
  async byPublicKey(publicKey: string): Promise<SigningKey | undefined> {
    const rows = await this.#db.query<SigningKey>(`SELECT ${COLUMNS} FROM signing_keys WHERE public_key = $1`, [
      publicKey,
    ]);
    return rows[0];
  }

  /** Notes that a token of key `id` opened a playback: lastSeen, written at most once a minute by this process. */
  async markSeen(id: string, now = Date.now()): Promise<void> {
    const last = this.#seenAt.get(id);
    if (last !== undefined && now - last < SEEN_EVERY_MS) return;
    // Bounded: ids of keys gone since would stay otherwise; forgetting costs one more write each.
    if (this.#seenAt.size >= 10_000) this.#seenAt.clear();
    this.#seenAt.set(id, now);
    await this.#db.query('UPDATE signing_keys SET last_seen = now() WHERE id = $1', [id]);
  }
}

function found<T>(row: T | undefined): T {
  if (!row) throw new NotFoundError();
  return row;
}
