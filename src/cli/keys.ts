import {
  Accounts,
  BUDGET_PERIODS,
  COUNT_SETTINGS,
  type KeyView,
  LIMIT_SETTINGS,
  type LimitDescriptor,
  type LimitKind,
  type LimitSettings,
} from '../accounts/index.ts';
import type { Queryable } from '../db/index.ts';
import { UsageError, type CommandFlags, type ParsedArgs } from './args.ts';

export const KEYS_HELP = `Usage:
  ./mediaplane keys create --owner NAME [LIMITS]   create a key; printed once, on a line of its own
  ./mediaplane keys update KEY_ID LIMITS           change a key's limits (those not given stay)
  ./mediaplane keys owner-limits --owner NAME [LIMITS]
                                                   set (or, without LIMITS, show) an owner's defaults
  ./mediaplane keys show KEY_ID                    a key's settings, its owner's defaults, its limits
  ./mediaplane keys list [--owner NAME] [--json]   list keys (id, owner, prefix, created, revoked, limits)
  ./mediaplane keys revoke KEY_ID                  revoke a key by its id

LIMITS ("per minute" is per MEDIAPLANE_RATE_WINDOW_MS):
${LIMIT_SETTINGS.map((d) => `  ${`--${d.flag} ${d.flagValue}`.padEnd(27)} ${d.help}`).join('\n')}
A key's setting overrides its owner's default. On a key, "none" lifts the owner's default (no
limit) and "default" goes back to it; on an owner, "none" removes the default.

Keys are stored only as a hash. These commands work whether or not the server is running; a
change reaches a running server within MEDIAPLANE_AUTH_CACHE_MS.`;

export const KEYS_FLAGS: CommandFlags = {
  owner: { type: 'string' },
  json: { type: 'boolean' },
  ...Object.fromEntries(LIMIT_SETTINGS.map((d) => [d.flag, { type: 'string' as const }])),
};

export async function keysCommand(args: ParsedArgs, db: Queryable): Promise<number> {
  const accounts = new Accounts(db);
  const [sub, ...rest] = args.positionals;
  const owner = typeof args.flags.owner === 'string' ? args.flags.owner : undefined;
  switch (sub) {
    case 'create': {
      if (!owner) throw new UsageError('keys create needs --owner NAME');
      const k = await accounts.createKey(owner, limitSettings(args, { forKey: true }));
      process.stderr.write(
        `created key ${k.id} for owner ${k.owner} (project ${k.projectId}); it is shown only once:\n`,
      );
      process.stdout.write(`${k.key}\n`);
      return 0;
    }
    case 'update':
      return update(accounts, args, rest[0]);
    case 'owner-limits':
      return ownerLimits(accounts, args, owner);
    case 'show': {
      const id = rest[0];
      if (!id) throw new UsageError('keys show needs the key id (see keys list)');
      const [view] = (await accounts.keyViews()).filter((k) => k.id === id);
      if (!view) {
        process.stderr.write(`no key with id ${id}\n`);
        return 1;
      }
      process.stdout.write(`${JSON.stringify(view, null, 2)}\n`);
      return 0;
    }
    case 'list':
      return list(accounts, args, owner);
    case 'revoke': {
      const id = rest[0];
      if (!id) throw new UsageError('keys revoke needs the key id (see keys list)');
      if (!(await accounts.revokeKey(id))) {
        process.stderr.write(`no live key with id ${id}\n`);
        return 1;
      }
      process.stderr.write(`revoked ${id}\n`);
      return 0;
    }
    default:
      throw new UsageError(`keys needs create, update, owner-limits, show, list or revoke\n\n${KEYS_HELP}`);
  }
}

async function update(accounts: Accounts, args: ParsedArgs, id: string | undefined): Promise<number> {
  if (!id) throw new UsageError('keys update needs the key id (see keys list)');
  const settings = limitSettings(args, { forKey: true });
  if (Object.keys(settings).length === 0) throw new UsageError(`keys update needs at least one limit\n\n${KEYS_HELP}`);
  if (!(await accounts.updateKey(id, settings))) {
    process.stderr.write(`no key with id ${id}\n`);
    return 1;
  }
  process.stderr.write(`updated ${id}\n`);
  return 0;
}

