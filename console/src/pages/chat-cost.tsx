// What a chat request cost and the credit left. The chat answer itself carries no price: the
// gateway writes each charge to the owner's ledger under the answer's id (the chunks' `id` is
// the charge's requestId, llm/gateway/complete.ts), and GET /api/ledger (docs/llm.md "Pricing
// and credits") gives the balance and the entries. So after each answer the page reads the
// ledger and finds that answer's charge; it is settled just after the stream ends, hence a few
// short re-reads while it still shows `reserved`.

import { api } from '../api.ts';
import type { Ledger, LedgerEntry } from '../wire.ts';
import { ErrorText } from '../components/index.ts';

const SETTLE_TRIES = 8;
const SETTLE_WAIT_MS = 250;

export function readLedger(limit = 20): Promise<Ledger> {
  return api<Ledger>('GET', `/api/ledger?limit=${limit}`);
}

/** The ledger once the charge of `requestId` is no longer `reserved` (or after a few tries). */
export async function ledgerAfter(requestId: string): Promise<{ ledger: Ledger; charge?: LedgerEntry }> {
  let ledger = await readLedger();
  for (let i = 0; ; i++) {
    const charge = ledger.entries.find((e) => e.requestId === requestId && e.kind === 'charge');
    if ((charge && charge.status !== 'reserved') || i >= SETTLE_TRIES) return charge ? { ledger, charge } : { ledger };
    await new Promise((r) => setTimeout(r, SETTLE_WAIT_MS));
    ledger = await readLedger();
  }
}

const usdFormat = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumSignificantDigits: 4 });

export function usd(n: number): string {
  return n === 0 ? '$0' : usdFormat.format(n);
}

function chargeWords(c: LedgerEntry): string {
  const price = c.pricePerToken ?? 0;
  if (c.status === 'released') return `${usd(0)}: the request failed before its first token, nothing was charged`;
  // The charge is max_tokens x price, or the tokens used when the gateway settles on usage
  // (MEDIAPLANE_GATEWAY_USAGE_BASED): say which by what the amount matches.
  const used = c.completionTokens;
  const onUsage = used !== null && Math.abs(used * price - c.amountUsd) < 1e-12 * Math.max(1, used);
  const tokens = (onUsage ? used : c.maxTokens) ?? 0;
  const what = onUsage ? 'tokens used' : 'max_tokens';
  const basis = `${tokens} ${what} × ${usd(price)} a token`;
  const state = c.status === 'reserved' ? ' (reserved for max_tokens, not settled yet)' : '';
  return `${usd(c.amountUsd)} (${basis}${state})`;
}

/** The cost of the last answer and the balance, or why they cannot be shown. */
export function CostPanel(props: {
  ledger: Ledger | undefined;
  charge: LedgerEntry | undefined;
  asked: boolean;
  error: unknown;
}) {
  const { ledger, charge } = props;
  const free = charge?.pricePerToken === 0;
  return (
    <section aria-labelledby="chat-cost" class="card chat-cost">
      <h2 id="chat-cost">Cost and credit</h2>
      <dl class="props">
        <dt>Last request</dt>
        <dd>
          {charge
            ? chargeWords(charge)
            : props.asked
              ? 'no charge found in the ledger for this answer'
              : 'nothing asked yet: the charge is max_tokens × the orchestrator’s price, reserved before the answer'}
        </dd>
        <dt>Credit left</dt>
        <dd>
          {ledger ? usd(ledger.balanceUsd) : '…'}
          {free ? <span class="hint"> (this orchestrator’s price is 0: no credit needed)</span> : null}
        </dd>
      </dl>
      <ErrorText error={props.error} />
    </section>
  );
}
