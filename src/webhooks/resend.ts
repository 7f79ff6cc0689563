import type { Db } from '../db/index.ts';
import { InvalidStateError, NotFoundError } from '../lib/errors.ts';
import { isUuid } from '../lib/ids.ts';
import { type Attempts, verdictOf } from './attempt.ts';
import { type DeliverySlots, OwnerRate, ResendLimitError } from './limits.ts';
import type { WebhookMetrics } from './metrics.ts';
import * as plans from './plans.ts';
import type { DeliveryLogRow, WebhookEvent } from './types.ts';

// An owner's resend of a logged attempt (issue #18). Livepeer's resend answers the new attempt
// (cannon.ts resendWebhook), so it is sent at once rather than queued, but in one of the
// dispatcher's delivery slots and at the owner's resend rate (issue #25: 60 parallel resends
// were 60 POSTs held open at the receiver). Either limit is a 429. Not retried.

export interface ResendsOptions {
  db: Db;
  attempts: Attempts;
  /** The dispatcher's slots; a resend waits for one at most `timeoutMs`, the longest an attempt holds one. */
  slots: DeliverySlots;
  /** Gives the slot back (the dispatcher's, so that a pass may claim with it). */
  release: (owner: string) => void;
  timeoutMs: number;
  /** Resends an owner may make per minute, at once or spread; more are a 429. */
  perMinute: number;
  metrics: WebhookMetrics;
  /** The dispatcher's shutdown signal as it is now: stop() abandons a resend in flight too. */
  shutdown: () => AbortSignal;
}

/** What the log of the attempt to resend gives. */
interface Source {
  deliveryId: string | null;
  eventId: string;
  event: WebhookEvent;
  requestBody: string;
  url: string;
  sharedSecret: string | null;
}

export class Resends {
  readonly #o: ResendsOptions;
  readonly #rate: OwnerRate;

  constructor(opts: ResendsOptions) {
    this.#o = opts;
    this.#rate = new OwnerRate(opts.perMinute);
  }

  /** Sends the event of log `logId` to its webhook again, now; the new attempt. */
  async resend(o: { owner: string; webhookId: string; logId: string }): Promise<DeliveryLogRow> {
    if (!isUuid(o.webhookId) || !isUuid(o.logId)) throw new NotFoundError();
    const rate = this.#rate.take(o.owner);
    if (!rate.ok)
      throw new ResendLimitError(
        `too many resends: an owner may resend ${this.#o.perMinute} deliveries a minute`,
        rate.retryAfterMs,
      );
    const src = (await this.#o.db.query<Source>(plans.resendSource, [o.logId, o.webhookId, o.owner]))[0];
    if (!src) throw new NotFoundError();
    // Livepeer resends the logged request with a new timestamp (cannon.ts resendWebhook):
    // the receiver gets the event as it was, with the same id.
    let envelope: Record<string, unknown>;
    try {
      envelope = JSON.parse(src.requestBody) as Record<string, unknown>;
    } catch {
      throw new InvalidStateError('this attempt sent no event to resend');
    }
    await this.#o.slots.acquire(o.owner, this.#o.timeoutMs);
    try {
      return await this.#send({ ...src, webhookId: o.webhookId, envelope });
    } finally {
      this.#o.release(o.owner);
    }
  }

  async #send(src: Source & { webhookId: string; envelope: Record<string, unknown> }): Promise<DeliveryLogRow> {
    const { envelope } = src;
    const timestamp = Date.now();
    const body = JSON.stringify({ ...envelope, timestamp });
    const to = { url: src.url, body, secret: src.sharedSecret, timestamp };
    const result = await this.#o.attempts.post(to, this.#o.shutdown());
    const verdict = verdictOf(result) === 'delivered' ? 'delivered' : 'failed';
    const createdAt = typeof envelope.createdAt === 'number' ? new Date(envelope.createdAt) : new Date();
    const log = await this.#o.attempts.record({
      delivery: { id: src.deliveryId, claim: null },
      webhookId: src.webhookId,
      eventId: src.eventId,
      event: src.event,
      eventCreatedAt: createdAt,
      url: src.url,
      body,
      result,
      verdict,
      delayMs: 0,
    });
    this.#o.metrics.outcome(verdict);
    return log.row;
  }
}
