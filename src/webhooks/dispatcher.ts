import { randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { Registry as MetricsRegistry } from 'prom-client';
import type { Db } from '../db/index.ts';
import { InvalidStateError, NotFoundError } from '../lib/errors.ts';
import type { Logger } from '../lib/log.ts';
import type { Resolve } from '../lib/net-guard.ts';
import { TASK_EVENTS_CHANNEL, type TaskEventRow } from '../tasks/index.ts';
import { DeliverySlots, OwnerRate, ResendLimitError } from './limits.ts';
import { noMetrics, webhookMetrics, type WebhookMetrics } from './metrics.ts';
import * as plans from './plans.ts';
import { type PostResult, postWebhook } from './send.ts';
import { signatureHeaders } from './sign.ts';
import type { DeliveryLogRow, WebhookEvent } from './types.ts';

// Delivery that loses nothing (issue #18): the outbox (task_events) is fanned out into one
// delivery per subscribed webhook in one statement, and deliveries are claimed with a lease
// (FOR UPDATE SKIP LOCKED), so any number of processes share the work, each attempt goes
// out from one of them, and a process killed mid-send leaves its lease to run out for
// another to take over: at least once, the event id letting receivers drop duplicates.
// A poll loop that knows no SQL (plans.ts has it), woken at once by NOTIFY.
//
// One owner cannot stall the others (issue #25): the process's slots are shared fairly
// between the owners with work (limits.ts fairShare), claims take owners in turns, a webhook
// that keeps timing out gets one delivery in flight at most, and resends take the same slots
// at a per-owner rate.

/** NOTIFY channel of new deliveries, so the other processes sharing the database wake to help. */
export const DELIVERIES_CHANNEL = 'mediaplane_webhook_deliveries';

export const USER_AGENT = 'mediaplane-webhooks';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

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

type Verdict = 'delivered' | 'retry' | 'failed';

/** 2xx delivers; a network error, a timeout, 5xx, 408 and 429 are worth another try; the rest is final. */
export function verdictOf(r: Pick<PostResult, 'statusCode' | 'permanent'>): Verdict {
  const s = r.statusCode;
  if (s === null) return r.permanent ? 'failed' : 'retry';
  if (s >= 200 && s < 300) return 'delivered';
  if (s === 408 || s === 429 || s >= 500) return 'retry';
  return 'failed';
}

/**
 * The delay after attempt `attempt` (1 = the first) failed: `retryMs` doubling, capped at
 * `retryMaxMs`, and jittered to between half and all of it, so the retries of many
 * deliveries to one receiver that came back up do not all arrive at the same instant.
 */
export function retryDelay(
  attempt: number,
  o: { retryMs: number; retryMaxMs: number },
  random: () => number = Math.random,
): number {
  const full = Math.min(o.retryMaxMs, o.retryMs * 2 ** Math.min(attempt - 1, 40));
  return Math.round(full / 2 + (random() * full) / 2);
}

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

/** One attempt to record (plans.recordAttempt). */
interface Attempt {
  /** The claimed delivery and the claim's number; a resend names the delivery but no claim. */
  delivery: { id: string | null; claim: number | null };
  webhookId: string;
  eventId: string;
  event: WebhookEvent;
  eventCreatedAt: Date;
  url: string;
  body: string;
  headers: Record<string, string>;
  result: PostResult;
  verdict: Verdict;
  delayMs: number;
}

export class WebhookDispatcher {
  readonly #o: Required<Omit<WebhookDispatcherOptions, 'metrics' | 'resolve'>> & { resolve?: Resolve | undefined };
  readonly #metrics: WebhookMetrics;
  readonly #agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  readonly #inFlight = new Set<Promise<void>>();
  readonly #slots: DeliverySlots;
  readonly #resendRate: OwnerRate;
  #shutdown = new AbortController();
  #loop: Promise<void> | undefined;
  #stopping = false;
  /** Ends the current wait; a wake-up that comes while a pass is busy skips the next wait. */
  #sleeper: (() => void) | undefined;
  #wakeRequested = false;
  /**
   * The last claim took every free slot, or left due deliveries of owners at their share:
   * more may be claimed when a slot frees up.
   */
  #saturated = false;
  #unlisten: Array<() => Promise<void>> = [];
  #lastPassAt = -Infinity;

  constructor(opts: WebhookDispatcherOptions) {
    const { metrics, ...rest } = opts;
    this.#o = {
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
      ...definedOnly(rest),
    };
    this.#slots = new DeliverySlots(this.#o.concurrency);
    this.#resendRate = new OwnerRate(this.#o.resendsPerMinute);
    this.#metrics = metrics
      ? webhookMetrics(metrics, async () => (await opts.db.query<{ n: number }>(plans.pendingCount))[0]?.n ?? 0)
      : noMetrics;
  }

  /** Starts delivering in the background. */
  start(): void {
    if (this.#loop) return;
    this.#stopping = false;
    this.#shutdown = new AbortController();
    this.#loop = this.#run();
  }

  /**
   * Stops claiming, lets sends in flight finish for up to `stopGraceMs`, then abandons the
   * rest: they are recorded as attempts without an answer and due again at once, for this
   * process after a restart or any other process now.
   */
  async stop(): Promise<void> {
    if (!this.#loop) return;
    this.#stopping = true;
    this.#wake();
    await this.#loop;
    const timer = setTimeout(() => this.#shutdown.abort(), this.#o.stopGraceMs);
    await Promise.allSettled([...this.#inFlight]);
    clearTimeout(timer);
    for (const u of this.#unlisten.splice(0)) await u().catch(() => {});
    this.#agents.http.destroy();
    this.#agents.https.destroy();
    this.#loop = undefined;
  }

  /**
   * Sends the event of log `logId` to its webhook again, now; the new attempt. Not retried.
   * Livepeer's resend answers the new attempt (cannon.ts resendWebhook), so it is sent here
   * rather than queued, but in one of the delivery slots (waiting for one at most the
   * timeout, the longest an attempt holds one) and at the owner's resend rate (issue #25:
   * 60 parallel resends were 60 POSTs held open at the receiver). Either limit is a 429.
   */
  async resend(owner: string, webhookId: string, logId: string): Promise<DeliveryLogRow> {
    if (!UUID_RE.test(webhookId) || !UUID_RE.test(logId)) throw new NotFoundError();
    const rate = this.#resendRate.take(owner);
    if (!rate.ok)
      throw new ResendLimitError(
        `too many resends: an owner may resend ${this.#o.resendsPerMinute} deliveries a minute`,
        rate.retryAfterMs,
      );
    const src = (
      await this.#o.db.query<{
        deliveryId: string | null;
        eventId: string;
        event: WebhookEvent;
        requestBody: string;
        url: string;
        sharedSecret: string | null;
      }>(plans.resendSource, [logId, webhookId, owner])
    )[0];
    if (!src) throw new NotFoundError();
    // Livepeer resends the logged request with a new timestamp (cannon.ts resendWebhook):
    // the receiver gets the event as it was, with the same id.
    let envelope: Record<string, unknown>;
    try {
      envelope = JSON.parse(src.requestBody) as Record<string, unknown>;
    } catch {
      throw new InvalidStateError('this attempt sent no event to resend');
    }
    await this.#slots.acquire(owner, this.#o.timeoutMs);
    try {
      return await this.#resendNow({ ...src, webhookId, envelope });
    } finally {
      this.#released(owner);
    }
  }

  async #resendNow(src: {
    deliveryId: string | null;
    webhookId: string;
    eventId: string;
    event: WebhookEvent;
    url: string;
    sharedSecret: string | null;
    envelope: Record<string, unknown>;
  }): Promise<DeliveryLogRow> {
    const { envelope, webhookId } = src;
    const timestamp = Date.now();
    const body = JSON.stringify({ ...envelope, timestamp });
    const result = await this.#post(src.url, body, src.sharedSecret, timestamp);
    const verdict = verdictOf(result) === 'delivered' ? 'delivered' : 'failed';
    const createdAt = typeof envelope.createdAt === 'number' ? new Date(envelope.createdAt) : new Date();
    const log = await this.#record({
      delivery: { id: src.deliveryId, claim: null },
      webhookId,
      eventId: src.eventId,
      event: src.event,
      eventCreatedAt: createdAt,
      url: src.url,
      body,
      headers: result.sentHeaders,
      result,
      verdict,
      delayMs: 0,
    });
    this.#metrics.outcome(verdict === 'delivered' ? 'delivered' : 'failed');
    return log.row;
  }

  async #run(): Promise<void> {
    await this.#subscribe();
    while (!this.#stopping) {
      await this.#spaced();
      if (this.#stopping) break;
      this.#wakeRequested = false;
      this.#lastPassAt = performance.now();
      try {
        await this.#pass();
      } catch (err) {
        this.#o.log.error({ err }, 'webhook dispatch failed; trying again');
      }
      if (this.#wakeRequested || this.#stopping) continue;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, this.#o.pollMs);
        this.#sleeper = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.#sleeper = undefined;
    }
  }

  /**
   * Waits until `passGapMs` after the last pass began. Every task change NOTIFYs, and a pass
   * costs about 2.6 ms of the database even with nothing to send (the fan-out and the claim,
   * on the embedded database): woken once per change, an API process on two vCPUs served
   * half the POST /api/transcode it serves with the dispatcher held back (bench/README.md,
   * API). Changes that come within the gap are fanned out by one pass; a delivery waits at
   * most the gap more.
   */
  async #spaced(): Promise<void> {
    const wait = this.#lastPassAt + this.#o.passGapMs - performance.now();
    if (wait <= 0) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, wait);
      this.#sleeper = () => {
        if (!this.#stopping) return; // a wake-up joins the coming pass; only stop cuts the gap
        clearTimeout(t);
        resolve();
      };
    });
    this.#sleeper = undefined;
  }

  async #subscribe(): Promise<void> {
    for (const channel of [TASK_EVENTS_CHANNEL, DELIVERIES_CHANNEL]) {
      try {
        this.#unlisten.push(await this.#o.db.listen(channel, () => this.#wake()));
      } catch (err) {
        this.#o.log.warn({ err, channel }, 'could not listen for webhook work; polling only');
      }
    }
  }

  #wake(): void {
    this.#wakeRequested = true;
    this.#sleeper?.();
  }

  /** Fans out every undispatched event, then claims as many due deliveries as there are free slots. */
  async #pass(): Promise<void> {
    let added = 0;
    for (;;) {
      const r = (await this.#o.db.query<{ events: number; deliveries: number }>(plans.fanOut, [this.#o.batchSize]))[0];
      added += r?.deliveries ?? 0;
      if (!r || r.events < this.#o.batchSize || this.#stopping) break;
    }
    // Other processes sharing a server help with them; the embedded database has no others.
    if (added > 0 && this.#o.db.kind === 'postgres')
      await this.#o.db.notify(DELIVERIES_CHANNEL, '').catch((err: unknown) => {
        this.#o.log.warn({ err }, 'could not notify other processes of new webhook deliveries');
      });
    if (this.#stopping) return;
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
    if (this.#saturated) this.#wake();
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
      ? await this.#post(c.url, body, c.sharedSecret, timestamp)
      : { ...noAnswer('could not build the payload of this event'), sentHeaders: {} };
    const verdict = body ? verdictOf(result) : 'failed';
    const { row, deliveryStatus } = await this.#record({
      delivery: { id: c.id, claim: c.attempts },
      webhookId: c.webhookId,
      eventId: c.eventId,
      event: c.event,
      eventCreatedAt: c.created_at,
      url: c.url,
      body,
      headers: result.sentHeaders,
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

  async #post(
    url: string,
    body: string,
    secret: string | null,
    timestamp: number,
  ): Promise<PostResult & { sentHeaders: Record<string, string> }> {
    const headers = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      ...signatureHeaders(body, secret, timestamp),
    };
    const result = await postWebhook({
      url,
      body,
      headers,
      timeoutMs: this.#o.timeoutMs,
      allowPrivate: this.#o.allowPrivateUrls,
      resolve: this.#o.resolve,
      signal: this.#shutdown.signal,
      agents: this.#agents,
    });
    return { ...result, sentHeaders: headers };
  }

  async #record(a: Attempt): Promise<{ row: DeliveryLogRow; deliveryStatus: string | null }> {
    const r = a.result;
    const failure =
      a.verdict === 'delivered'
        ? null
        : JSON.stringify({
            timestamp: Date.now(),
            ...(r.statusCode === null ? {} : { statusCode: r.statusCode }),
            ...(r.error === null ? {} : { error: r.error }),
            ...(r.responseBody ? { response: r.responseBody } : {}),
          });
    const rows = await this.#o.db.query<DeliveryLogRow & { deliveryStatus: string | null }>(plans.recordAttempt, [
      randomUUID(),
      a.delivery.id,
      a.delivery.claim,
      a.verdict,
      a.delayMs,
      this.#o.maxAgeMs,
      a.eventCreatedAt,
      a.webhookId,
      a.eventId,
      a.event,
      r.durationMs,
      a.url,
      a.body,
      JSON.stringify(a.headers),
      r.statusCode,
      r.statusText,
      r.error,
      r.responseBody,
      failure,
      r.timedOut,
    ]);
    const row = rows[0];
    if (!row) throw new Error('recording a webhook attempt returned no row');
    const { deliveryStatus, ...log } = row;
    return { row: log, deliveryStatus };
  }
}

function noAnswer(error: string): PostResult {
  return {
    statusCode: null,
    statusText: null,
    responseBody: null,
    error,
    permanent: true,
    aborted: false,
    timedOut: false,
    durationMs: 0,
  };
}

/** Options without the keys given as undefined, so they do not hide the defaults. */
function definedOnly<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
