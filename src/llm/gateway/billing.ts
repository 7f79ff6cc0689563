// What a completion costs its owner (API.md, Pricing): the charge for one attempt on one
// orchestrator. It knows the ledger and nothing of failover or of the wire; the failover loop
// opens a charge before forwarding and releases it when the orchestrator fails before the
// first token, and the answer settles it once it is out.

import { PaymentRequiredError } from '../../lib/errors.ts';
import type { Ledger } from '../ledger.ts';

export interface Charge {
  /** The answer is out: charge its tokens (usage-based, or the max_tokens reserved). */
  settle(completionTokens: number): Promise<void>;
  /** The orchestrator failed before the first token: the reservation goes back in full. */
  release(): Promise<void>;
}

export interface ChargeFor {
  owner: string;
  /** The price basis: max_tokens for each of the request's choices (n), all together. */
  maxTokens: number;
  /** The choices asked for (n); each may take max_tokens. */
  choices?: number;
  pricePerToken: number;
  model: string;
  orchestrator: string;
  requestId: string;
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
      release: () => ledger.release(reservation.id),
    };
  }

  #free(charge: ChargeFor): Charge {
    const ledger = this.#ledger;
    return {
      settle: (completionTokens) => ledger.recordFree({ ...charge, completionTokens }),
      release: async () => {},
    };
  }
}

function balanceTooLow(c: ChargeFor): PaymentRequiredError {
  const usd = (c.maxTokens * c.pricePerToken).toFixed(12).replace(/0+$/, '');
  const n = c.choices ?? 1;
  const basis = n > 1 ? `max_tokens ${c.maxTokens / n} x n ${n}` : `max_tokens ${c.maxTokens}`;
  return new PaymentRequiredError(
    `balance too low for ${basis} at ${c.pricePerToken} USD per token (${usd} USD); add credits or lower max_tokens`,
  );
}
