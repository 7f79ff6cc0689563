import { randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { Db } from '../db/index.ts';
import { backoffMs } from '../lib/backoff.ts';
import type { Resolve } from '../lib/net-guard.ts';
import * as plans from './plans.ts';
import { type PostResult, postWebhook } from './send.ts';
import { signatureHeaders } from './sign.ts';
import type { DeliveryLogRow, WebhookEvent } from './types.ts';

// One attempt to deliver an event (issue #18), whether the dispatcher claimed it or an owner
// asked for a resend: sent signed, its answer judged, and recorded in the delivery log with
// what it means for the delivery (delivered, due again, failed for good).

export const USER_AGENT = 'mediaplane-webhooks';

export type Verdict = 'delivered' | 'retry' | 'failed';

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
 * `retryMaxMs`, and jittered to between half and all of it (lib/backoff.ts), so the retries of
 * many deliveries to one receiver that came back up do not all arrive at the same instant.
 */
export function retryDelay(
  attempt: number,
  o: { retryMs: number; retryMaxMs: number },
  random: () => number = Math.random,
): number {
  return backoffMs(attempt - 1, { baseMs: o.retryMs, maxMs: o.retryMaxMs, jitter: [0.5, 1] }, random);
}

/** What a POST sent and what came back. */
export type Sent = PostResult & { sentHeaders: Record<string, string> };

/** One attempt to record (plans.recordAttempt). */
export interface Attempt {
  /** The claimed delivery and the claim's number; a resend names the delivery but no claim. */
  delivery: { id: string | null; claim: number | null };
  webhookId: string;
  eventId: string;
  event: WebhookEvent;
  eventCreatedAt: Date;
  url: string;
  body: string;
  result: Sent;
  verdict: Verdict;
  delayMs: number;
}

export interface AttemptsOptions {
  db: Db;
  /** One attempt's limit: connect, send, answer. */
  timeoutMs: number;
  /** Failing deliveries are retried while their event is younger than this. */
  maxAgeMs: number;
  allowPrivateUrls: boolean;
  resolve?: Resolve | undefined;
}

/** Sends and records attempts, over connections kept alive between them. */
export class Attempts {
  readonly #o: AttemptsOptions;
  readonly #agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

  constructor(opts: AttemptsOptions) {
    this.#o = opts;
  }

  /** POSTs `body` to `url`, signed with `secret` when there is one; `signal` abandons it (shutdown). */
  async post(
    to: { url: string; body: string; secret: string | null; timestamp: number },
    signal: AbortSignal,
  ): Promise<Sent> {
    const headers = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      ...signatureHeaders(to.body, to.secret, to.timestamp),
    };
    const result = await postWebhook({
      url: to.url,
      body: to.body,
      headers,
      timeoutMs: this.#o.timeoutMs,
      allowPrivate: this.#o.allowPrivateUrls,
      resolve: this.#o.resolve,
      signal,
      agents: this.#agents,
    });
    return { ...result, sentHeaders: headers };
  }

  /** Writes the log row and the delivery's new state; `deliveryStatus` is null when the claim was lost. */
  async record(a: Attempt): Promise<{ row: DeliveryLogRow; deliveryStatus: string | null }> {
    const r = a.result;
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
      JSON.stringify(r.sentHeaders),
      r.statusCode,
      r.statusText,
      r.error,
      r.responseBody,
      a.verdict === 'delivered' ? null : failureOf(r),
      r.timedOut,
    ]);
    const row = rows[0];
    if (!row) throw new Error('recording a webhook attempt returned no row');
    const { deliveryStatus, ...log } = row;
    return { row: log, deliveryStatus };
  }

  /** Closes the kept-alive connections. */
  close(): void {
    this.#agents.http.destroy();
    this.#agents.https.destroy();
  }
}

/** The webhook's last_failure, as Livepeer keeps it (times in ms). */
function failureOf(r: PostResult): string {
  return JSON.stringify({
    timestamp: Date.now(),
    ...(r.statusCode === null ? {} : { statusCode: r.statusCode }),
    ...(r.error === null ? {} : { error: r.error }),
    ...(r.responseBody ? { response: r.responseBody } : {}),
  });
}

/** An attempt that sent nothing: `error` says why. Final. */
export function notSent(error: string): Sent {
  return {
    statusCode: null,
    statusText: null,
    responseBody: null,
    error,
    permanent: true,
    aborted: false,
    timedOut: false,
    durationMs: 0,
    sentHeaders: {},
  };
}
