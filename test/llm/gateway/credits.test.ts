import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Accounts } from '../../../src/accounts/index.ts';
import { openDb } from '../../../src/db/index.ts';
import { databaseFor, databaseKinds } from '../../helpers/server.ts';
import { runCreditsCommand } from '../../../src/cli/credits.ts';
import { Ledger } from '../../../src/llm/ledger.ts';
import {
  type OrchestratorProcess,
  startGateway,
  startOrchestratorProcess,
  TINY,
  type TestGateway,
} from '../../helpers/llm.ts';

function capture(): { text: () => string; write(s: string): void } {
  let buf = '';
  return {
    text: () => buf,
    write: (s: string) => {
      buf += s;
    },
  };
}

test('credits add writes the balance and a ledger credit; bad input exits 2 naming the flag', async () => {
  const db = await openDb({});
  try {
    await new Accounts(db).ensureOwner('carol');
    const out = capture();
    const err = capture();
    assert.equal(
      await runCreditsCommand(['add', '--owner', 'carol', '--usd', '2.5'], { db, stdout: out, stderr: err }),
      0,
    );
    assert.equal(await runCreditsCommand(['add', '--owner=carol', '--usd=0.5'], { db, stdout: out, stderr: err }), 0);
    assert.match(out.text(), /balance 3 USD/);
    const ledger = new Ledger(db);
    assert.equal(await ledger.balance('carol'), '3.000000000000');
    const entries = await ledger.entries('carol', 10);
    assert.deepEqual(
      entries.map((e) => [e.kind, e.amountUsd]),
      [
        ['credit', 0.5],
        ['credit', 2.5],
      ],
    );

    assert.equal(
      await runCreditsCommand(['add', '--owner', 'nobody', '--usd', '1'], { db, stdout: out, stderr: err }),
      1,
    );
    assert.match(err.text(), /unknown owner nobody/);
    assert.equal(
      await runCreditsCommand(['add', '--owner', 'carol', '--usd', '-1'], { db, stdout: out, stderr: err }),
      2,
    );
    assert.match(err.text(), /--usd: must be a positive amount/);
    assert.equal(
      await runCreditsCommand(['add', '--owner', 'carol', '--dollars', '1'], { db, stdout: out, stderr: err }),
      2,
    );
    assert.match(err.text(), /unknown flag --dollars/);

    // reserve / settle / release arithmetic, usage-based included
    const r = await ledger.reserve({
      owner: 'carol',
      maxTokens: 100,
      pricePerToken: 0.01,
      model: 'a/b',
      orchestrator: 'x',
      requestId: 'r1',
    });
    assert.ok(r);
    assert.equal(await ledger.balance('carol'), '2.000000000000');
    await ledger.settle(r.id, { completionTokens: 30, usageBased: true });
    assert.equal(await ledger.balance('carol'), '2.700000000000', 'usage-based: 70 unused tokens refunded');
    const r2 = await ledger.reserve({
      owner: 'carol',
      maxTokens: 100,
      pricePerToken: 0.01,
      model: 'a/b',
      orchestrator: 'x',
      requestId: 'r2',
    });
    assert.ok(r2);
    await ledger.release(r2.id);
    assert.equal(await ledger.balance('carol'), '2.700000000000', 'released in full');
    assert.equal(
      await ledger.reserve({
        owner: 'carol',
        maxTokens: 1000,
        pricePerToken: 0.01,
        model: 'a/b',
        orchestrator: 'x',
        requestId: 'r3',
      }),
      null,
      'cannot cover 10 USD',
    );
    const after = await ledger.entries('carol', 10);
    assert.deepEqual(
      after.filter((e) => e.kind === 'charge').map((e) => [e.requestId, e.amountUsd, e.completionTokens]),
      [['r1', 0.3, 30]],
    );
  } finally {
    await db.close();
  }
});

