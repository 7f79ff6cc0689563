// `mediaplane credits add --owner X --usd N` and `mediaplane credits show --owner X`.
// Each action is one SQL statement on the Queryable it is given (no transaction), so it
// works on the embedded database through the running server as well as directly.

import type { Queryable } from '../db/index.ts';
import { Ledger } from '../llm/ledger.ts';

export const CREDITS_HELP = `Usage:
  mediaplane credits add --owner NAME --usd AMOUNT   add AMOUNT USD to NAME's balance (written to the ledger)
  mediaplane credits show --owner NAME               print NAME's balance and last ledger entries`;

interface Out {
  write(s: string): unknown;
}

function flags(argv: string[]): { sub: string | undefined; values: Map<string, string>; bad: string[] } {
  const values = new Map<string, string>();
  const bad: string[] = [];
  let sub: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (!a.startsWith('--')) {
      if (sub === undefined) sub = a;
      else bad.push(`unexpected argument ${a}`);
      continue;
    }
    const eq = a.indexOf('=');
    const name = a.slice(2, eq === -1 ? undefined : eq);
    const value = eq === -1 ? argv[++i] : a.slice(eq + 1);
    if (name !== 'owner' && name !== 'usd' && name !== 'note') bad.push(`unknown flag --${name}`);
    else if (value === undefined) bad.push(`--${name} needs a value`);
    else values.set(name, value);
  }
  return { sub, values, bad };
}

/** Runs `credits ...` (argv without the word `credits`); resolves to the exit code. */
export async function runCreditsCommand(
  argv: string[],
  deps: { db: Queryable; stdout?: Out; stderr?: Out },
): Promise<number> {
  const out = deps.stdout ?? process.stdout;
  const err = deps.stderr ?? process.stderr;
  if (argv.includes('--help') || argv.includes('-h') || argv.length === 0) {
    out.write(`${CREDITS_HELP}\n`);
    return argv.length === 0 ? 2 : 0;
  }
  const { sub, values, bad } = flags(argv);
  const owner = values.get('owner');
  if (sub !== 'add' && sub !== 'show') bad.push(`unknown action ${sub ?? '(none)'}: use add or show`);
  if (!owner) bad.push('--owner is required');
  const usdText = values.get('usd');
  const usd = Number(usdText);
  if (sub === 'add' && (usdText === undefined || !/^\d+(\.\d+)?$/.test(usdText.trim()) || !(usd > 0) || usd > 1e9))
    bad.push('--usd: must be a positive amount in USD, e.g. 5 or 0.25');
  if (bad.length > 0 || !owner) {
    err.write(`${bad.join('\n')}\n${CREDITS_HELP}\n`);
    return 2;
  }
  const ledger = new Ledger(deps.db);
  if (sub === 'add') {
    const note = values.get('note');
    const r = await ledger.credit({ owner, usd, ...(note ? { note } : {}) });
    if (!r) {
      err.write(`unknown owner ${owner}: create it first (mediaplane keys create --owner ${owner})\n`);
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

function trim(decimal: string): string {
  return decimal.includes('.') ? decimal.replace(/0+$/, '').replace(/\.$/, '') : decimal;
}
