// `mediaplane credits add --owner X --usd N` and `mediaplane credits show --owner X`.
// Each action is one SQL statement on the Queryable it is given (no transaction), so it
// works on the embedded database through the running server as well as directly.

import type { Queryable } from '../db/index.ts';
import { Ledger } from '../llm/ledger.ts';
import { parseCommandLine, UsageError, type CommandFlags, type ParsedArgs } from './args.ts';

export const CREDITS_HELP = `Usage:
  ./mediaplane credits add --owner NAME --usd AMOUNT   add AMOUNT USD to NAME's balance (written to the ledger)
  ./mediaplane credits show --owner NAME               print NAME's balance and last ledger entries`;

interface Out {
  write(s: string): unknown;
}

export const CREDITS_FLAGS: CommandFlags = {
  owner: { type: 'string' },
  usd: { type: 'string' },
  note: { type: 'string' },
};

/** Runs `credits ...` (argv without the word `credits`); resolves to the exit code. */
export async function runCreditsCommand(
  argv: string[],
  deps: { db: Queryable; stdout?: Out; stderr?: Out },
): Promise<number> {
  let args: ParsedArgs;
  try {
    args = parseCommandLine(argv, CREDITS_FLAGS);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    (deps.stderr ?? process.stderr).write(`${e.message}\n${CREDITS_HELP}\n`);
    return 2;
  }
  return creditsCommand(args, deps);
}

/** Runs `credits ...` as the command line parsed it (cli/index.ts); resolves to the exit code. */
export async function creditsCommand(
  args: ParsedArgs,
  deps: { db: Queryable; stdout?: Out; stderr?: Out },
): Promise<number> {
  const out = deps.stdout ?? process.stdout;
  const err = deps.stderr ?? process.stderr;
  const [sub, ...extra] = args.positionals;
  if (args.help || (sub === undefined && Object.keys(args.flags).length === 0)) {
    out.write(`${CREDITS_HELP}\n`);
    return args.help ? 0 : 2;
  }
  const bad = extra.map((a) => `unexpected argument ${a}`);
  const owner = stringFlag(args, 'owner');
  if (sub !== 'add' && sub !== 'show') bad.push(`unknown action ${sub ?? '(none)'}: use add or show`);
  if (!owner) bad.push('--owner is required');
  const usdText = stringFlag(args, 'usd');
  const usd = Number(usdText);
  if (sub === 'add' && (usdText === undefined || !/^\d+(\.\d+)?$/.test(usdText.trim()) || !(usd > 0) || usd > 1e9))
    bad.push('--usd: must be a positive amount in USD, e.g. 5 or 0.25');
  if (bad.length > 0 || !owner) {
    err.write(`${bad.join('\n')}\n${CREDITS_HELP}\n`);
    return 2;
  }
  const ledger = new Ledger(deps.db);
  if (sub === 'add') {
    const note = stringFlag(args, 'note');
    const r = await ledger.credit({ owner, usd, ...(note ? { note } : {}) });
    if (!r) {
      err.write(`unknown owner ${owner}: create it first (./mediaplane keys create --owner ${owner})\n`);
      return 1;
    }
    out.write(`added ${usdText} USD to ${owner}; balance ${trim(r.balanceUsd)} USD\n`);
    return 0;
  }
  out.write(`${owner}: balance ${trim(await ledger.balance(owner))} USD\n`);
  for (const e of await ledger.entries(owner, 20)) {
    out.write(
      `${e.createdAt}  ${e.kind.padEnd(6)} ${e.status.padEnd(8)} ${String(e.amountUsd).padStart(14)} USD  ${e.model ?? e.note ?? ''}\n`,
    );
  }
  return 0;
}

function stringFlag(args: ParsedArgs, name: string): string | undefined {
  const v = args.flags[name];
  return typeof v === 'string' ? v : undefined;
}

function trim(decimal: string): string {
  return decimal.includes('.') ? decimal.replace(/0+$/, '').replace(/\.$/, '') : decimal;
}
