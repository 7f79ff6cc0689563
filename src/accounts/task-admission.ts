// The one admission point of a key's task limits: every task a key asks for, whatever route
// or action asks (a transcode, an upload, a clip, an export, a retry), is written by tasks/
// TaskStore under this admission, in the statement that writes it. A task that encodes needs the
// key's budget unspent and takes one of its concurrent transcodes; one that does not (an export)
// is a request of its key and nothing more. All of it is one SQL function, key_task_admission()
// (migration 404), planned once per process, which answers the refusal's reason in the
// statement that writes the task, with the database's clock for its Retry-After.

import { InternalError, type MediaplaneError, TooManyRequestsError } from '../lib/errors.ts';
import type { Bind } from '../lib/sql-params.ts';
import { taskAdmissionSql } from './limit-sql.ts';
import type { Keyed } from './limiter.ts';
import { budgetSpent, requestsRefused } from './limits.ts';

/** Retry-After of the concurrent-transcodes 429: a slot frees when a task ends, seconds to minutes away. */
const SLOT_RETRY_AFTER_MS = 10_000;

export interface TaskAdmissionOptions {
  /** MEDIAPLANE_RATE_WINDOW_MS: the key's requests window. */
  windowMs: number;
  /** The task types that encode (transcodes, uploads, clips): main.ts, which knows them all, says which. */
  encoding: readonly string[];
}

/** Whether `key`'s request is counted by its task's admission: the auth step left it to the route, and it is not counted yet. */
function countsRequest(key: Keyed): boolean {
  return key.deferred !== undefined && !key.deferred.done && key.limits !== undefined;
}

/** The shape of tasks/ TaskAdmission, for the key of the request (accounts' Principal). */
export class KeyTaskAdmission {
  readonly #o: TaskAdmissionOptions;

  constructor(o: TaskAdmissionOptions) {
    this.#o = o;
  }

  /**
   * The admission of `key`'s task of `type` (SQL: a bound value, or a column), as SQL that
   * answers NULL or the refusal's reason; undefined when the key is held to nothing here. A pure
   * builder: the request it counts (`deferred`) is counted once its statement ran (`ran`).
   */
  sql(bind: Bind, o: { key: Keyed; type: string }): string | undefined {
    const limits = o.key.limits;
    const count = countsRequest(o.key);
    const budget = limits?.budget ?? undefined;
    const maxLive = limits?.concurrentTranscodes ?? undefined;
    if (!count && !budget && maxLive === undefined) return undefined;
    return taskAdmissionSql(bind, {
      keyId: o.key.keyId,
      owner: o.key.owner,
      windowMs: this.#o.windowMs,
      requests: count ? { limit: limits?.requestsPerMinute ?? null } : undefined,
      budget,
      type: o.type,
      encoding: this.#o.encoding,
      maxLive,
    });
  }

  /** The statement `sql` built for `key` ran: its request, if it counted it, is counted (once per request). */
  ran(key: Keyed): void {
    if (countsRequest(key) && key.deferred) key.deferred.done = true;
  }

  /**
   * The error the reason key_task_admission() answered is answered with: a 429 naming the limit
   * ('requests', 'budget', 'transcodes'), with Retry-After where the limit has an end. `nowMs`:
   * the database's clock at the refusal (windows are aligned on the epoch by that clock).
   */
  refusal(o: { key: Keyed; reason: string; nowMs: number }): MediaplaneError {
    const limits = o.key.limits;
    if (o.reason === 'requests') return this.#requestsRefused(limits?.requestsPerMinute ?? null, o.nowMs);
    if (o.reason === 'budget' && limits?.budget) return budgetSpent(limits.budget);
    if (o.reason === 'transcodes' && limits?.concurrentTranscodes)
      return new TooManyRequestsError(
        `too many concurrent transcodes: this key may have at most ${limits.concurrentTranscodes} waiting or running (its ${this.#kinds()} tasks together)`,
        { retryAfterMs: SLOT_RETRY_AFTER_MS },
      );
    return new InternalError(`the key's task admission answered a refusal it has no limit for: ${o.reason}`);
  }

  /** The task types that encode, as a refusal names them: "transcode-file, upload and clip". */
  #kinds(): string {
    const kinds = this.#o.encoding;
    return kinds.length < 2 ? kinds.join('') : `${kinds.slice(0, -1).join(', ')} and ${kinds.at(-1)}`;
  }

  /** The requests refusal: the window that refused it ends at the next multiple of windowMs. */
  #requestsRefused(rpm: number | null, nowMs: number): MediaplaneError {
    const windowMs = this.#o.windowMs;
    const resetMs = Math.max(1, windowMs - (nowMs % windowMs));
    const windows = rpm === null ? {} : { requests: { limit: rpm, remaining: 0, resetMs } };
    return requestsRefused({ rpm, windowMs, resetMs, windows });
  }
}
