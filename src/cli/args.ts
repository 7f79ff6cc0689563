import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { flagName, settings } from '../config/index.ts';
import { MediaplaneError } from '../lib/errors.ts';

// Command lines look like `mediaplane <command> [sub] [positionals] [--flag value]`. Flags
// that name a setting (`--port 9000`, `--data-dir=/x`) go to the config; the command's own
// flags are declared by the command. An unknown flag is an error that names it. This is the
// one parser of every command (issue #16), built on node:util's: it splits the words, and the
// checks below give every command the same messages.

/** A command's own flags, as node:util declares them (`short` included). */
export type CommandFlags = Record<string, { type: 'string' | 'boolean'; short?: string }>;

export interface ParsedArgs {
  positionals: string[];
  /** Setting flags, keyed by setting key (`dataDir`). */
  settingFlags: Record<string, string>;
  /** The command's own flags, keyed by flag name without dashes. */
  flags: Record<string, string | boolean>;
  help: boolean;
}

/** A command line the CLI cannot run: it prints the message and exits 2. */
export class UsageError extends MediaplaneError {
  readonly code = 'usage';
  readonly statusCode = 400;
}

const settingByFlag = new Map(Object.keys(settings).map((k) => [flagName(k).slice(2), k]));
const settingOptions: ParseArgsOptionsConfig = Object.fromEntries(
  [...settingByFlag.keys()].map((name) => [name, { type: 'string' }]),
);
const HELP: ParseArgsOptionsConfig = { help: { type: 'boolean', short: 'h' } };
/** What an own switch given a value (`--json=no`) reads as false. */
const FALSE_WORDS = ['false', '0', 'no'];

interface OptionToken {
  name: string;
  rawName: string;
  value: string | undefined;
}

export function parseCommandLine(argv: readonly string[], own: CommandFlags = {}): ParsedArgs {
  // Not strict: node:util would refuse with its own wording; unknown names are refused below.
  const { tokens } = parseArgs({
    args: argv,
    options: { ...settingOptions, ...own, ...HELP },
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const out: ParsedArgs = { positionals: [], settingFlags: {}, flags: {}, help: false };
  for (const t of tokens) {
    if (t.kind === 'positional') out.positionals.push(t.value);
    else if (t.kind === 'option') addOption(out, t, own);
  }
  return out;
}

function addOption(out: ParsedArgs, t: OptionToken, own: CommandFlags): void {
  if (t.name === 'help') {
    out.help = true;
    return;
  }
  const spec = own[t.name];
  const setting = settingByFlag.get(t.name);
  if (!spec && !setting) throw new UsageError(`unknown flag ${t.rawName} (see --help)`);
  if (spec?.type === 'boolean') {
    out.flags[t.name] = t.value === undefined || !FALSE_WORDS.includes(t.value);
    return;
  }
  if (t.value === undefined) throw new UsageError(`${t.rawName} needs a value`);
  if (spec) out.flags[t.name] = t.value;
  else if (setting) out.settingFlags[setting] = t.value;
}