// The joint settlement of a request of several parts (issue #25), on both databases: one entry,
// the sum of each part's tokens x its own price, the rest refunded; the price and orchestrator
// kept when the parts shared them (amount = tokens x price can be checked), none when not.
for (const { kind, skip } of await databaseKinds()) {
  test(`a joint reservation settles once at the sum of its parts (${kind})`, { skip }, async () => {
    const db = await openDb({ databaseUrl: await databaseFor(kind) });
    try {
      await new Accounts(db).ensureOwner('jo');
      const ledger = new Ledger(db);
      await ledger.credit({ owner: 'jo', usd: 10 });
      const reserve = (requestId: string) =>
        ledger.reserve({
          owner: 'jo',
          maxTokens: 300,
          pricePerToken: 0.01,
          model: 'a/b',
          orchestrator: 'x',
          requestId,
        });
      const same = await reserve('same');
      const mixed = await reserve('mixed');
      assert.ok(same && mixed);
      assert.equal(await ledger.balance('jo'), '4.000000000000', 'each reserved whole: 300 tokens x 0.01');
      await ledger.settleJoint(same.id, {
        completionTokens: 150,
        parts: [
          { tokens: 100, pricePerToken: 0.01, orchestrator: 'x' },
          { tokens: 50, pricePerToken: 0.01, orchestrator: 'x' },
        ],
      });
      await ledger.settleJoint(mixed.id, {
        completionTokens: 200,
        parts: [
          { tokens: 100, pricePerToken: 0.01, orchestrator: 'x' },
          { tokens: 100, pricePerToken: 0.005, orchestrator: 'y' },
        ],
      });
      assert.equal(await ledger.balance('jo'), '7.000000000000', 'both charged 1.5 of the 3 reserved');
      const charged = (await ledger.entries('jo', 10)).filter((e) => e.kind === 'charge');
      assert.deepEqual(
        charged.map((e) => [e.requestId, e.status, e.amountUsd, e.maxTokens, e.completionTokens, e.pricePerToken]),
        [
          ['mixed', 'settled', 1.5, 300, 200, null],
          ['same', 'settled', 1.5, 300, 150, 0.01],
        ],
      );
    } finally {
      await db.close();
    }
  });
}

