import type { Registry as MetricsRegistry } from 'prom-client';
import type { Db } from '../db/index.ts';
import type { Logger } from '../lib/log.ts';
import type { Resolve } from '../lib/net-guard.ts';
import { PollLoop } from '../lib/poll-loop.ts';
import { TASK_EVENTS_CHANNEL, type TaskEventRow } from '../tasks/index.ts';
import { Attempts, notSent, retryDelay, verdictOf } from './attempt.ts';
import { DeliverySlots } from './limits.ts';
import { noMetrics, webhookMetrics, type WebhookMetrics } from './metrics.ts';
import * as plans from './plans.ts';
import { Resends } from './resend.ts';
import type { DeliveryLogRow } from './types.ts';

// Delivery that loses nothing (issue #18): the outbox (task_events) is fanned out into one
// delivery per subscribed webhook in one statement, and deliveries are claimed with a lease
// (FOR UPDATE SKIP LOCKED), so any number of processes share the work, each attempt goes
// out from one of them, and a process killed mid-send leaves its lease to run out for
// another to take over: at least once, the event id letting receivers drop duplicates.
// A poll loop that knows no SQL (plans.ts has it), woken at once by NOTIFY (lib/poll-loop.ts);
// one attempt is sent and recorded by attempt.ts, an owner's resend by resend.ts.
//
// One owner cannot stall the others (issue #25): the process's slots are shared fairly
// between the owners with work (limits.ts fairShare), claims take owners in turns, a webhook
// that keeps timing out gets one delivery in flight at most, and resends take the same slots
// at a per-owner rate.

/** NOTIFY channel of new deliveries, so the other processes sharing the database wake to help. */
export const DELIVERIES_CHANNEL = 'mediaplane_webhook_deliveries';

export interface WebhookDispatcherOptions {
  db: Db;
  log: Logger;
  /** The process's registry (GET /metrics); without one, nothing is measured. */
  metrics?: MetricsRegistry | undefined;
  /** The envelope's `payload` for an event (main.ts: `{task: <the task as the API shows it>}`). */
  render: (event: TaskEventRow) => Record<string, unknown>;
  /** Let webhook URLs reach loopback and private addresses (MEDIAPLANE_ALLOW_PRIVATE_URLS). */
  allowPrivateUrls: boolean;
  /** How host names are resolved (a seam for DNS-rebinding tests); the system resolver by default. */
  resolve?: Resolve | undefined;
  /** One attempt's limit: connect, send, answer (default 10 s). */
  timeoutMs?: number;
  /** A claim's lease is the timeout plus this, the time to write the outcome (default 5 s). */
  leaseMarginMs?: number;
  /** Failing deliveries are retried while their event is younger than this (default a day). */
  maxAgeMs?: number;
  /** Delay before the second attempt, doubling with each further one (default 1 s), ... */
  retryMs?: number;
  /** ... up to this (default 1 h). */
  retryMaxMs?: number;
  /** How often an idle dispatcher looks for work (default 1 s). */
  pollMs?: number;
  /** Deliveries in flight at once, resends included (default 16). */
  concurrency?: number;
  /** Resends an owner may make per minute, at once or spread (default 30); more are a 429. */
  resendsPerMinute?: number;
  /** Events fanned out per statement (default 100). */
  batchSize?: number;
  /** Least time between two passes (default 50 ms): wake-ups that come sooner join the next pass. */
  passGapMs?: number;
  /** On stop, how long sends in flight may finish before they are abandoned (default 5 s). */
  stopGraceMs?: number;
}

const DEFAULTS = {
  timeoutMs: 10_000,
  leaseMarginMs: 5000,
  maxAgeMs: 86_400_000,
  retryMs: 1000,
  retryMaxMs: 3_600_000,
  pollMs: 1000,
  concurrency: 16,
  resendsPerMinute: 30,
  batchSize: 100,
  passGapMs: 50,
  stopGraceMs: 5000,
};

/** A claimed delivery with what its send needs. */
interface Claimed {
  id: string;
  attempts: number;
  webhookId: string;
  url: string;
  sharedSecret: string | null;
  webhookDeleted: boolean;
  eventId: string;
  task_id: string;
  owner: string;
  event: TaskEventRow['event'];
  task: TaskEventRow['task'];
  created_at: Date;
}

