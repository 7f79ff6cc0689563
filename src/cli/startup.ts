import { type Config, ConfigError, flagName, settings } from '../config/index.ts';
import { EmbeddedDbLockedError } from '../db/index.ts';
import { MediaplaneError } from '../lib/errors.ts';
import type { Logger } from '../lib/log.ts';
import { DirNotPrivateError } from '../lib/private-dir.ts';
import { TuningError } from '../llm/orchestrator/index.ts';
import { UsageError } from './args.ts';

// How a command that failed tells a person so: one line on stderr and an exit code. A server
// that cannot start is most often a setting away from starting (a port another program holds,
// a host that is not this machine's), so the line names the setting; what nobody foresaw is
// still one line, and its stack goes to the log at debug. A Node stack trace on a terminal
// says neither what went wrong nor what to do.

/** Start-up failed; the message is the one line to show, the cause is in the debug log. */
export class StartupError extends MediaplaneError {
  readonly code = 'startup_failed';
  readonly statusCode = 500;
  /** 2: a setting to change (as for a bad setting); 1: anything else. */
  readonly exitCode: 1 | 2;
  constructor(message: string, o: { exitCode: 1 | 2; cause: unknown }) {
    super(message, { cause: o.cause });
    this.exitCode = o.exitCode;
  }
}

/**
 * The exit code of a command that threw `err`, when its message says all a person needs: 2 when
 * the command could not run as given, 1 when it ran and was refused (a bad owner name, an
 * unknown key). Undefined for anything else: a bug, which keeps its stack trace.
 */
export function exitCodeOf(err: unknown): 1 | 2 | undefined {
  if (err instanceof StartupError) return err.exitCode;
  if (
    err instanceof UsageError ||
    err instanceof ConfigError ||
    err instanceof EmbeddedDbLockedError ||
    err instanceof DirNotPrivateError
  )
    return 2;
  if (err instanceof TuningError) return 1;
  if (err instanceof MediaplaneError && err.statusCode < 500) return 1;
  return undefined;
}

interface SystemError {
  code?: unknown;
  syscall?: unknown;
  port?: unknown;
  address?: unknown;
  message?: unknown;
}

const setting = (key: 'port' | 'host' | 'ingestHost' | 'rtmpPort' | 'srtPort') =>
  `${settings[key].env} (or ${flagName(key)})`;

/** The setting a port came from, and what its 0 means: the HTTP port's, or a live ingest's. */
function portSetting(port: number, config: Config): { key: 'port' | 'rtmpPort' | 'srtPort'; zero: string } {
  if (port !== config.port && port === config.rtmpPort) return { key: 'rtmpPort', zero: 'turns RTMP ingest off' };
  if (port !== config.port && port === config.srtPort) return { key: 'srtPort', zero: 'turns SRT ingest off' };
  return { key: 'port', zero: 'picks a free one' };
}

const hostOf = (err: SystemError, config: Config): string =>
  typeof err.address === 'string' ? err.address : config.host;

/** The line for a server that could not listen, naming the setting to change; undefined for other errors. */
function listenProblem(err: SystemError, config: Config): string | undefined {
  // TCP servers fail in listen(), the SRT ingest's UDP socket in bind().
  if (err.syscall !== 'listen' && err.syscall !== 'bind') return undefined;
  const port = typeof err.port === 'number' ? err.port : config.port;
  const where = `port ${port} on ${hostOf(err, config)}`;
  const from = portSetting(port, config);
  switch (err.code) {
    case 'EADDRINUSE':
      return `${where} is in use by another program (is mediaplane running already?): stop it, or choose another port with ${setting(from.key)}; 0 ${from.zero}`;
    case 'EACCES':
      return `${where} may not be opened by this user (ports below 1024 need privileges): choose another port with ${setting(from.key)}`;
    case 'EADDRNOTAVAIL':
      return `${hostOf(err, config)} is not an address of this machine: set ${setting(from.key === 'port' ? 'host' : 'ingestHost')} to one of its addresses, 127.0.0.1 for this machine only or 0.0.0.0 for every interface`;
    default:
      return undefined;
  }
}

/** An error's message on one line. */
function oneLine(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.replace(/\s*\n\s*/g, ' ').trim() || (err instanceof Error ? err.name : 'unknown error');
}

/**
 * Runs a server command's start-up. An error the CLI already explains goes on as it is
 * (exitCodeOf); any other becomes a StartupError: the line that names the setting to change
 * for a port or address that cannot be had, else the error's message, and the whole error is
 * logged at debug (MEDIAPLANE_LOG_LEVEL=debug shows its stack).
 */
export async function startingUp<T>(o: { config: Config; log: Logger }, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (err) {
    if (exitCodeOf(err) !== undefined) throw err;
    o.log.debug({ err }, 'start-up failed');
    const listen = listenProblem((typeof err === 'object' && err !== null ? err : {}) as SystemError, o.config);
    if (listen) throw new StartupError(listen, { exitCode: 2, cause: err });
    const hint = o.log.isLevelEnabled('debug') ? '' : ` (${settings.logLevel.env}=debug logs its stack trace)`;
    throw new StartupError(`could not start: ${oneLine(err)}${hint}`, { exitCode: 1, cause: err });
  }
}