// Issue #25 hole 6: a request of several prompts (and n choices each) is reserved whole or not
// at all, settles once for the sum, and to nothing when it is refused or fails part-way. Real
// orchestrator processes (the tiny test model) behind two real gateways: the default settlement
// (max_tokens x price) and usage-based.
describe('a completion of several prompts is charged once, whole or not at all (issue #25)', () => {
  const PRICE = 0.001;
  const SECRET = 'credits-test-shared-secret-0123456789';
  let orch: OrchestratorProcess;
  let fixed: TestGateway;
  let usage: TestGateway;

  before(async () => {
    // Four sequences and no queue: a part beyond them is refused busy (503) at once.
    orch = await startOrchestratorProcess({
      MEDIAPLANE_ORCHESTRATOR_MODELS: TINY,
      MEDIAPLANE_ORCHESTRATOR_PRICE_PER_TOKEN: String(PRICE),
      MEDIAPLANE_ORCHESTRATOR_SECRET: SECRET,
      MEDIAPLANE_ORCHESTRATOR_QUEUE_MS: '0',
      MAX_NUM_SEQS: '4',
    });
    [fixed, usage] = await Promise.all([
      startGateway({ orchestrators: [orch.url], config: { orchestratorSecret: SECRET } }),
      startGateway({ orchestrators: [orch.url], config: { orchestratorSecret: SECRET, gatewayUsageBased: true } }),
    ]);
  });
  after(async () => {
    await Promise.all([fixed?.close(), usage?.close()]);
    await orch?.kill('SIGKILL');
  });

  const post = (gw: TestGateway, key: string, path: string, body: object): Promise<Response> =>
    fetch(`${gw.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: TINY, seed: 1, ...body }),
    });
  const ledgerOf = async (gw: TestGateway, key: string): Promise<LedgerView> => {
    const res = await fetch(`${gw.url}/api/ledger`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200);
    return (await res.json()) as LedgerView;
  };
  const charges = async (gw: TestGateway, key: string) =>
    (await ledgerOf(gw, key)).entries.filter((e) => e.kind === 'charge');
  /** Waits until the orchestrator generates nothing: no part of a request is left to settle late. */
  const idle = async (): Promise<void> => {
    for (let i = 0; i < 200; i++) {
      const res = await fetch(`${orch.url}/capabilities`, { headers: { authorization: `Bearer ${SECRET}` } });
      const caps = (await res.json()) as { stats: { active: number } };
      if (caps.stats.active === 0) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail('the orchestrator kept generating');
  };
  // Each test starts on an idle orchestrator: what an earlier one left running cannot make it busy.
  beforeEach(() => idle());
  const close = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-9, `${a} is not ${b}`);

  test('three prompts at 0.001 USD a token with 0.20 USD: 402, nothing charged, the balance as it was', async () => {
    const key = await fixed.owner('dana', 0.2);
    const res = await post(fixed, key, '/v1/completions', { prompt: ['a', 'b', 'c'], max_tokens: 80 });
    assert.equal(res.status, 402);
    const { error } = (await res.json()) as { error: { message: string } };
    assert.match(error.message, /balance too low for 3 prompts x max_tokens 80 at 0\.001 USD per token \(0\.24 USD\)/);
    await idle();
    const after = await ledgerOf(fixed, key);
    assert.deepEqual(after.entries, [], 'no charge, reserved or settled');
    close(after.balanceUsd, 0.2);
  });

  test('with enough balance the prompts are charged once, for the sum, under the answer id', async () => {
    const key = await fixed.owner('erin', 1);
    const res = await post(fixed, key, '/v1/completions', { prompt: ['a', 'b', 'c'], max_tokens: 80 });
    assert.equal(res.status, 200);
    const answer = (await res.json()) as {
      id: string;
      choices: Array<{ index: number }>;
      usage: { completion_tokens: number };
    };
    assert.deepEqual(
      answer.choices.map((c) => c.index),
      [0, 1, 2],
    );
    const list = await charges(fixed, key);
    assert.equal(list.length, 1, 'one charge for the request');
    const [c] = list;
    assert.equal(c?.status, 'settled');
    assert.equal(c?.requestId, answer.id, 'the charge names the answer it paid for');
    assert.equal(c?.maxTokens, 240, '3 prompts x max_tokens 80');
    assert.equal(c?.completionTokens, answer.usage.completion_tokens);
    assert.equal(c?.pricePerToken, PRICE);
    close(c?.amountUsd ?? 0, 240 * PRICE);
    close((await ledgerOf(fixed, key)).balanceUsd, 1 - 240 * PRICE);

    // n choices of each prompt: prompts x n x max_tokens, once.
    const two = await post(fixed, key, '/v1/completions', { prompt: ['a', 'b'], n: 2, max_tokens: 10 });
    assert.equal(two.status, 200);
    const after = await charges(fixed, key);
    assert.equal(after.length, 2);
    assert.equal(after[0]?.maxTokens, 40);
    close(after[0]?.amountUsd ?? 0, 40 * PRICE);
  });

  test('usage-based: the charge is the tokens the answer reports, which the user can check', async () => {
    const key = await usage.owner('fred', 1);
    const res = await post(usage, key, '/v1/completions', { prompt: ['a', 'b', 'c'], max_tokens: 20, stop: ['.'] });
    assert.equal(res.status, 200);
    const answer = (await res.json()) as { id: string; usage: { completion_tokens: number } };
    const [c, ...more] = await charges(usage, key);
    assert.equal(more.length, 0);
    assert.equal(c?.requestId, answer.id);
    assert.equal(c?.completionTokens, answer.usage.completion_tokens);
    close(c?.amountUsd ?? 0, answer.usage.completion_tokens * PRICE);
    close((await ledgerOf(usage, key)).balanceUsd, 1 - answer.usage.completion_tokens * PRICE);
  });

  test('a prompt the orchestrator refuses (longer than the context): 400, and the others are not charged', async () => {
    const key = await fixed.owner('gina', 1);
    const long = 'word '.repeat(20_000);
    const res = await post(fixed, key, '/v1/completions', { prompt: ['a', long, 'c'], max_tokens: 20 });
    assert.equal(res.status, 400);
    await idle();
    const after = await ledgerOf(fixed, key);
    assert.deepEqual(after.entries, []);
    close(after.balanceUsd, 1);
  });

  test('an upstream failure part-way (one prompt refused busy while the others generate) settles to zero', async () => {
    const key = await fixed.owner('hank', 20);
    // Three prompts of two choices each need six sequences; the orchestrator has four.
    const res = await post(fixed, key, '/v1/completions', { prompt: ['a', 'b', 'c'], n: 2, max_tokens: 400 });
    assert.equal(res.status, 503);
    await idle();
    const after = await ledgerOf(fixed, key);
    assert.deepEqual(after.entries, [], 'the answers of the other prompts were never returned: no charge');
    close(after.balanceUsd, 20);
  });

  // Runs last: it kills the orchestrator.
  test('a stream of n choices cut off by its orchestrator is charged for the tokens it delivered, not the rest', async () => {
    const key = await fixed.owner('iris', 20);
    const res = await post(fixed, key, '/v1/chat/completions', {
      messages: [{ role: 'user', content: 'Hello' }],
      n: 2,
      max_tokens: 3000,
      stream: true,
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let text = dec.decode((await reader.read()).value, { stream: true });
    await orch.kill('SIGKILL');
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += dec.decode(value, { stream: true });
    }
    assert.match(text, /event: error\n/);
    const tokens = [...text.matchAll(/^data: \{"id"/gm)].length;
    const [c, ...more] = await charges(fixed, key);
    assert.equal(more.length, 0);
    assert.equal(c?.status, 'settled');
    assert.equal(c?.completionTokens, tokens);
    close(c?.amountUsd ?? 0, tokens * PRICE);
    assert.ok(tokens < 6000, `${tokens} tokens delivered of 6000 reserved`);
  });
});

interface LedgerView {
  balanceUsd: number;
  entries: Array<{
    kind: string;
    status: string;
    amountUsd: number;
    requestId: string | null;
    maxTokens: number | null;
    completionTokens: number | null;
    pricePerToken: number | null;
  }>;
}
