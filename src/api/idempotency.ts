import { createHash, randomUUID } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { Db, Queryable } from '../db/index.ts';
import { ValidationError } from '../lib/errors.ts';
import { ERROR_MESSAGE } from '../lib/schema-errors.ts';
import { Wakeup } from '../lib/wakeup.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';

// Idempotent creation (issue #18, spec/API.md section A): a client that sends
// `Idempotency-Key` on POST /api/transcode or POST /api/webhook may send the request again
// (a timeout, a dropped connection) and get the first answer back instead of a second task.
// Semantics follow the IETF draft "The Idempotency-Key HTTP Header Field"
// (draft-ietf-httpapi-idempotency-key-header): the same key with another body is a 422, a
// request whose twin is still in flight is a 409. Keys are per owner and per route and live
// 24 h. All SQL of the table is here (migration 004_idempotency_keys.sql).
//
// A twin waits on a NOTIFY (issue #25: 30 twins polling every 25 ms used 5.1 s of CPU in
// 6.3 s): the request that held the key notifies when its answer is kept or its claim is
// given up, and a twin looks again then, or after a backoff (doubling from `pollMs` to 1 s)
// where the notification was lost or its process died. At most `maxWaiters` twins of a key
// wait in one process; one more gets the 409 at once (Stripe answers a concurrent twin 409
// too, idempotency_key_in_use), so a flood of twins costs no more than that many waits.

export const IDEMPOTENCY_HEADER = 'idempotency-key';

const KEY_RULE = 'must be 1 to 255 printable ASCII characters (U+0020 to U+007E)';

/** The header's schema, for a route's `schema.headers`: validation and the OpenAPI document in one. */
export const IdempotencyHeaders = Type.Object({
  [IDEMPOTENCY_HEADER]: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: '^[\\x20-\\x7E]+$',
      description:
        'Makes the request safe to send again: the same key and body within 24 hours answer the first response again (the same id, nothing created twice; the answer carries Idempotent-Replayed: true); the same key with another body is a 422; while the first request with the key is still being answered, a second waits for its answer, or gets a 409 after 10 s (at once when too many requests already wait for the key). Only successful answers are kept: after a 4xx the key may be sent again with a corrected body.',
      [ERROR_MESSAGE]: KEY_RULE,
    }),
  ),
});

/** The 409 body: the task API's shape, documented with the route's other answers. */
export const IdempotencyConflictBody = TasksErrorBody;

export interface IdempotencyOptions {
  /** How long a stored answer is replayed (24 h). */
  ttlMs?: number;
  /** How long a request waits for its twin's answer before a 409 (10 s). */
  waitMs?: number;
  /** The first backoff between two looks while waiting (50 ms); it doubles up to 1 s. A NOTIFY wakes it sooner. */
  pollMs?: number;
  /** Requests that may wait for one key's answer in this process (MEDIAPLANE_IDEMPOTENCY_MAX_WAITERS, 8). */
  maxWaiters?: number | undefined;
  /**
   * A claim older than this whose request never answered (its process died) is taken over
   * (60 s: creating a task or a webhook takes milliseconds).
   */
  abandonedMs?: number;
}

interface StoredRow {
  body_hash: string;
  status: number | null;
  response: unknown;
}

/** The body as canonical JSON (object keys sorted), so the same JSON in another key order is the same body. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The body's SHA-256. It covers credentials (S3 keys, a webhook's secret), but it keeps nothing
 * the database does not already hold in the clear for the work itself (tasks.params,
 * webhooks.shared_secret), and it never leaves the database.
 */
export function bodyHash(body: unknown): string {
  return createHash('sha256').update(canonical(body)).digest('hex');
}

/** How long a kept answer is replayed: 24 h (the header's description says so). */
const TTL_MS = 24 * 3600_000;
/** The longest backoff between two looks of a waiting twin. */
const MAX_POLL_MS = 1000;
const DEFAULT_MAX_WAITERS = 8;

/** NOTIFY channel of a key whose answer was kept or whose claim was given up; the payload is keyId(). */
const IDEMPOTENCY_CHANNEL = 'mediaplane_idempotency';

/** A twin's wait ends on its own deadline, not on an abort. */
const NO_ABORT = new AbortController().signal;

/** What a look at the key found: the key claimed for this request, the kept answer, or (null) a twin in flight. */
type Found = { claim: string } | { kept: StoredRow & { status: number } } | null;

/** Why a request gets the 409: its twin is still answered past the wait, or too many wait already. */
type Refused = { refused: string };