async function ownerLimits(accounts: Accounts, args: ParsedArgs, owner: string | undefined): Promise<number> {
  if (!owner) throw new UsageError('keys owner-limits needs --owner NAME');
  const settings = limitSettings(args, { forKey: false });
  if (!(await accounts.updateOwnerLimits(owner, settings))) {
    process.stderr.write(`no owner ${owner} (create a key for it first)\n`);
    return 1;
  }
  const [key] = await accounts.keyViews(owner);
  if (Object.keys(settings).length > 0) process.stderr.write(`updated the defaults of ${owner}\n`);
  process.stdout.write(`${JSON.stringify(key?.ownerDefaults ?? {}, null, 2)}\n`);
  return 0;
}

async function list(accounts: Accounts, args: ParsedArgs, owner: string | undefined): Promise<number> {
  const keys = await accounts.keyViews(owner);
  if (args.flags.json === true) {
    process.stdout.write(`${JSON.stringify(keys)}\n`);
    return 0;
  }
  for (const k of keys)
    process.stdout.write(
      `${k.id}  ${k.owner}  ${k.prefix}…  created ${k.createdAt.toISOString()}${k.revokedAt ? `  revoked ${k.revokedAt.toISOString()}` : ''}${limitsText(k)}\n`,
    );
  return 0;
}

function limitsText(k: KeyView): string {
  const l = k.limits;
  if (!l) return '';
  const parts = [
    ...COUNT_SETTINGS.map((d) => (l[d.field] === null ? '' : `${d.flag} ${l[d.field]}`)),
    l.budget ? `budget ${l.budget.usd} USD/${l.budget.period}` : '',
    l.models ? `models ${l.models.join(',')}` : '',
    l.expiresAt === null ? '' : `expires ${new Date(l.expiresAt).toISOString()}`,
  ].filter(Boolean);
  return `  [${parts.join(', ')}]`;
}

/** How each kind of flag reads a value other than "none" (where NONE_ON_KEY has one) and "default". */
const FLAG_VALUES: Record<
  LimitKind,
  (d: LimitDescriptor, v: string, forKey: boolean) => LimitSettings[keyof LimitSettings]
> = {
  count: (d, v) => {
    if (!/^\d+$/.test(v)) throw new UsageError(`--${d.flag}: a whole number, none or default (got ${v})`);
    return Number(v);
  },
  usd: (_d, v) => v,
  period: (d, v) => {
    const period = BUDGET_PERIODS.find((p) => p === v);
    if (!period) throw new UsageError(`--${d.flag}: ${BUDGET_PERIODS.join(', ')} or default (got ${v})`);
    return period;
  },
  models: (_d, v, forKey) =>
    !forKey && v === '*'
      ? null
      : v
          .split(',')
          .map((m) => m.trim())
          .filter(Boolean),
  date: (_d, v) => expiryDate(v),
};

/**
 * What "none" sets on a key, per kind: no limit, over the owner's default ('*' for the models:
 * every one). "default" sets null (the owner's), and on an owner both clear the default. A
 * period limits nothing itself: it has no "none".
 */
const NONE_ON_KEY: Record<LimitKind, LimitSettings[keyof LimitSettings] | undefined> = {
  count: 0,
  usd: '0',
  period: undefined,
  models: ['*'],
  date: null,
};

/** The limit flags given, as settings: "none" and "default" as the help says. */
function limitSettings(args: ParsedArgs, o: { forKey: boolean }): LimitSettings {
  const s: Record<string, unknown> = {};
  for (const d of LIMIT_SETTINGS as readonly LimitDescriptor[]) {
    const given = args.flags[d.flag];
    if (typeof given !== 'string') continue;
    const v = given.trim();
    const none = NONE_ON_KEY[d.kind];
    if (v === 'default' || (v === 'none' && none !== undefined)) s[d.field] = v === 'none' && o.forKey ? none : null;
    else s[d.field] = FLAG_VALUES[d.kind](d, v, o.forKey);
  }
  return s as LimitSettings;
}

/** An ISO date, or a duration from now: 30d, 12h, 45m, 90s. */
function expiryDate(v: string): Date {
  const d = /^(\d+)([dhms])$/.exec(v);
  if (d) {
    const unit = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1000 }[d[2] as 'd' | 'h' | 'm' | 's'];
    return new Date(Date.now() + Number(d[1]) * unit);
  }
  const at = new Date(v);
  if (Number.isNaN(at.getTime())) throw new UsageError(`--expires: an ISO date or a duration like 30d (got ${v})`);
  return at;
}
