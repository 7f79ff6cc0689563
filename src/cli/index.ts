import type { Config } from '../config/index.ts';
import { ConfigError, loadConfig, settingsHelp } from '../config/index.ts';
import { connectDbSocket, dbSocketPath, EmbeddedDbLockedError, openDb, type Queryable } from '../db/index.ts';
import { createLogger, type Logger } from '../lib/log.ts';
import { parseArgs, UsageError, type ParsedArgs } from './args.ts';
import { keysCommand, KEYS_HELP } from './keys.ts';

/** What the composition root lends the CLI (passed in, so the CLI imports no wiring). */
export interface Roles {
  version: string;
  startRoles(config: Config, roles: { api: boolean; worker: boolean }, log?: Logger): Promise<{ url?: string; stop(): Promise<void> }>;
  stopOnSignals(running: { stop(): Promise<void> }, log: Logger): Promise<void>;
}

interface Command {
  summary: string;
  help: string;
  flags?: Record<string, boolean>;
  run(args: ParsedArgs, roles: Roles): Promise<number>;
}

function config(args: ParsedArgs): Config {
  return loadConfig({ flags: args.settingFlags });
}

/**
 * A database handle for admin commands that works whether or not a server is running: the
 * server's socket when it holds the embedded database, else the database itself.
 */
export async function withAdminDb<T>(cfg: Config, fn: (db: Queryable) => Promise<T>): Promise<T> {
  if (!cfg.databaseUrl) {
    const remote = await connectDbSocket(dbSocketPath(cfg.dataDir));
    if (remote) return fn(remote);
  }
  const db = await openDb({ databaseUrl: cfg.databaseUrl, dataDir: cfg.dataDir, poolSize: 2 });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

function serve(roles: { api: boolean; worker: boolean }): Command['run'] {
  return async (args, r) => {
    const cfg = config(args);
    const log = createLogger({ level: cfg.logLevel });
    const running = await r.startRoles(cfg, roles, log);
    await r.stopOnSignals(running, log);
    return 0;
  };
}

const SETTINGS_NOTE = 'Settings (environment variable or flag):';

const commands: Record<string, Command> = {
  start: {
    summary: 'run every role in one process: API, worker(s), gateway, a local orchestrator',
    help: `Usage: mediaplane start [--port 8080] [--data-dir ./data] [settings]\n\nRuns the transcoding API under /api, the worker(s), the LLM gateway and a local orchestrator\non one port, with the embedded database unless DATABASE_URL is set.\n\n${SETTINGS_NOTE}\n${settingsHelp()}`,
    run: serve({ api: true, worker: true }),
  },
  api: {
    summary: 'run the HTTP API alone (start several against one PostgreSQL)',
    help: `Usage: mediaplane api [settings]\n\nRuns the HTTP API without workers. Several API processes can share one PostgreSQL\n(DATABASE_URL).\n\n${SETTINGS_NOTE}\n${settingsHelp(['server', 'database', 'tasks'])}`,
    run: serve({ api: true, worker: false }),
  },
  worker: {
    summary: 'run a worker alone (start several against one PostgreSQL)',
    help: `Usage: mediaplane worker [settings]\n\nClaims tasks from the database and runs them. Several workers can share one PostgreSQL\n(DATABASE_URL); a task whose worker dies is taken over when its lease expires.\n\n${SETTINGS_NOTE}\n${settingsHelp(['server', 'database', 'tasks', 'transcode', 'storage'])}`,
    run: serve({ api: false, worker: true }),
  },
  keys: {
    summary: 'create, list and revoke API keys',
    help: KEYS_HELP,
    flags: { owner: false, json: true },
    run: (args) => withAdminDbFor(args, (db) => keysCommand(args, db)),
  },
};

function withAdminDbFor(args: ParsedArgs, fn: (db: Queryable) => Promise<number>): Promise<number> {
  return withAdminDb(config(args), fn);
}

/** Adds a command (used by the other domains' wiring in main.ts). */
export function addCommand(name: string, cmd: Command): void {
  commands[name] = cmd;
}

function usage(version: string): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `mediaplane ${version}: self-hostable video transcoding and LLM gateway\n\nUsage: mediaplane <command> [--help]\n\nCommands:\n${lines.join('\n')}\n`;
}

export async function runCli(argv: string[], roles: Roles): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage(roles.version));
    return name ? 0 : 1;
  }
  if (name === '--version') {
    process.stdout.write(`${roles.version}\n`);
    return 0;
  }
  const cmd = commands[name];
  if (!cmd) {
    process.stderr.write(`mediaplane: unknown command ${JSON.stringify(name)}\n\n${usage(roles.version)}`);
    return 2;
  }
  try {
    const args = parseArgs(rest, cmd.flags);
    if (args.help) {
      process.stdout.write(`${cmd.help}\n`);
      return 0;
    }
    return await cmd.run(args, roles);
  } catch (err) {
    if (err instanceof UsageError || err instanceof ConfigError || err instanceof EmbeddedDbLockedError) {
      process.stderr.write(`mediaplane ${name}: ${err.message}\n`);
      return 2;
    }
    if (err instanceof Error && 'statusCode' in err && (err as { statusCode: number }).statusCode < 500) {
      process.stderr.write(`mediaplane ${name}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
