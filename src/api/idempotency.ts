import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Type } from '@sinclair/typebox';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { Queryable } from '../db/index.ts';
import { ValidationError } from '../lib/errors.ts';
import { ERROR_MESSAGE } from '../lib/schema-errors.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';

// Idempotent creation (issue #18, spec/API.md section A): a client that sends
// `Idempotency-Key` on POST /api/transcode or POST /api/webhook may send the request again
// (a timeout, a dropped connection) and get the first answer back instead of a second task.
// Semantics follow the IETF draft "The Idempotency-Key HTTP Header Field"
// (draft-ietf-httpapi-idempotency-key-header): the same key with another body is a 422, a
// request whose twin is still in flight is a 409. Keys are per owner and per route and live
// 24 h. All SQL of the table is here (migration 004_idempotency_keys.sql).

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
        'Makes the request safe to send again: the same key and body within 24 hours answer the first response again (the same id, nothing created twice; the answer carries Idempotent-Replayed: true); the same key with another body is a 422; while the first request with the key is still being answered, a second waits for its answer, or gets a 409 after 10 s. Only successful answers are kept: after a 4xx the key may be sent again with a corrected body.',
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
  /** How often it looks while waiting (25 ms). */
  pollMs?: number;
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

const PURGE_EVERY = 256;
const PURGE_BATCH = 1000;

/** The Idempotency-Key store: claims a key before the work, keeps the answer after it. */
export class IdempotencyKeys {
  readonly #db: Queryable;
  readonly #ttlSecs: number;
  readonly #waitMs: number;
  readonly #pollMs: number;
  readonly #abandonedSecs: number;
  #claims = 0;

  constructor(db: Queryable, opts: IdempotencyOptions = {}) {
    this.#db = db;
    this.#ttlSecs = (opts.ttlMs ?? 24 * 3600_000) / 1000;
    this.#waitMs = opts.waitMs ?? 10_000;
    this.#pollMs = opts.pollMs ?? 25;
    this.#abandonedSecs = (opts.abandonedMs ?? 60_000) / 1000;
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
    const deadline = Date.now() + this.#waitMs;
    for (;;) {
      const claim = await this.#claim(at, hash);
      if (claim) return this.#answer({ at, claim, reply, log: req.log }, work);
      const row = await this.#stored(at);
      if (row && row.body_hash !== hash)
        throw new ValidationError(
          `headers.${IDEMPOTENCY_HEADER}: this key was already used with another request body in the last 24 hours; send a new key for a new request`,
        );
      if (row && row.status !== null) {
        reply.status(row.status).header('idempotent-replayed', 'true');
        return row.response;
      }
      // In flight in another request (or gone, its request failed): look again, then claim.
      if (Date.now() >= deadline) return conflict(reply);
      await sleep(this.#pollMs);
    }
  }

  async #answer<T>(
    { at, claim, reply, log }: { at: KeyAt; claim: string; reply: FastifyReply; log: FastifyBaseLogger },
    work: () => Promise<T>,
  ): Promise<T> {
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
  }

  /** Takes the key (new, expired, or abandoned by a request that never answered); the claim id, or null when another holds it. */
  async #claim(at: KeyAt, hash: string): Promise<string | null> {
    if (++this.#claims % PURGE_EVERY === 0) await this.#purge();
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

  /** Expired rows are ignored already; this keeps the table from growing with keys never sent again. */
  async #purge(): Promise<void> {
    await this.#db.query(
      `DELETE FROM idempotency_keys WHERE ctid IN (
         SELECT ctid FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)`,
      [this.#ttlSecs, PURGE_BATCH],
    );
  }
}

interface KeyAt {
  owner: string;
  route: string;
  key: string;
}

// Sent as it is rather than through the task API's error mapper, which answers its 409s as
// 400s (lib/wire-errors.ts TASKS_STATUS): the draft's status tells a client to retry later.
function conflict(reply: FastifyReply): FastifyReply {
  return reply
    .status(409)
    .header('retry-after', '1')
    .send({
      errors: [
        `headers.${IDEMPOTENCY_HEADER}: a request with this key is still being answered; send it again in a moment to get its answer`,
      ],
    });
}