export class WebhookDispatcher {
  readonly #o: Required<Omit<WebhookDispatcherOptions, 'metrics' | 'resolve'>>;
  readonly #metrics: WebhookMetrics;
  readonly #attempts: Attempts;
  readonly #resends: Resends;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #slots: DeliverySlots;
  readonly #poll: PollLoop;
  #shutdown = new AbortController();
  #started = false;
  /**
   * The last claim took every free slot, or left due deliveries of owners at their share:
   * more may be claimed when a slot frees up.
   */
  #saturated = false;
  #unlisten: Array<() => Promise<void>> = [];

  constructor(opts: WebhookDispatcherOptions) {
    const { metrics, resolve, ...rest } = opts;
    this.#o = { ...DEFAULTS, ...definedOnly(rest) };
    const o = this.#o;
    this.#slots = new DeliverySlots(o.concurrency);
    this.#metrics = metrics
      ? webhookMetrics(metrics, async () => (await o.db.query<{ n: number }>(plans.pendingCount))[0]?.n ?? 0)
      : noMetrics;
    this.#attempts = new Attempts({ ...o, resolve });
    this.#resends = new Resends({
      ...o,
      attempts: this.#attempts,
      slots: this.#slots,
      release: (owner) => this.#released(owner),
      perMinute: o.resendsPerMinute,
      metrics: this.#metrics,
      shutdown: () => this.#shutdown.signal,
    });
    // Every task change NOTIFYs, and a pass costs about 2.6 ms of the database even with
    // nothing to send (the fan-out and the claim, on the embedded database): woken once per
    // change, an API process on two vCPUs served half the POST /api/transcode it serves with
    // the dispatcher held back (bench/README.md, API). So passes are `passGapMs` apart: the
    // changes that come within the gap are fanned out by one pass; a delivery waits at most
    // the gap more.
    this.#poll = new PollLoop({
      pass: () => this.#pass(),
      pollMs: o.pollMs,
      gapMs: o.passGapMs,
      onError: (err) => o.log.error({ err }, 'webhook dispatch failed; trying again'),
    });
  }

  /** Starts delivering in the background. */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.#shutdown = new AbortController();
    this.#poll.start(() => this.#subscribe());
  }

  /**
   * Stops claiming, lets sends in flight finish for up to `stopGraceMs`, then abandons the
   * rest: they are recorded as attempts without an answer and due again at once, for this
   * process after a restart or any other process now.
   */
  async stop(): Promise<void> {
    if (!this.#started) return;
    await this.#poll.stop();
    const timer = setTimeout(() => this.#shutdown.abort(), this.#o.stopGraceMs);
    await Promise.allSettled([...this.#inFlight]);
    clearTimeout(timer);
    for (const u of this.#unlisten.splice(0)) await u().catch(() => {});
    this.#attempts.close();
    this.#started = false;
  }

  /**
   * Sends the event of log `logId` to its webhook again, now; the new attempt (resend.ts:
   * in one of the delivery slots, at the owner's resend rate). Not retried.
   */
  resend(owner: string, webhookId: string, logId: string): Promise<DeliveryLogRow> {
    return this.#resends.resend({ owner, webhookId, logId });
  }

  async #subscribe(): Promise<void> {
    for (const channel of [TASK_EVENTS_CHANNEL, DELIVERIES_CHANNEL]) {
      try {
        this.#unlisten.push(await this.#o.db.listen(channel, this.#poll.wake));
      } catch (err) {
        this.#o.log.warn({ err, channel }, 'could not listen for webhook work; polling only');
      }
    }
  }

  /** Fans out every undispatched event, then claims as many due deliveries as there are free slots. */
  async #pass(): Promise<void> {
    let added = 0;
    for (;;) {
      const r = (await this.#o.db.query<{ events: number; deliveries: number }>(plans.fanOut, [this.#o.batchSize]))[0];
      added += r?.deliveries ?? 0;
      if (!r || r.events < this.#o.batchSize || this.#poll.stopping) break;
    }
    // Other processes sharing a server help with them; the embedded database has no others.
    if (added > 0 && this.#o.db.kind === 'postgres')
      await this.#o.db.notify(DELIVERIES_CHANNEL, '').catch((err: unknown) => {
        this.#o.log.warn({ err }, 'could not notify other processes of new webhook deliveries');
      });
    if (this.#poll.stopping) return;
    const free = this.#slots.claimable;
    this.#saturated = free <= 0;
    if (free <= 0) return;
    const { claimed, due } = await this.#claim(free);
    this.#saturated = claimed.length >= free || due > 0;
    for (const c of claimed) {
      this.#slots.take(c.owner);
      const sending: Promise<void> = this.#deliver(c)
        .catch((err: unknown) =>
          // The outcome could not be written: the lease runs out and the delivery is sent again.
          this.#o.log.error(
            { err, webhookId: c.webhookId, eventId: c.eventId },
            'could not record a webhook delivery; it will be sent again',
          ),
        )
        .finally(() => {
          this.#inFlight.delete(sending);
          this.#released(c.owner);
        });
      this.#inFlight.add(sending);
    }
  }

  /**
   * Claims up to `free` due deliveries, each owner's at most up to its fair share of the
   * slots (what it holds counted), owners taking turns (issue #25). The owners with work are
   * asked first: a share depends on how many there are.
   */
  async #claim(free: number): Promise<{ claimed: Claimed[]; due: number }> {
    const due = (await this.#o.db.query<{ owner: string }>(plans.dueOwners, [this.#o.concurrency])).map((r) => r.owner);
    this.#slots.setDue(due);
    const share = this.#slots.share(due);
    const allowed = due.map((owner) => Math.max(0, share - this.#slots.held(owner)));
    if (!allowed.some((n) => n > 0)) return { claimed: [], due: due.length };
    const claimed = await this.#o.db.query<Claimed>(plans.claimDeliveries, [
      free,
      this.#o.timeoutMs + this.#o.leaseMarginMs,
      due,
      allowed,
    ]);
    return { claimed, due: due.length };
  }

  /** A slot came free: a waiting resend takes it first, else the next pass may claim. */
  #released(owner: string): void {
    this.#slots.release(owner);
    if (this.#saturated) this.#poll.wake();
  }

  async #deliver(c: Claimed): Promise<void> {
    if (c.webhookDeleted) {
      await this.#o.db.query(plans.dropDelivery, [c.id, c.attempts]);
      return;
    }
    const event: TaskEventRow = {
      id: c.eventId,
      task_id: c.task_id,
      owner: c.owner,
      event: c.event,
      task: c.task,
      created_at: c.created_at,
    };
    const timestamp = Date.now();
    let body: string;
    try {
      body = JSON.stringify({
        id: c.eventId,
        webhookId: c.webhookId,
        createdAt: c.created_at.getTime(),
        timestamp,
        event: c.event,
        payload: this.#o.render(event),
      });
    } catch (err) {
      // A bug of ours, not the receiver's: recorded as a failed attempt, never sent.
      this.#o.log.error({ err, eventId: c.eventId }, 'could not build the webhook payload');
      body = '';
    }
    const result = body
      ? await this.#attempts.post({ url: c.url, body, secret: c.sharedSecret, timestamp }, this.#shutdown.signal)
      : notSent('could not build the payload of this event');
    const verdict = body ? verdictOf(result) : 'failed';
    const { row, deliveryStatus } = await this.#attempts.record({
      delivery: { id: c.id, claim: c.attempts },
      webhookId: c.webhookId,
      eventId: c.eventId,
      event: c.event,
      eventCreatedAt: c.created_at,
      url: c.url,
      body,
      result,
      verdict,
      delayMs: result.aborted ? 0 : retryDelay(c.attempts, this.#o),
    });
    this.#count(c, row, deliveryStatus);
  }

  #count(c: Claimed, row: DeliveryLogRow, status: string | null): void {
    const at = { webhookId: c.webhookId, eventId: c.eventId, attempt: c.attempts };
    if (status === 'delivered') {
      this.#metrics.outcome('delivered');
      this.#metrics.delivered((Date.now() - c.created_at.getTime()) / 1000);
      this.#o.log.debug(at, 'webhook delivered');
      return;
    }
    const why = { ...at, statusCode: row.statusCode, error: row.error };
    if (status === 'pending') {
      this.#metrics.outcome('retried');
      this.#o.log.info(why, 'webhook delivery failed; it will be tried again');
    } else if (status === 'failed') {
      this.#metrics.outcome('failed');
      this.#o.log.warn(why, 'webhook delivery failed for good');
    }
    // null: the claim was lost meanwhile (its lease ran out); the attempt is logged all the same.
  }
}

/** Options without the keys given as undefined, so they do not hide the defaults. */
function definedOnly<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
