import { spawn, spawnSync } from 'node:child_process';
import { CancelledError, InternalError, TimeoutError } from '../lib/errors.ts';

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
/** How setpriv says that it could not execute the command (exit status 127). */
const SETPRIV_EXEC_FAILED = 'setpriv: failed to execute';

/**
 * Runs a child process to its end. Abort (cancel, shutdown) and the timeout kill it with
 * SIGKILL: a cancelled job's half-written outputs are thrown away, so there is nothing
 * for ffmpeg to finish cleanly.
 *
 * A child dies with its worker, however the worker ends (issue #20: an ffmpeg that outlived
 * a SIGKILLed worker ran on for 27 s beside the next worker's, on the same task). Losing its
 * pipes does not stop ffmpeg, so the kernel is asked: `setpriv --pdeathsig KILL` (util-linux)
 * sets the parent-death signal and then executes the command, keeping its pid. The signal
 * follows the thread that spawned the child: here always the main thread, which lives as long
 * as the process. Each child also leads a process group of its own, so a kill reaches
 * whatever it started, and a Ctrl-C at the worker's terminal reaches the worker alone, which
 * then decides (finish within the shutdown grace, or kill). Where setpriv is missing, the
 * next worker on the same scratch root kills what is left (tasks/scratch.ts).
 */
export function runProcess(cmd: string, args: string[], opts: RunOptions): Promise<RunResult> {
  if (opts.signal.aborted) return Promise.reject(new CancelledError('cancelled', { cause: opts.signal.reason }));
  return new Promise((resolve, reject) => {
    const wrapped = pdeathsigWorks();
    const [file, argv] = wrapped ? ['setpriv', ['--pdeathsig', 'KILL', '--', cmd, ...args]] : [cmd, args];
    const child = spawn(file, argv, {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
    });
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

let pdeathsig: boolean | undefined;

/** Whether `setpriv --pdeathsig` runs here (Linux with util-linux 2.33 or later); asked once. */
export function pdeathsigWorks(): boolean {
  pdeathsig ??=
    process.platform === 'linux' &&
    spawnSync('setpriv', ['--pdeathsig', 'KILL', '--', 'true'], { stdio: 'ignore', timeout: 5000 }).status === 0;
  return pdeathsig;
}

/** SIGKILLs the child's process group (the child leads it: spawned detached), else the child. */
function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}
