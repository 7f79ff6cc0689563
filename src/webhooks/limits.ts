import { TooManyRequestsError } from '../lib/errors.ts';

// What keeps one owner from stalling everyone's webhooks (issue #25, holes 4 and 5): one
// process's delivery slots, shared fairly between owners and taken by resends too, and a
// per-owner rate of resends. Both are per process, as MEDIAPLANE_WEBHOOK_CONCURRENCY is.

/**
 * The most slots one owner may hold while `owners` owners have work: an equal part of the
 * slots, with one part always left over for an owner whose work comes next, so a newcomer
 * finds a free slot at once instead of waiting for a receiver that holds its request to time
 * out (issue #25: 48 webhooks to such a receiver delayed another owner's delivery 16 s).
 */
export function fairShare(capacity: number, owners: number): number {
  return Math.max(1, Math.floor(capacity / (Math.max(1, owners) + 1)));
}

/** A resend refused for now: the owner's rate is spent, or every slot stayed busy. A 429 with Retry-After. */
export class ResendLimitError extends TooManyRequestsError {
  constructor(message: string, retryAfterMs: number) {
    super(message, { retryAfterMs });
  }
}

interface Waiter {
  owner: string;
  grant: () => void;
}

/**
 * The delivery slots of one process: claimed deliveries and resends both hold one while
 * their POST is out, counted by owner. A resend waits for a slot its owner may take; the
 * dispatcher's claims take what is free after the waiting resends.
 */
export class DeliverySlots {
  readonly capacity: number;
  #used = 0;
  readonly #held = new Map<string, number>();
  readonly #waiters: Waiter[] = [];
  /** Owners with deliveries due, as the dispatcher's last pass found them. */
  #due: readonly string[] = [];

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  /** Slots the dispatcher may claim deliveries for: free ones not promised to a waiting resend. */
  get claimable(): number {
    return Math.max(0, this.capacity - this.#used - this.#waiters.length);
  }

  /** Slots held by `owner`. */
  held(owner: string): number {
    return this.#held.get(owner) ?? 0;
  }

  /** Owners holding a slot now. */
  holders(): string[] {
    return [...this.#held.keys()];
  }

  /** What the dispatcher's last pass saw due, for the shares of resends. */
  setDue(owners: readonly string[]): void {
    this.#due = owners;
  }

  /** The share of each owner while `owners` (and those holding slots) have work. */
  share(owners: Iterable<string>): number {
    return fairShare(this.capacity, new Set([...owners, ...this.#held.keys()]).size);
  }

  take(owner: string): void {
    this.#used++;
    this.#held.set(owner, this.held(owner) + 1);
  }

  release(owner: string): void {
    this.#used--;
    const n = this.held(owner) - 1;
    if (n > 0) this.#held.set(owner, n);
    else this.#held.delete(owner);
    this.#grant();
  }

  /**
   * Takes a slot for a resend of `owner` within `waitMs`, or fails with a 429: first come,
   * first served among resends, and never past the owner's fair share.
   */
  acquire(owner: string, waitMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        reject(
          new ResendLimitError(
            `every webhook delivery slot stayed busy for ${waitMs} ms; send the resend again later`,
            waitMs,
          ),
        );
      }, waitMs);
      const waiter: Waiter = {
        owner,
        grant: () => {
          clearTimeout(timer);
          this.take(owner);
          resolve();
        },
      };
      this.#waiters.push(waiter);
      this.#grant();
    });
  }

  #mayTake(owner: string): boolean {
    return this.#used < this.capacity && this.held(owner) < this.share([...this.#due, owner]);
  }

  #grant(): void {
    for (let i = 0; i < this.#waiters.length; ) {
      const w = this.#waiters[i];
      if (w && this.#mayTake(w.owner)) {
        this.#waiters.splice(i, 1);
        w.grant();
      } else i++;
    }
  }
}

/**
 * A per-owner rate (a token bucket): `perMinute` at once, refilled at `perMinute` a minute.
 * Owners whose bucket is full again are forgotten, so the map holds only recent callers.
 */
export class OwnerRate {
  readonly #perMinute: number;
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(perMinute: number) {
    this.#perMinute = perMinute;
  }

  /** Takes one; when none is left, how many ms until one is. */
  take(owner: string, now = performance.now()): { ok: true } | { ok: false; retryAfterMs: number } {
    const perMs = this.#perMinute / 60_000;
    const b = this.#buckets.get(owner);
    const tokens = b ? Math.min(this.#perMinute, b.tokens + (now - b.at) * perMs) : this.#perMinute;
    if (tokens < 1) {
      this.#buckets.set(owner, { tokens, at: now });
      return { ok: false, retryAfterMs: (1 - tokens) / perMs };
    }
    this.#forgetFull(now);
    this.#buckets.set(owner, { tokens: tokens - 1, at: now });
    return { ok: true };
  }

  #forgetFull(now: number): void {
    if (this.#buckets.size < 1024) return;
    const perMs = this.#perMinute / 60_000;
    for (const [owner, b] of this.#buckets)
      if (b.tokens + (now - b.at) * perMs >= this.#perMinute) this.#buckets.delete(owner);
  }
}