/** The Idempotency-Key store: claims a key before the work, keeps the answer after it. */
export class IdempotencyKeys {
  readonly #db: Db;
  readonly #ttlSecs: number;
  readonly #waitMs: number;
  readonly #pollMs: number;
  readonly #abandonedSecs: number;
  readonly #maxWaiters: number;
  /** The wake-ups of the twins waiting in this process, by keyId(); an entry goes with its last waiter. */
  readonly #waiters = new Map<string, Set<Wakeup>>();
  #listening: Promise<void> | undefined;

  constructor(db: Db, opts: IdempotencyOptions = {}) {
    this.#db = db;
    this.#ttlSecs = (opts.ttlMs ?? TTL_MS) / 1000;
    this.#waitMs = opts.waitMs ?? 10_000;
    this.#pollMs = opts.pollMs ?? 50;
    this.#abandonedSecs = (opts.abandonedMs ?? 60_000) / 1000;
    this.#maxWaiters = opts.maxWaiters ?? DEFAULT_MAX_WAITERS;
  }

  /** Requests of this process waiting for a twin's answer now (for tests and metrics). */
  get waiting(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }

  /**
   * Answers `req` with `work()`, once per Idempotency-Key: without the header it just runs
   * `work`; with it, the first request runs `work` and its successful answer is kept, and a
   * later one with the same key and body gets that answer again. `work` must not have sent
   * the reply (it returns the body, as a Fastify handler does).
   */
  async once<T>(req: FastifyRequest, reply: FastifyReply, owner: string, work: () => Promise<T>): Promise<unknown> {
    const key = req.headers[IDEMPOTENCY_HEADER];
    if (typeof key !== 'string') return work();
    const at = { owner, route: `${req.method} ${req.routeOptions.url ?? req.url}`, key };
    const hash = bodyHash(req.body);
    const found = (await this.#look(at, hash)) ?? (await this.#wait(at, hash));
    if ('refused' in found) return conflict(reply, found.refused);
    if ('claim' in found) return this.#answer({ at, claim: found.claim, reply, log: req.log }, work);
    reply.status(found.kept.status).header('idempotent-replayed', 'true');
    return found.kept.response;
  }

  /** Claims the key, or finds its kept answer, or (null) finds it in flight in another request. */
  async #look(at: KeyAt, hash: string): Promise<Found> {
    const claim = await this.#claim(at, hash);
    if (claim) return { claim };
    const row = await this.#stored(at);
    if (row && row.body_hash !== hash)
      throw new ValidationError(
        `headers.${IDEMPOTENCY_HEADER}: this key was already used with another request body in the last 24 hours; send a new key for a new request`,
      );
    if (row && row.status !== null) return { kept: { ...row, status: row.status } };
    // In flight in another request (or just gone, its request failed: the next look claims it).
    return null;
  }

  /** Waits for the twin in flight: its answer, the key to claim, or a refusal (the deadline, the waiter cap). */
  async #wait(at: KeyAt, hash: string): Promise<NonNullable<Found> | Refused> {
    const id = keyId(at);
    const waiters = this.#waiters.get(id) ?? new Set<Wakeup>();
    if (waiters.size >= this.#maxWaiters)
      return {
        refused: `${waiters.size} requests with this key are already waiting for its answer, the most that may wait for one key`,
      };
    const wake = new Wakeup();
    waiters.add(wake);
    this.#waiters.set(id, waiters);
    try {
      // Listening before the next look: an answer kept after it wakes the wait below.
      await this.#listen();
      const deadline = Date.now() + this.#waitMs;
      for (let delay = this.#pollMs; ; delay = Math.min(delay * 2, MAX_POLL_MS)) {
        const found = await this.#look(at, hash);
        if (found) return found;
        const left = deadline - Date.now();
        if (left <= 0) return { refused: 'a request with this key is still being answered' };
        await wake.wait(Math.min(delay, left), NO_ABORT);
      }
    } finally {
      waiters.delete(wake);
      if (waiters.size === 0 && this.#waiters.get(id) === waiters) this.#waiters.delete(id);
    }
  }

  #listen(): Promise<void> {
    this.#listening ??= this.#db
      .listen(IDEMPOTENCY_CHANNEL, (id) => {
        for (const wake of this.#waiters.get(id) ?? []) wake.fire();
      })
      .then(
        () => {},
        (err: unknown) => {
          // Retried by the next twin; this one fails (a 500), as a failed look would.
          this.#listening = undefined;
          throw err;
        },
      );
    return this.#listening;
  }

  async #answer<T>(
    { at, claim, reply, log }: { at: KeyAt; claim: string; reply: FastifyReply; log: FastifyBaseLogger },
    work: () => Promise<T>,
  ): Promise<T> {
    try {
      let body: T;
      try {
        body = await work();
      } catch (err) {
        // Not kept: the client may correct the request and send it again with the same key.
        await this.#release(at, claim);
        throw err;
      }
      try {
        if (reply.statusCode >= 200 && reply.statusCode < 300) await this.#keep(at, claim, reply.statusCode, body);
        else await this.#release(at, claim);
      } catch (err) {
        // The work is done (a task exists): its answer goes out. A twin request waits, then
        // gets 409s until the claim counts as abandoned (abandonedMs).
        log.error({ err, route: at.route }, 'could not keep the answer of an Idempotency-Key');
      }
      return body;
    } finally {
      // The twins look again now; a lost NOTIFY only leaves them to their backoff.
      await this.#db
        .notify(IDEMPOTENCY_CHANNEL, keyId(at))
        .catch((err: unknown) =>
          log.warn({ err, route: at.route }, 'could not notify the twins of an Idempotency-Key'),
        );
    }
  }

