import { randomUUID } from 'node:crypto';
import type { Db } from '../db/index.ts';
import { NotFoundError, ValidationError } from '../lib/errors.ts';
import { isUuid } from '../lib/ids.ts';
import { paged } from '../lib/paging.ts';
import * as plans from './plans.ts';
import type { DeliveryLogRow, Page, WebhookFailure, WebhookInput, WebhookPatch, WebhookRow } from './types.ts';

/** last_failure as stored: times in ms, as Livepeer keeps them. */
interface StoredFailure {
  timestamp: number;
  statusCode?: number;
  error?: string;
  response?: string;
}

type StoredWebhook = Omit<WebhookRow, 'lastFailure'> & { lastFailure: StoredFailure | null };

function toWebhook(row: StoredWebhook): WebhookRow {
  const f = row.lastFailure;
  let lastFailure: WebhookFailure | null = null;
  if (f) {
    lastFailure = { timestamp: new Date(f.timestamp) };
    if (f.statusCode !== undefined) lastFailure.statusCode = f.statusCode;
    if (f.error !== undefined) lastFailure.error = f.error;
    if (f.response !== undefined) lastFailure.response = f.response;
  }
  return { ...row, lastFailure };
}

/** A cursor that is no id of ours ends the list (as for tasks) instead of failing the query. */
const badCursor = (page: Page): boolean => page.cursor !== undefined && !isUuid(page.cursor);

/**
 * An owner's webhooks and their delivery logs. Every method is owner-scoped: another
 * owner's webhook is "not found", as if it did not exist. The shared secret goes in and
 * never comes out: no method returns it (the dispatcher reads it to sign, and only that).
 */
export class WebhookStore {
  readonly #db: Db;
  readonly #maxPerOwner: number;

  /** `maxPerOwner`: webhooks an owner may have (MEDIAPLANE_MAX_WEBHOOKS_PER_OWNER, default 20). */
  constructor(db: Db, opts: { maxPerOwner?: number | undefined } = {}) {
    this.#db = db;
    this.#maxPerOwner = opts.maxPerOwner ?? 20;
  }

  /**
   * Adds a webhook, while the owner has fewer than `maxPerOwner` (issue #25: every event goes
   * to each of an owner's webhooks, so their number is one task's fan-out). A 422, not a 429:
   * waiting does not lift it (the livepeer SDK retries a 429 when retries are on), deleting
   * a webhook does.
   */
  async create(owner: string, projectId: string, input: WebhookInput): Promise<WebhookRow> {
    const rows = await this.#db.query<StoredWebhook>(plans.createWebhook, [
      randomUUID(),
      owner,
      projectId,
      input.name,
      input.url,
      input.events,
      input.sharedSecret ?? null,
      this.#maxPerOwner,
    ]);
    const row = rows[0];
    if (!row)
      throw new ValidationError(
        `an owner may have at most ${this.#maxPerOwner} webhooks; delete one before creating another`,
      );
    return toWebhook(row);
  }

  /** Newest first; `next` is the cursor of the following page, when there is one. */
  async list(owner: string, page: Page): Promise<{ webhooks: WebhookRow[]; next: string | null }> {
    if (badCursor(page)) return { webhooks: [], next: null };
    const rows = await this.#db.query<StoredWebhook>(plans.listWebhooks, [owner, page.cursor ?? null, page.limit + 1]);
    const { items, next } = paged(rows, page.limit);
    return { webhooks: items.map(toWebhook), next };
  }

  async get(owner: string, id: string): Promise<WebhookRow> {
    if (!isUuid(id)) throw new NotFoundError();
    return toWebhook(one(await this.#db.query<StoredWebhook>(plans.getWebhook, [id, owner])));
  }

  /** Replaces name, URL, events and secret, as Livepeer's PUT does: a secret left out is removed. */
  async update(owner: string, id: string, input: WebhookInput): Promise<WebhookRow> {
    if (!isUuid(id)) throw new NotFoundError();
    const rows = await this.#db.query<StoredWebhook>(plans.updateWebhook, [
      id,
      owner,
      input.name,
      input.url,
      input.events,
      input.sharedSecret ?? null,
    ]);
    return toWebhook(one(rows));
  }

  /** Changes the fields `patch` gives, and only those: a secret left out stays, a secret of null is removed. */
  async patch(owner: string, id: string, patch: WebhookPatch): Promise<WebhookRow> {
    if (!isUuid(id)) throw new NotFoundError();
    const rows = await this.#db.query<StoredWebhook>(plans.patchWebhook, [
      id,
      owner,
      patch.name ?? null,
      patch.url ?? null,
      patch.events ?? null,
      patch.sharedSecret !== undefined,
      patch.sharedSecret ?? null,
    ]);
    return toWebhook(one(rows));
  }

  /** Deletes the webhook (its logs stay readable to no one); deliveries not yet made are given up. */
  async delete(owner: string, id: string): Promise<WebhookRow> {
    if (!isUuid(id)) throw new NotFoundError();
    return toWebhook(one(await this.#db.query<StoredWebhook>(plans.deleteWebhook, [id, owner])));
  }

  /** The webhook's attempts, newest first. */
  async logs(owner: string, webhookId: string, page: Page): Promise<{ logs: DeliveryLogRow[]; next: string | null }> {
    await this.get(owner, webhookId);
    if (badCursor(page)) return { logs: [], next: null };
    const rows = await this.#db.query<DeliveryLogRow>(plans.listLogs, [webhookId, page.cursor ?? null, page.limit + 1]);
    const { items, next } = paged(rows, page.limit);
    return { logs: items, next };
  }

  async log(owner: string, webhookId: string, logId: string): Promise<DeliveryLogRow> {
    await this.get(owner, webhookId);
    if (!isUuid(logId)) throw new NotFoundError();
    return one(await this.#db.query<DeliveryLogRow>(plans.getLog, [logId, webhookId]));
  }
}

function one<T>(rows: T[]): T {
  const row = rows[0];
  if (!row) throw new NotFoundError();
  return row;
}

// Retention (issue #25): what the sweep (main.ts) calls to delete old webhook history, a
// batch at a time; each answers how many rows it deleted. Logs first, then the deliveries no
// log names any more, so a delivery goes with the last of its logs.

/** Deletes up to `limit` delivery log rows older than `olderThanMs`. */
export async function purgeWebhookLogs(
  db: Pick<Db, 'query'>,
  o: { olderThanMs: number; limit: number },
): Promise<number> {
  return (await db.query<{ n: number }>(plans.purgeLogs, [o.olderThanMs, o.limit]))[0]?.n ?? 0;
}

/** Deletes up to `limit` deliveries made or given up more than `olderThanMs` ago whose logs are gone. */
export async function purgeWebhookDeliveries(
  db: Pick<Db, 'query'>,
  o: { olderThanMs: number; limit: number },
): Promise<number> {
  return (await db.query<{ n: number }>(plans.purgeDeliveries, [o.olderThanMs, o.limit]))[0]?.n ?? 0;
}
