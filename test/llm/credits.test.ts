import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Accounts } from '../../src/accounts/index.ts';
import { openDb } from '../../src/db/index.ts';
import { runCreditsCommand } from '../../src/cli/credits.ts';
import { Ledger } from '../../src/llm/ledger.ts';

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
