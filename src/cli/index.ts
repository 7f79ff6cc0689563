import type { Config } from '../config/index.ts';
import { loadConfig, settingsHelp } from '../config/index.ts';
import { connectDbSocket, dbSocketPath, openDb, type Queryable } from '../db/index.ts';
import { ensurePrivateDir } from '../lib/private-dir.ts';
import { createLogger, resolveLogFormat, type Logger } from '../lib/log.ts';
import { startBanner } from './banner.ts';
import { parseCommandLine, type CommandFlags, type ParsedArgs } from './args.ts';
import { exitCodeOf, startingUp } from './startup.ts';
import { assertPortFree } from '../lib/http-server.ts';
import { keysCommand, KEYS_FLAGS, KEYS_HELP } from './keys.ts';
import { creditsCommand, CREDITS_FLAGS } from './credits.ts';
import { runAgentCommand } from './agent.ts';
import { buildConsoleIfStale } from './console-build.ts';
import { runTranscodeCommand } from './transcode.ts';
import { tasksCommand, TASKS_FLAGS, TASKS_HELP } from './tasks.ts';
import { sampleCommand, SAMPLE_FLAGS, SAMPLE_HELP } from './sample.ts';
import { modelsCommand, MODELS_FLAGS, MODELS_HELP } from './models.ts';
import { listLocalModels, orchestratorHelp, TuningError } from '../llm/orchestrator/index.ts';

interface RoleFlags {
  api: boolean;
  worker: boolean;
  gateway?: boolean;
  orchestrator?: boolean;
  /** Live ingest (RTMP and SRT listeners, the ladders). */
  ingest?: boolean;
}

/** A listening ingest, for the banner. */
interface ListeningIngest {
  protocol: 'rtmp' | 'srt';
  port: number;
}

/** What the composition root lends the CLI (passed in, so the CLI imports no wiring). */
export interface Roles {
  version: string;
  startRoles(
    config: Config,
    roles: RoleFlags,
    log?: Logger,
  ): Promise<{ url?: string; ingest?: readonly ListeningIngest[]; stop(): Promise<void> }>;
  stopOnSignals(running: { stop(): Promise<void> }, log: Logger): Promise<void>;
  /** `mediaplane orchestrator`: the orchestrator alone, its options mapped from `config`. */
  startOrchestrator(config: Config, log: Logger): Promise<{ close(): Promise<void> }>;
}

interface ParsedCommand {
  summary: string;
  help: string;
  flags?: CommandFlags;
  run(args: ParsedArgs, roles: Roles): Promise<number>;
}

/** A command that parses its own arguments (everything after its name), --help included. */
interface RawCommand {
  summary: string;
  runRaw(argv: string[]): Promise<number>;
}

type Command = ParsedCommand | RawCommand;

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
    await privateDataDir(cfg);
  }
  const db = await openDb({ databaseUrl: cfg.databaseUrl, dataDir: cfg.dataDir, poolSize: 2 });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/**
 * Creates the data dir 0700, or makes it so, for a command that writes in it without a
 * server (issue #25: the embedded database's files are 0666; the folder is their guard).
 */
function privateDataDir(cfg: Config): Promise<void> {
  return ensurePrivateDir(cfg.dataDir, (msg) => process.stderr.write(`mediaplane: ${msg}\n`));
}

function serve(roles: RoleFlags): ParsedCommand['run'] {
  return async (args, r) => {
    const cfg = config(args);
    const format = resolveLogFormat(cfg.logFormat);
    const log = createLogger({ level: cfg.logLevel, format });
    const running = await startingUp({ config: cfg, log }, async () => {
      // A port another program holds stops start-up before anything starts for nothing.
      if (roles.api || roles.gateway) await assertPortFree(cfg.host, cfg.port);
      if (roles.api) buildConsoleIfStale(log);
      return r.startRoles(cfg, roles, log);
    });
    if (format === 'pretty') {
      const invocation = { execPath: process.execPath, script: process.argv[1] ?? '', cwd: process.cwd() };
      // What the local orchestrator found at start (it reads the same folder): none gets a hint.
      const models = roles.orchestrator ? await listLocalModels(cfg.modelsDir) : undefined;
      process.stdout.write(
        startBanner({
          version: r.version,
          url: running.url,
          roles,
          config: cfg,
          invocation,
          models,
          ingest: running.ingest,
        }),
      );
    }
    await r.stopOnSignals(running, log);
    return 0;
  };
}

const SETTINGS_NOTE = 'Settings (environment variable or flag):';

