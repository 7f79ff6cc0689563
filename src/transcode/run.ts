import { setPriority } from 'node:os';
import { CancelledError, InternalError, TimeoutError } from '../lib/errors.ts';
import { killGroup, SETPRIV_EXEC_FAILED, spawnTied } from '../lib/tied-process.ts';
import { assertGuardedInputs } from './media-input.ts';

/** ffmpeg's lead for a run of ours: no banner, no keyboard, errors only, outputs overwritten. */
export const FFMPEG_QUIET: readonly string[] = ['-hide_banner', '-nostdin', '-y', '-v', 'error'];

export interface RunOptions {
  signal: AbortSignal;
  timeoutMs: number;
  /** Each chunk of stdout, as it comes (ffmpeg's -progress output). */
  onStdout?(chunk: Buffer): void;
  /** Keep all of stdout (ffprobe's JSON); otherwise only stderr's tail is kept. */
  collectStdout?: boolean;
  cwd?: string;
}

export interface RunResult {
  code: number;
  stdout: string;
  /** The last 8 KiB of stderr: enough for ffmpeg's error lines, bounded for a chatty decoder. */
  stderrTail: string;
}

const TAIL = 8192;

// Live takes priority over VOD on a node that runs both: a live ladder must keep real time, a
// VOD encode may take longer. The niceness is the OS's per-process state, so it is set for the
// process (by main.ts, when it starts live ingest beside a worker), not passed through every job.
let vodNiceness = 0;

/** The niceness (0-19) every ffmpeg and ffprobe that runProcess starts gets from now on. */
export function setVodNiceness(niceness: number): void {
  vodNiceness = Math.max(0, Math.min(19, Math.round(niceness)));
}

function lowerPriority(pid: number | undefined): void {
  if (vodNiceness === 0 || pid === undefined) return;
  try {
    // setpriv execs the command in place (same pid), so the priority holds for ffmpeg itself.
    setPriority(pid, vodNiceness);
  } catch {
    // Already gone.
  }
}

/**
 * Runs a child process to its end. Abort (cancel, shutdown) and the timeout kill it with
 * SIGKILL: a cancelled job's half-written outputs are thrown away, so there is nothing
 * for ffmpeg to finish cleanly.
 *
 * A child dies with its worker, however the worker ends (issue #20: an ffmpeg that outlived
 * a SIGKILLed worker ran on for 27 s beside the next worker's, on the same task): it is started
 * with lib/tied-process.ts, in a process group of its own, so a Ctrl-C at the worker's terminal
 * reaches the worker alone, which then decides (finish within the shutdown grace, or kill).
 * Where setpriv is missing, the next worker on the same scratch root kills what is left
 * (tasks/scratch.ts).
 *
 * It runs ffmpeg and ffprobe, and only with inputs opened through media-input.ts's inputArgs.
 */
export function runProcess(cmd: string, args: string[], opts: RunOptions): Promise<RunResult> {
  try {
    assertGuardedInputs(args);
  } catch (err) {
    return Promise.reject(err);
  }
  if (opts.signal.aborted) return Promise.reject(new CancelledError('cancelled', { cause: opts.signal.reason }));
  return new Promise((resolve, reject) => {
    const { child, wrapped } = spawnTied(cmd, args, { cwd: opts.cwd });
    lowerPriority(child.pid);
    let stdout = '';
    let stderr = '';
    let stopped: Error | undefined;
    const stop = (err: Error): void => {
      stopped ??= err;
      killGroup(child.pid);
    };
    const onAbort = (): void => stop(new CancelledError('cancelled', { cause: opts.signal.reason }));
    opts.signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(
      () => stop(new TimeoutError(`${cmd} ran longer than ${Math.round(opts.timeoutMs / 1000)} s`)),
      opts.timeoutMs,
    );
    child.stdout.on('data', (c: Buffer) => {
      if (opts.collectStdout) stdout += c.toString('utf8');
      opts.onStdout?.(c);
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr = (stderr + c.toString('utf8')).slice(-TAIL);
    });
    const finish = (): void => {
      clearTimeout(timer);
      opts.signal.removeEventListener('abort', onAbort);
    };
    child.on('error', (err) => {
      finish();
      reject(new InternalError(`cannot run ${cmd}: ${err.message}`, { cause: err }));
    });
    child.on('close', (code) => {
      finish();
      if (stopped) reject(stopped);
      else if (wrapped && code === 127 && stderr.startsWith(SETPRIV_EXEC_FAILED))
        // What spawn's 'error' event says without the wrapper: the command itself cannot run.
        reject(new InternalError(`cannot run ${cmd}: ${stderr.trim()}`));
      else resolve({ code: code ?? -1, stdout, stderrTail: stderr });
    });
  });
}
