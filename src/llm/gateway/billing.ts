// What a completion costs its owner (API.md, Pricing): the charge for one attempt on one
// orchestrator. It knows the ledger and nothing of failover or of the wire; the failover loop
// opens a charge before forwarding and releases it when the orchestrator fails before the
// first token, and the answer settles it once it is out. A request of several parts (the
// prompts of POST /v1/completions) is one joint charge: reserved whole before any part is
// forwarded, settled once for the sum when every part answered, and to nothing otherwise
// (issue #25: parts used to be charged one by one, so a 402 or a failed part left the others
// charged for answers the client never got).

import type { KeyLimiter, Principal, TokensHeld } from '../../accounts/index.ts';
import { MediaplaneError, PaymentRequiredError } from '../../lib/errors.ts';
import { dec, type Ledger, type Reservation, reserveStep } from '../ledger.ts';

export interface Charge {
  /** The answer is out: charge its tokens (usage-based, or the max_tokens reserved). */
  settle(completionTokens: number): Promise<void>;
  /**
   * A stream broke off after its first token: only the tokens that reached the client are
   * charged, whatever the setting (the max_tokens basis prices an answer, not half of one).
   */
  cutOff(deliveredTokens: number): Promise<void>;
  /** The orchestrator failed before the first token: the reservation goes back in full. */
  release(): Promise<void>;
}

export interface ChargeFor {
  owner: string;
  /** The key the request came with: its tokens and budget limits hold the charge (issue #32). */
  key?: Principal | undefined;
  /** The price basis: max_tokens for each of the request's choices (n) and prompts, all together. */
  maxTokens: number;
  /** The choices asked for (n); each may take max_tokens. */
  choices?: number;
  /** The prompts of a text completion, each a completion of its own (a joint charge). */
  prompts?: number;
  pricePerToken: number;
  model: string;
  orchestrator: string;
  requestId: string;
}

/** The charge of a request's parts together (JointCharge.part opens each part's). */
export interface JointCharge {
  /** One part's charge, drawn from the joint reservation: nothing is written until the end. */
  part(charge: ChargeFor): Charge;
  /** Every part answered: one settlement for the sum of the parts' charges. */
  settle(): Promise<void>;
  /** A part was refused or failed, or the client went away: nothing is charged. */
  release(): Promise<void>;
}

/** What one part of a joint charge settled at. */
interface PartSettled {
  tokens: number;
  completionTokens: number;
  pricePerToken: number;
  orchestrator: string;
}

/** What a charge of a limited key holds: its ledger reservation (none for a free one) and its tokens. */
interface Held {
  reservation: Reservation | undefined;
  tokens: TokensHeld | undefined;
}

export interface OpenOptions {
  /** Settle at the tokens used whatever the gateway's setting (embeddings: the reserve is a bound, not a price basis). */
  usageBased?: boolean;
  /** The 402 when the balance cannot cover the charge (default: max_tokens' words). */
  tooLow?: (c: ChargeFor) => PaymentRequiredError;
}

export class Billing {
  readonly #ledger: Ledger;
  readonly #usageBased: boolean;
  readonly #limiter: KeyLimiter | undefined;

  /** `limiter`: holds the charges of keys with a tokens or budget limit (accounts/ KeyLimiter, issue #32). */
  constructor(ledger: Ledger, opts: { usageBased: boolean; limiter?: KeyLimiter | undefined }) {
    this.#ledger = ledger;
    this.#usageBased = opts.usageBased;
    this.#limiter = opts.limiter;
  }