const commands: Record<string, Command> = {
  start: {
    summary: 'run every role in one process: API, worker(s), gateway, a local orchestrator',
    help: `Usage: ./mediaplane start [--port 8080] [--data-dir ./data] [settings]\n\nRuns the transcoding API under /api, the worker(s), the LLM gateway and a local orchestrator\non one port, with the embedded database unless DATABASE_URL is set.\n\n${SETTINGS_NOTE}\n${settingsHelp()}`,
    run: serve({ api: true, worker: true, gateway: true, orchestrator: true, ingest: true }),
  },
  ingest: {
    summary: 'run live ingest: RTMP and SRT listeners, the live ladders and the API that plays them',
    help: `Usage: ./mediaplane ingest [settings]\n\nRuns the RTMP listener (MEDIAPLANE_RTMP_PORT, 0 turns it off), the SRT listener\n(MEDIAPLANE_SRT_PORT, 0 turns it off), one ladder per live stream, and the HTTP API that serves\ntheir low-latency HLS, without workers. \`start\` runs ingest too; \`api\` does not.\n\n${SETTINGS_NOTE}\n${settingsHelp(['server', 'database', 'live', 'transcode'])}`,
    run: serve({ api: true, worker: false, ingest: true }),
  },
  api: {
    summary: 'run the HTTP API alone (start several against one PostgreSQL)',
    help: `Usage: ./mediaplane api [settings]\n\nRuns the HTTP API without workers. Several API processes can share one PostgreSQL\n(DATABASE_URL).\n\n${SETTINGS_NOTE}\n${settingsHelp(['server', 'database', 'tasks'])}`,
    run: serve({ api: true, worker: false }),
  },
  worker: {
    summary: 'run a worker alone (start several against one PostgreSQL)',
    help: `Usage: ./mediaplane worker [settings]\n\nClaims tasks from the database and runs them. Several workers can share one PostgreSQL\n(DATABASE_URL); a task whose worker dies is taken over when its lease expires.\n\n${SETTINGS_NOTE}\n${settingsHelp(['server', 'database', 'tasks', 'transcode', 'storage'])}`,
    run: serve({ api: false, worker: true }),
  },
  gateway: {
    summary: 'run the LLM gateway alone (POST /llm, /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models)',
    help: `Usage: ./mediaplane gateway [settings]\n\nServes POST /llm, POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings,\nGET /v1/models and GET /api/ledger, forwarding to the orchestrators in MEDIAPLANE_GATEWAY_ORCHESTRATORS and those that register themselves.\n\n${SETTINGS_NOTE}\n${settingsHelp(['server', 'database', 'llm'])}`,
    run: serve({ api: false, worker: false, gateway: true }),
  },
  orchestrator: {
    summary: 'run an LLM orchestrator alone (loads models, serves gateways)',
    help: orchestratorHelp(),
    run: async (args, r) => {
      const cfg = config(args);
      const log = createLogger({ level: cfg.logLevel, format: resolveLogFormat(cfg.logFormat) });
      try {
        const orch = await startingUp({ config: cfg, log }, () => r.startOrchestrator(cfg, log));
        await r.stopOnSignals({ stop: () => orch.close() }, log);
        return 0;
      } catch (err) {
        if (err instanceof TuningError) {
          process.stderr.write(`mediaplane orchestrator: ${err.message}\n`);
          return 1;
        }
        throw err;
      }
    },
  },
  credits: {
    summary: 'add or show LLM credit of an owner (USD)',
    help: 'Usage:\n  ./mediaplane credits add --owner NAME --usd N [--note TEXT]\n  ./mediaplane credits show --owner NAME\n\nWorks whether or not the server is running.',
    flags: CREDITS_FLAGS,
    run: (args) => withAdminDbFor(args, (db) => creditsCommand(args, { db })),
  },
  agent: {
    summary: "print the service's DID to delegate a Storacha space to",
    help: 'Usage: ./mediaplane agent did\n\nPrints the did:key users delegate their Storacha space to (storage type dweb.storage).',
    run: async (args) => {
      const cfg = config(args);
      // `agent did` keeps the service's identity key in the data dir.
      if (args.positionals[0] === 'did') await privateDataDir(cfg);
      return runAgentCommand(args.positionals, { config: cfg });
    },
  },
  transcode: {
    summary: 'transcode one file or URL to a local folder, no server',
    runRaw: runTranscodeCommand,
  },
  sample: {
    summary: 'make a short test video with ffmpeg and upload it as an asset (something to try the service with)',
    help: SAMPLE_HELP,
    flags: SAMPLE_FLAGS,
    run: (args) => sampleCommand(args, { config: config(args) }),
  },
  tasks: {
    summary: 'follow a task as it runs, with a progress bar (tasks watch ID)',
    help: TASKS_HELP,
    flags: TASKS_FLAGS,
    run: (args) => tasksCommand(args, { config: config(args) }),
  },
  models: {
    summary: 'pull text models from the model hub (resumed, sha256-checked), list and remove them',
    help: MODELS_HELP,
    flags: MODELS_FLAGS,
    run: (args) => modelsCommand(args, { config: config(args) }),
  },
  keys: {
    summary: 'create, update, list and revoke API keys and their limits',
    help: KEYS_HELP,
    flags: KEYS_FLAGS,
    run: (args) => withAdminDbFor(args, (db) => keysCommand(args, db)),
  },
};

function withAdminDbFor(args: ParsedArgs, fn: (db: Queryable) => Promise<number>): Promise<number> {
  return withAdminDb(config(args), fn);
}

function usage(version: string): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `mediaplane ${version}: self-hostable video transcoding and LLM gateway\n\nUsage: ./mediaplane <command> [--help]\n\nCommands:\n${lines.join('\n')}\n`;
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
  if ('runRaw' in cmd) return cmd.runRaw(rest);
  try {
    const args = parseCommandLine(rest, cmd.flags);
    if (args.help) {
      process.stdout.write(`${cmd.help}\n`);
      return 0;
    }
    return await cmd.run(args, roles);
  } catch (err) {
    // One line and an exit code for what a person can act on (cli/startup.ts); anything else
    // is a bug and keeps its stack trace.
    const code = exitCodeOf(err);
    if (code === undefined || !(err instanceof Error)) throw err;
    process.stderr.write(`mediaplane ${name}: ${err.message}\n`);
    return code;
  }
}
