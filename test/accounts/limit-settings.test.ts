// The key limit settings are one table of descriptors (src/accounts/limit-settings.ts): adding a
// limit is adding a descriptor (and its column). Checked by iterating the table: every setting is
// a column of api_keys (and owner_limits, unless a key's only), a field of GET /api/key's schema,
// a flag of `keys` with its help line, and a row of docs/keys.md's table; and a value of each,
// given to the CLI as an operator types it, is stored and read back on the key and its owner.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import {
  Accounts,
  LIMIT_SETTINGS,
  type LimitDescriptor,
  limitsDocTable,
  OWNER_SETTINGS,
} from '../../src/accounts/index.ts';
import { ApiKeySchema } from '../../src/api/contract/api-key.ts';
import { parseCommandLine } from '../../src/cli/args.ts';
import { KEYS_FLAGS, KEYS_HELP, keysCommand } from '../../src/cli/keys.ts';
import { type Db, openDb } from '../../src/db/index.ts';
import { ValidationError } from '../../src/lib/errors.ts';

const SETTINGS: readonly LimitDescriptor[] = LIMIT_SETTINGS;

describe('key limit settings: one table of descriptors', () => {
  let db: Db;
  before(async () => {
    db = await openDb({});
  });
  after(() => db?.close());

  /** Runs `mediaplane keys ...` against the database; its exit code and what it printed. */
  const cli = async (argv: string[]) => {
    const printed: string[] = [];
    const [err, out] = [process.stderr.write, process.stdout.write];
    process.stderr.write = process.stdout.write = (chunk: string | Uint8Array) => printed.push(String(chunk)) > 0;
    try {
      return { code: await keysCommand(parseCommandLine(argv, KEYS_FLAGS), db), printed: printed.join('') };
    } finally {
      [process.stderr.write, process.stdout.write] = [err, out];
    }
  };

  it('gives every setting its columns', async () => {
    const columns = async (table: string) =>
      (
        await db.query<{ column_name: string }>(
          'SELECT column_name FROM information_schema.columns WHERE table_name = $1',
          [table],
        )
      ).map((r) => r.column_name);
    const [keys, owners] = [await columns('api_keys'), await columns('owner_limits')];
    for (const d of SETTINGS) {
      assert.ok(keys.includes(d.column), `api_keys.${d.column} (${d.field})`);
      assert.equal(owners.includes(d.column), !d.keyOnly, `owner_limits.${d.column} (${d.field})`);
    }
  });

  it('puts every setting in the wire schema of GET /api/key, described', () => {
    const settings = ApiKeySchema.properties.settings.properties as Record<string, { description?: string }>;
    for (const d of SETTINGS) {
      const field = d.keyOnly ? ApiKeySchema.properties[d.field as 'expiresAt'] : settings[d.field];
      assert.ok(field, `${d.field} on the wire`);
      if (!d.keyOnly) assert.equal(field.description, `${d.help} (${d.unit})`);
    }
    assert.deepEqual(
      Object.keys(settings),
      OWNER_SETTINGS.map((d) => d.field),
    );
    assert.deepEqual(Object.keys(ApiKeySchema.properties.ownerDefaults.properties), Object.keys(settings));
    for (const d of SETTINGS.filter((x) => x.kind === 'count'))
      assert.ok(d.field in ApiKeySchema.properties.limits.properties, `limits.${d.field}`);
  });

  it('gives every setting a CLI flag with its help line, and a row in the docs table', () => {
    const docs = readFileSync(new URL('../../docs/keys.md', import.meta.url), 'utf8');
    assert.ok(docs.includes(limitsDocTable()), 'docs/keys.md limits table is out of date: run npm run docs:settings');
    const rows = limitsDocTable().split('\n').slice(2);
    assert.equal(rows.length, SETTINGS.length);
    for (const [i, d] of SETTINGS.entries()) {
      assert.deepEqual(KEYS_FLAGS[d.flag], { type: 'string' }, `--${d.flag}`);
      const line = KEYS_HELP.split('\n').find((l) => l.startsWith(`  --${d.flag} ${d.flagValue} `));
      assert.ok(line?.endsWith(` ${d.help}`), `help line of --${d.flag}: ${line}`);
      assert.ok(rows[i]?.includes(`\`--${d.flag} ${d.flagValue}\``) && rows[i]?.includes(`\`${d.field}\``), rows[i]);
    }
  });

  it('stores every setting an operator types on a key, and every owner setting as a default', async () => {
    const made = await cli(['create', '--owner', 'tabled', ...SETTINGS.flatMap((d) => [`--${d.flag}`, d.example])]);
    assert.equal(made.code, 0, made.printed);
    const [key] = await new Accounts(db).keyViews('tabled');
    assert.ok(key);
    for (const d of SETTINGS) {
      const stored = d.keyOnly ? key[d.field as 'expiresAt'] : key.settings[d.field as keyof typeof key.settings];
      assert.notEqual(stored, null, `${d.field} from --${d.flag} ${d.example}`);
    }
    assert.ok(key.limits, 'held to them');
    const owner = await cli([
      'owner-limits',
      '--owner',
      'tabled',
      ...OWNER_SETTINGS.flatMap((d) => [`--${d.flag}`, d.example]),
    ]);
    assert.equal(owner.code, 0, owner.printed);
    const [after] = await new Accounts(db).keyViews('tabled');
    for (const d of OWNER_SETTINGS) assert.notEqual(after?.ownerDefaults[d.field], null, `owner default ${d.field}`);
    // "none" on a key lifts every owner default it has one for (a period limits nothing itself).
    const lifted = SETTINGS.filter((d) => d.kind !== 'period');
    const none = await cli(['update', key.id, ...lifted.flatMap((d) => [`--${d.flag}`, 'none'])]);
    assert.equal(none.code, 0, none.printed);
    const [free] = await new Accounts(db).keyViews('tabled');
    assert.equal(free?.limits, undefined, `no limit left: ${JSON.stringify(free?.limits)}`);
    // "default" on a key goes back to the owner's for every setting.
    const back = await cli(['update', key.id, ...SETTINGS.flatMap((d) => [`--${d.flag}`, 'default'])]);
    assert.equal(back.code, 0, back.printed);
    const [reset] = await new Accounts(db).keyViews('tabled');
    for (const d of OWNER_SETTINGS) assert.equal(reset?.settings[d.field], null, `${d.field} back to the default`);
  });

  it('refuses a count past its bounds, naming the setting and the rule, and writes nothing', async () => {
    const accounts = new Accounts(db);
    for (const d of SETTINGS.filter((x) => x.kind === 'count')) {
      const max = d.max ?? 0;
      await assert.rejects(
        accounts.createKey('bounded', { [d.field]: max + 1 }),
        (e: unknown) =>
          e instanceof ValidationError && e.message.includes(`${d.field}: must be a whole number from 0 to ${max}`),
      );
      await assert.rejects(
        accounts.updateOwnerLimits('tabled', { [d.field]: 0 }),
        new RegExp(`${d.field}: must be a whole number from 1 to ${max}`),
      );
    }
    assert.deepEqual(await accounts.keyViews('bounded'), []);
  });
});
