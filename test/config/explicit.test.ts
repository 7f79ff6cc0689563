// Which settings were set explicitly: a rule such as "MAX_MODEL_LEN left at its default
// follows the model" (issue #4) must tell an explicit value equal to the default from none.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { explicitSettings, loadConfig, settings } from '../../src/config/index.ts';

test('settings from the environment, flags and overrides are explicit; defaults and empty values are not', () => {
  const none = loadConfig({ env: {} });
  assert.equal(none.maxModelLen, settings.maxModelLen.default);
  assert.deepEqual([...(explicitSettings(none) ?? ['not tracked'])], []);

  const env = loadConfig({ env: { MAX_MODEL_LEN: String(settings.maxModelLen.default), MAX_NUM_SEQS: '' } });
  assert.equal(env.maxModelLen, settings.maxModelLen.default, 'the same value as the default...');
  assert.ok(explicitSettings(env)?.has('maxModelLen'), '...but set explicitly');
  assert.ok(!explicitSettings(env)?.has('maxNumSeqs'), 'an empty value leaves the default');

  const flags = loadConfig({ env: {}, flags: { port: '9000' }, overrides: { logLevel: 'silent' } });
  assert.deepEqual([...(explicitSettings(flags) ?? [])].sort(), ['logLevel', 'port']);
});

test('a config not made by loadConfig is not tracked', () => {
  const copy = { ...loadConfig({ env: { MAX_MODEL_LEN: '1024' } }) };
  assert.equal(explicitSettings(copy), undefined);
});
