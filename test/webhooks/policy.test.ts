import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { retryDelay, verdictOf } from '../../src/webhooks/index.ts';

// The retry policy docs/webhooks.md promises receivers.

describe('webhook retry policy', () => {
  it('retries network errors, timeouts, 5xx, 408 and 429; delivers on 2xx; gives up on the rest', () => {
    const v = (statusCode: number | null, permanent = false) => verdictOf({ statusCode, permanent });
    assert.equal(v(null), 'retry');
    assert.equal(v(null, true), 'failed', 'a refused address or a bad URL');
    for (const s of [200, 201, 202, 204, 299]) assert.equal(v(s), 'delivered');
    for (const s of [500, 502, 503, 504, 599, 408, 429]) assert.equal(v(s), 'retry');
    for (const s of [301, 302, 307, 308, 400, 401, 403, 404, 410, 422]) assert.equal(v(s), 'failed');
  });

  it('waits 1 s doubling, capped at 1 h, each delay jittered to between half and all of it', () => {
    const o = { retryMs: 1000, retryMaxMs: 3_600_000 };
    const full = (n: number) => retryDelay(n, o, () => 1);
    const half = (n: number) => retryDelay(n, o, () => 0);
    assert.deepEqual([1, 2, 3, 4, 5].map(full), [1000, 2000, 4000, 8000, 16_000]);
    assert.deepEqual([1, 2, 3].map(half), [500, 1000, 2000]);
    assert.equal(full(13), 3_600_000);
    assert.equal(full(1000), 3_600_000, 'no overflow after many attempts');
    assert.equal(half(1000), 1_800_000);
    for (let i = 0; i < 100; i++) {
      const d = retryDelay(3, o);
      assert.ok(d >= 2000 && d <= 4000, String(d));
    }
  });
});
