import { type ChildProcess, spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { killGroup, pdeathsigWorks } from '../lib/tied-process.ts';
import { assertGuardedInputs } from '../transcode/media-input.ts';

// The ladder's ffmpeg as a process: the FLV goes in on stdin, each rendition's fragmented MP4
// comes out on its own extra fd (3, 4, ...), so no rendition waits for another's pipe. Tied to
// this process as lib/tied-process.ts ties the VOD's (setpriv's parent-death signal, a process
// group of its own that a kill reaches whole); that helper pipes stdout and stderr only.

export interface LadderProcessOptions {
  ffmpegPath: string;
  args: string[];
  /** The rendition fds (3, 4, ...): each one's bytes go to onOutput. */
  fds: readonly number[];
  onOutput(fd: number, chunk: Buffer): void;
  /** The process ended (by itself or killed): its exit code or signal, and stderr's tail. */
  onExit(o: { code: number | null; signal: NodeJS.Signals | null; stderrTail: string }): void;
}

const STDERR_TAIL = 4096;

export class LadderProcess {
  private readonly child: ChildProcess;
  private readonly stdin: Writable;
  private stderr = '';
  private exited = false;
  /** A write waits for ffmpeg to take what it was given: media is waiting for the ladder. */
  blocked = false;
  readonly done: Promise<void>;

  constructor(o: LadderProcessOptions) {
    assertGuardedInputs(o.args);
    const top = Math.max(2, ...o.fds);
    const stdio: ('pipe' | 'ignore')[] = ['pipe', 'ignore', 'pipe'];
    for (let fd = 3; fd <= top; fd++) stdio.push(o.fds.includes(fd) ? 'pipe' : 'ignore');
    const [file, argv] = pdeathsigWorks()
      ? ['setpriv', ['--pdeathsig', 'KILL', '--', o.ffmpegPath, ...o.args]]
      : [o.ffmpegPath, o.args];
    this.child = spawn(file, argv, { stdio, detached: true });
    const stdin = this.child.stdin;
    if (!stdin) throw new Error('the ladder process has no stdin');
    this.stdin = stdin;
    // A write after ffmpeg died fails with EPIPE: its exit is what is reported.
    stdin.on('error', () => {});
    this.child.stderr?.on('data', (c: Buffer) => {
      this.stderr = (this.stderr + c.toString('utf8')).slice(-STDERR_TAIL);
    });
    for (const fd of o.fds) (this.child.stdio[fd] as Readable | null)?.on('data', (c: Buffer) => o.onOutput(fd, c));
    this.done = new Promise((resolve) => {
      const finish = (code: number | null, signal: NodeJS.Signals | null): void => {
        if (this.exited) return;
        this.exited = true;
        o.onExit({ code, signal, stderrTail: this.stderr });
        resolve();
      };
      this.child.on('error', (err) => {
        this.stderr += `\n${err.message}`;
        finish(null, null);
      });
      this.child.on('close', finish);
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return !this.exited;
  }

  /** Writes FLV bytes; `ready` is called at once or when ffmpeg has taken what it was given (backpressure). */
  write(bytes: Buffer, ready: () => void): void {
    if (this.exited || this.stdin.destroyed) {
      ready();
      return;
    }
    if (this.stdin.write(bytes)) ready();
    else {
      this.blocked = true;
      const go = (): void => {
        this.blocked = false;
        this.stdin.off('drain', go);
        this.child.off('close', go);
        ready();
      };
      this.stdin.on('drain', go);
      this.child.on('close', go);
    }
  }

  /** The input ends: ffmpeg writes out what it holds and exits; killed after `graceMs`. */
  async finish(graceMs: number): Promise<void> {
    if (!this.exited) this.stdin.end();
    const timer = setTimeout(() => this.kill(), graceMs);
    await this.done;
    clearTimeout(timer);
  }

  kill(): void {
    if (!this.exited) killGroup(this.child.pid);
  }
}
