import { flagName, settings } from '../config/index.ts';

// Command lines look like `mediaplane <command> [sub] [positionals] [--flag value]`. Flags
// that name a setting (`--port 9000`, `--data-dir=/x`) go to the config; the command's own
// flags are declared by the command. An unknown flag is an error that names it.

export interface ParsedArgs {
  positionals: string[];
  /** Setting flags, keyed by setting key (`dataDir`). */
  settingFlags: Record<string, string>;
  /** The command's own flags, keyed by flag name without dashes. */
  flags: Record<string, string | boolean>;
  help: boolean;
}

const settingByFlag = new Map(Object.keys(settings).map((k) => [flagName(k).slice(2), k]));

export class UsageError extends Error {}

/** `own` lists the command's flags: true for a boolean flag, false for one taking a value. */
export function parseArgs(argv: string[], own: Record<string, boolean> = {}): ParsedArgs {
  const out: ParsedArgs = { positionals: [], settingFlags: {}, flags: {}, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--help' || arg === '-h') {
      out.help = true;
      continue;
    }
    if (!arg.startsWith('--')) {
      out.positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    const inline = eq === -1 ? undefined : arg.slice(eq + 1);
    const isBool = own[name];
    if (isBool === true) {
      out.flags[name] = inline === undefined ? true : !['false', '0', 'no'].includes(inline);
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw new UsageError(`--${name} needs a value`);
    const setting = settingByFlag.get(name);
    if (isBool === false) out.flags[name] = value;
    else if (setting) out.settingFlags[setting] = value;
    else throw new UsageError(`unknown flag --${name} (see --help)`);
  }
  return out;
}
