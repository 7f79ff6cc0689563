// Child processes that die with their parent, however the parent ends (issue #20: an ffmpeg that
// outlived a SIGKILLed worker ran on beside the next worker's; issue #26: a vLLM server that
// outlived its orchestrator kept its GPU). Losing its pipes stops neither, so the kernel is
// asked: `setpriv --pdeathsig KILL` (util-linux) sets the parent-death signal and then executes
// the command, keeping its pid. The signal follows the thread that spawned the child: here always
// the main thread, which lives as long as the process. Each child also leads a process group of
// its own, so a kill reaches whatever it started, and a Ctrl-C at the parent's terminal reaches
// the parent alone, which then decides how its children end.

import { type ChildProcessByStdio, spawn, spawnSync } from 'node:child_process';
import type { Readable } from 'node:stream';

/** How setpriv says that it could not execute the command (exit status 127). */
export const SETPRIV_EXEC_FAILED = 'setpriv: failed to execute';

export interface TiedProcess {
  child: ChildProcessByStdio<null, Readable, Readable>;
  /** Whether setpriv wraps the command (its exit status 127 may then be setpriv's, see SETPRIV_EXEC_FAILED). */
  wrapped: boolean;
}

/** Starts `cmd` tied to this process (stdout and stderr piped), leading its own process group. */
export function spawnTied(cmd: string, args: readonly string[], opts: { cwd?: string | undefined } = {}): TiedProcess {
  const wrapped = pdeathsigWorks();
  const [file, argv] = wrapped ? ['setpriv', ['--pdeathsig', 'KILL', '--', cmd, ...args]] : [cmd, [...args]];
  const child = spawn(file, argv, {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
  });
  return { child, wrapped };
}

let pdeathsig: boolean | undefined;

/** Whether `setpriv --pdeathsig` runs here (Linux with util-linux 2.33 or later); asked once. */
export function pdeathsigWorks(): boolean {
  pdeathsig ??=
    process.platform === 'linux' &&
    spawnSync('setpriv', ['--pdeathsig', 'KILL', '--', 'true'], { stdio: 'ignore', timeout: 5000 }).status === 0;
  return pdeathsig;
}

/** Signals the child's process group (the child leads it: spawnTied), else the child alone. */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}
