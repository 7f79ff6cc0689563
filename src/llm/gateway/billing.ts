// What a completion costs its owner (API.md, Pricing): the charge for one attempt on one
// orchestrator. It knows the ledger and nothing of failover or of the wire; the failover loop
// opens a charge before forwarding and releases it when the orchestrator fails before the
// first token, and the answer settles it once it is out. A request of several parts (the
// prompts of POST /v1/completions) is one joint charge: reserved whole before any part is
// forwarded, settled once for the sum when every part answered, and to nothing otherwise
// (issue #25: parts used to be charged one by one, so a 402 or a failed part left the others
// charged for answers the client never got).

import { PaymentRequiredError } from '../../lib/errors.ts';
import type { Ledger } from '../ledger.ts';

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

export class Billing {
  readonly #ledger: Ledger;
  readonly #usageBased: boolean;

  constructor(ledger: Ledger, opts: { usageBased: boolean }) {
    this.#ledger = ledger;
    this.#usageBased = opts.usageBased;
  }

  /**
   * A priced request is reserved before forwarding; a PaymentRequiredError (returned, not
   * thrown: it is an outcome, "refused") when the balance cannot cover max_tokens x price.
   * A free one (price 0) needs no balance: its zero charge is written in one statement once
   * the answer is out, not as two database writes around it (with the embedded database each
   * one holds the event loop for about a millisecond, which every stream on this gateway
   * would feel).
   */
  async open(charge: ChargeFor): Promise<Charge | PaymentRequiredError> {
    if (!(charge.pricePerToken > 0)) return this.#free(charge);
    const reservation = await this.#ledger.reserve(charge);
    if (!reservation) return balanceTooLow(charge);
    const ledger = this.#ledger;
    const usageBased = this.#usageBased;
    return {
      settle: (completionTokens) => ledger.settle(reservation.id, { completionTokens, usageBased }),
      cutOff: (delivered) => ledger.settle(reservation.id, { completionTokens: delivered, usageBased: true }),
      release: () => ledger.release(reservation.id),
    };
  }

  /**
   * Reserves a request of several parts whole (`charge` prices all of them, at the highest
   * price any part may be answered at: each part may fail over to any candidate) or refuses
   * it with nothing reserved. The parts' charges only count; the ledger is written once.
   */
  async openJoint(charge: ChargeFor): Promise<JointCharge | PaymentRequiredError> {
    const priced = charge.pricePerToken > 0;
    const reservation = priced ? await this.#ledger.reserve(charge) : undefined;
    if (reservation === null) return balanceTooLow(charge);
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
        else await ledger.recordFree({ ...charge, completionTokens: completionTokens() });
      },
      release: async () => {
        if (reservation) await ledger.release(reservation.id);
      },
    };
  }

  #free(charge: ChargeFor): Charge {
    const ledger = this.#ledger;
    const record = (completionTokens: number) => ledger.recordFree({ ...charge, completionTokens });
    return { settle: record, cutOff: record, release: async () => {} };
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