  /**
   * A charge of a key whose limits apply to it (a request count the auth step left to it, a
   * tokens limit, a budget on a priced model): the count, its tokens, its budget and the
   * ledger's reservation in one statement (KeyLimiter.hold), or its refusal; undefined when no
   * limit applies (the charge is opened as any other).
   */
  async #hold(
    charge: ChargeFor,
    tooLow: (c: ChargeFor) => PaymentRequiredError,
  ): Promise<Held | MediaplaneError | undefined> {
    const key = charge.key;
    const limits = key?.limits;
    const priced = charge.pricePerToken > 0;
    if (!this.#limiter || !key || !limits) return undefined;
    const count = key.deferred !== undefined && !key.deferred.done;
    if (!count && limits.tokensPerMinute === null && !(limits.budget !== null && priced)) return undefined;
    const keyId = key.keyId;
    const held = await this.#limiter.hold(key, {
      tokens: charge.maxTokens,
      pricePerToken: dec(charge.pricePerToken),
      reserve: priced ? reserveStep({ ...charge, keyId }) : undefined,
    });
    if (held === 'balance') return tooLow(charge);
    if (held instanceof MediaplaneError) return held;
    return { reservation: held.reserved, tokens: held.tokens };
  }

  /**
   * Counts the request of a limited key now, when the auth step left its count to the charge
   * (Accounts.admit's `defer`) and it has not been counted: for a request refused, or looked
   * up at length, before its charge (before-charge.ts). A RateLimitedError past the key's
   * requests window, and then the request is not counted.
   */
  async countNow(key: Principal | undefined): Promise<void> {
    const deferred = key?.deferred;
    if (!this.#limiter || !key?.limits || !deferred || deferred.done) return;
    deferred.done = true;
    deferred.counted?.(await this.#limiter.admit({ ...key, limits: key.limits }));
  }

  /** Gives back the tokens a held charge did not use (nothing for a key without a tokens limit). */
  #tokensUsed(charge: ChargeFor, held: Held | undefined, used: number): Promise<void> {
    if (!held?.tokens || !charge.key || !this.#limiter) return Promise.resolve();
    return this.#limiter.settleTokens(charge.key.keyId, held.tokens, used);
  }

  /**
   * A priced request is reserved before forwarding; a PaymentRequiredError (returned, not
   * thrown: it is an outcome, "refused") when the balance cannot cover max_tokens x price.
   * A free one (price 0) needs no balance: its zero charge is written in one statement once
   * the answer is out, not as two database writes around it (with the embedded database each
   * one holds the event loop for about a millisecond, which every stream on this gateway
   * would feel).
   */
  async open(charge: ChargeFor, o: OpenOptions = {}): Promise<Charge | MediaplaneError> {
    const tooLow = o.tooLow ?? balanceTooLow;
    const held = await this.#hold(charge, tooLow);
    if (held instanceof MediaplaneError) return held;
    const used = (n: number) => this.#tokensUsed(charge, held, n);
    if (!(charge.pricePerToken > 0)) return this.#free(charge, used);
    const reservation = held ? held.reservation : await this.#ledger.reserve({ ...charge, keyId: charge.key?.keyId });
    if (!reservation) return tooLow(charge);
    const ledger = this.#ledger;
    const usageBased = o.usageBased ?? this.#usageBased;
    return {
      settle: async (completionTokens) => {
        await ledger.settle(reservation.id, { completionTokens, usageBased });
        await used(completionTokens);
      },
      cutOff: async (delivered) => {
        await ledger.settle(reservation.id, { completionTokens: delivered, usageBased: true });
        await used(delivered);
      },
      release: async () => {
        await ledger.release(reservation.id);
        await used(0);
      },
    };
  }

  /**
   * Reserves a request of several parts whole (`charge` prices all of them, at the highest
   * price any part may be answered at: each part may fail over to any candidate) or refuses
   * it with nothing reserved. The parts' charges only count; the ledger is written once.
   */
  async openJoint(charge: ChargeFor): Promise<JointCharge | MediaplaneError> {
    const priced = charge.pricePerToken > 0;
    const held = await this.#hold(charge, balanceTooLow);
    if (held instanceof MediaplaneError) return held;
    const reservation = held
      ? held.reservation
      : priced
        ? await this.#ledger.reserve({ ...charge, keyId: charge.key?.keyId })
        : undefined;
    if (reservation === null) return balanceTooLow(charge);
    const used = (n: number) => this.#tokensUsed(charge, held, n);
    const ledger = this.#ledger;
    const usageBased = this.#usageBased;
    const parts: PartSettled[] = [];
    const completionTokens = () => parts.reduce((sum, p) => sum + p.completionTokens, 0);
    const record = (c: ChargeFor, completion: number, billed: number) => {
      parts.push({
        tokens: billed,
        completionTokens: completion,
        pricePerToken: c.pricePerToken,
        orchestrator: c.orchestrator,
      });
    };
    return {
      part: (c) => ({
        settle: async (completion) => record(c, completion, usageBased ? completion : c.maxTokens),
        cutOff: async (delivered) => record(c, delivered, delivered),
        release: async () => {},
      }),
      settle: async () => {
        if (reservation) await ledger.settleJoint(reservation.id, { completionTokens: completionTokens(), parts });
        else await ledger.recordFree({ ...charge, keyId: charge.key?.keyId, completionTokens: completionTokens() });
        await used(completionTokens());
      },
      release: async () => {
        if (reservation) await ledger.release(reservation.id);
        await used(0);
      },
    };
  }

  #free(charge: ChargeFor, used: (n: number) => Promise<void>): Charge {
    const ledger = this.#ledger;
    const record = async (completionTokens: number) => {
      await ledger.recordFree({ ...charge, keyId: charge.key?.keyId, completionTokens });
      await used(completionTokens);
    };
    return { settle: record, cutOff: record, release: () => used(0) };
  }
}

function balanceTooLow(c: ChargeFor): PaymentRequiredError {
  const usd = (c.maxTokens * c.pricePerToken).toFixed(12).replace(/0+$/, '');
  const n = c.choices ?? 1;
  const prompts = c.prompts ?? 1;
  const basis = [
    prompts > 1 ? `${prompts} prompts` : '',
    `max_tokens ${c.maxTokens / n / prompts}`,
    n > 1 ? `n ${n}` : '',
  ]
    .filter(Boolean)
    .join(' x ');
  return new PaymentRequiredError(
    `balance too low for ${basis} at ${c.pricePerToken} USD per token (${usd} USD); add credits or lower max_tokens`,
  );
}