  /** Takes the key (new, expired, or abandoned by a request that never answered); the claim id, or null when another holds it. */
  async #claim(at: KeyAt, hash: string): Promise<string | null> {
    const rows = await this.#db.query<{ claim: string }>(
      `INSERT INTO idempotency_keys AS k (owner, route, key, body_hash, claim) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (owner, route, key) DO UPDATE
         SET body_hash = EXCLUDED.body_hash, claim = EXCLUDED.claim, status = NULL, response = NULL, created_at = now()
         WHERE k.created_at < now() - make_interval(secs => $6)
            OR (k.status IS NULL AND k.created_at < now() - make_interval(secs => $7))
       RETURNING claim`,
      [at.owner, at.route, at.key, hash, randomUUID(), this.#ttlSecs, this.#abandonedSecs],
    );
    return rows[0]?.claim ?? null;
  }

  async #stored(at: KeyAt): Promise<StoredRow | undefined> {
    const rows = await this.#db.query<StoredRow>(
      `SELECT body_hash, status, response FROM idempotency_keys
       WHERE owner = $1 AND route = $2 AND key = $3 AND created_at >= now() - make_interval(secs => $4)`,
      [at.owner, at.route, at.key, this.#ttlSecs],
    );
    return rows[0];
  }

  async #keep(at: KeyAt, claim: string, status: number, body: unknown): Promise<void> {
    await this.#db.query(
      `UPDATE idempotency_keys SET status = $5, response = $6
       WHERE owner = $1 AND route = $2 AND key = $3 AND claim = $4`,
      [at.owner, at.route, at.key, claim, status, JSON.stringify(body)],
    );
  }

  async #release(at: KeyAt, claim: string): Promise<void> {
    await this.#db.query(
      'DELETE FROM idempotency_keys WHERE owner = $1 AND route = $2 AND key = $3 AND claim = $4 AND status IS NULL',
      [at.owner, at.route, at.key, claim],
    );
  }
}

interface KeyAt {
  owner: string;
  route: string;
  key: string;
}

/** The key as a NOTIFY payload: fixed-size, and the key itself never travels. */
function keyId(at: KeyAt): string {
  return createHash('sha256')
    .update(JSON.stringify([at.owner, at.route, at.key]))
    .digest('hex');
}

/**
 * Deletes up to `limit` rows whose 24 h are over (expired rows are ignored already; this
 * keeps the table from growing with keys never sent again); how many it deleted. The
 * retention sweep calls it (issue #25). SKIP LOCKED: two sweeping processes take different
 * rows, and a row a request is claiming again is left to it.
 */
export async function purgeExpiredIdempotencyKeys(db: Queryable, limit: number): Promise<number> {
  const rows = await db.query<{ n: number }>(
    `WITH gone AS (
       DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1)
         AND (owner, route, key) IN (
           SELECT owner, route, key FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1)
           LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    [TTL_MS / 1000, limit],
  );
  return rows[0]?.n ?? 0;
}

// Sent as it is rather than through the task API's error mapper, which answers its 409s as
// 400s (lib/wire-errors.ts TASKS_STATUS): the draft's status tells a client to retry later.
function conflict(reply: FastifyReply, why: string): FastifyReply {
  return reply
    .status(409)
    .header('retry-after', '1')
    .send({ errors: [`headers.${IDEMPOTENCY_HEADER}: ${why}; send it again in a moment to get its answer`] });
}
