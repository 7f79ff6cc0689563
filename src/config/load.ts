import { MediaplaneError } from '../lib/errors.ts';
import { settings, type Config, type SettingKey } from './schema.ts';
import type { Setting } from './types.ts';

/**
 * A bad setting stops start-up; the message names the variable (or flag) and the rule. The
 * operator's mistake, not a client's: a 500 should one ever reach a wire.
 */
export class ConfigError extends MediaplaneError {
  readonly code = 'invalid_config';
  readonly statusCode = 500;
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.problems = problems;
  }
}

/** `dataDir` -> `--data-dir` */
export function flagName(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['0', 'false', 'no', 'off']);

function parseValue(s: Setting, raw: string): { value?: unknown; error?: string } {
  switch (s.type) {
    case 'string':
      return { value: raw };
    case 'bool': {
      const v = raw.trim().toLowerCase();
      if (TRUE.has(v)) return { value: true };
      if (FALSE.has(v)) return { value: false };
      return { error: 'must be true or false' };
    }
    case 'int':
    case 'number': {
      const n = Number(raw.trim());
      if (raw.trim() === '' || !Number.isFinite(n))
        return { error: `must be a ${s.type === 'int' ? 'whole ' : ''}number` };
      if (s.type === 'int' && !Number.isInteger(n)) return { error: 'must be a whole number' };
      if (s.min !== undefined && n < s.min) return { error: `must be >= ${s.min}` };
      if (s.max !== undefined && n > s.max) return { error: `must be <= ${s.max}` };
      if (s.type === 'number' && s.exclusiveMin !== undefined && n <= s.exclusiveMin)
        return { error: `must be > ${s.exclusiveMin}` };
      return { value: n };
    }
    case 'enum':
      return s.values.includes(raw) ? { value: raw } : { error: `must be one of ${s.values.join(', ')}` };
    case 'list':
      return {
        value: raw
          .split(',')
          .map((x) => x.trim())
          .filter((x) => x !== ''),
      };
  }
}

export interface LoadOptions {
  env?: NodeJS.ProcessEnv;
  /** Flags as parsed from the command line: `{ "port": "9000" }` keyed by setting key. */
  flags?: Partial<Record<string, string>>;
  /** Values set by code (tests, the composition root), applied last, not parsed. */
  overrides?: Partial<Record<SettingKey, unknown>>;
}

// Which settings each loaded config got from the environment, a flag or an override, rather
// than from its default. Kept beside the config (not in it) so the Config type stays the plain
// table of values; a rule such as "MAX_MODEL_LEN left at its default follows the model"
// needs to tell an explicit 8192 from the default 8192.
const explicitByConfig = new WeakMap<Config, ReadonlySet<SettingKey>>();

/**
 * The settings of a config made by loadConfig that were set explicitly (an empty value counts
 * as unset, as it does for the value); undefined for an object loadConfig did not make.
 */
export function explicitSettings(config: Config): ReadonlySet<SettingKey> | undefined {
  return explicitByConfig.get(config);
}

/**
 * Reads every setting from the environment and flags (flags win), checks each against its
 * rule and returns one frozen object. All problems are reported together.
 */
export function loadConfig(opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  const explicit = new Set<SettingKey>();
  for (const [key, s] of Object.entries(settings) as [string, Setting][]) {
    const flag = opts.flags?.[key];
    const raw = flag ?? env[s.env];
    const source = flag !== undefined ? flagName(key) : s.env;
    if (raw === undefined || (raw === '' && s.type !== 'string')) {
      out[key] = s.default;
      continue;
    }
    const { value, error } = parseValue(s, raw);
    if (error) problems.push(`${source}=${s.secret ? '***' : JSON.stringify(raw)}: ${error}`);
    else out[key] = value;
    explicit.add(key as SettingKey);
  }
  Object.assign(out, opts.overrides ?? {});
  for (const key of Object.keys(opts.overrides ?? {})) explicit.add(key as SettingKey);
  problems.push(...crossChecks(out));
  if (problems.length > 0) throw new ConfigError(problems);
  const config = Object.freeze(out) as Config;
  explicitByConfig.set(config, explicit);
  return config;
}

function crossChecks(c: Record<string, unknown>): string[] {
  const problems: string[] = [];
  if (typeof c.heartbeatMs === 'number' && typeof c.leaseMs === 'number' && c.heartbeatMs >= c.leaseMs) {
    problems.push(`MEDIAPLANE_HEARTBEAT_MS: must be less than MEDIAPLANE_LEASE_MS (${c.leaseMs})`);
  }
  if (typeof c.publicUrl === 'string' && !isBaseUrl(c.publicUrl)) {
    problems.push(
      `MEDIAPLANE_PUBLIC_URL=${JSON.stringify(c.publicUrl)}: must be an http(s) URL with no query or fragment (https://media.example.com)`,
    );
  }
  return problems;
}

function isBaseUrl(raw: string): boolean {
  try {
    const u = new URL(raw);
    return (u.protocol === 'http:' || u.protocol === 'https:') && !u.search && !u.hash && !u.username && !u.password;
  } catch {
    return false;
  }
}

/** The settings table as Markdown, for the README and `--help`. */
export function settingsTable(): string {
  const rows = Object.entries(settings as Record<string, Setting>).map(([key, s]) => {
    const dflt =
      s.defaultText ??
      (s.default === undefined
        ? '(unset)'
        : Array.isArray(s.default)
          ? s.default.join(',') || '(empty)'
          : String(s.default));
    const rule = s.type === 'enum' ? s.values.join(' \\| ') : s.type;
    return `| \`${s.env}\` | \`${flagName(key)}\` | ${rule} | ${dflt} | ${s.description} |`;
  });
  return ['| variable | flag | type | default | description |', '|---|---|---|---|---|', ...rows].join('\n');
}

/** Plain-text settings list for `--help`. */
export function settingsHelp(groups?: readonly Setting['group'][]): string {
  return Object.entries(settings as Record<string, Setting>)
    .filter(([, s]) => !groups || groups.includes(s.group))
    .map(([key, s]) => {
      const dflt = s.defaultText ?? (s.default === undefined ? 'unset' : String(s.default));
      return `  ${flagName(key).padEnd(30)} ${s.env}\n  ${''.padEnd(30)} ${s.description} (default: ${dflt})`;
    })
    .join('\n');
}
