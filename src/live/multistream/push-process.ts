import { type ChildProcess, spawn } from 'node:child_process';
import type { Writable } from 'node:stream';
import { killGroup, pdeathsigWorks } from '../../lib/tied-process.ts';
import { assertGuardedInputs, inputArgs } from '../../transcode/media-input.ts';

// One ffmpeg pushing one run of a rendition to one target: the rendition's fragmented MP4 (its
// init, then its parts) on stdin, copied (`-c copy`: never encoded again) into FLV for
// rtmp(s):// (Adobe's RTMP spec carries FLV tags) or MPEG-TS for srt:// (the SRT draft carries
// TS). ffmpeg says `Output #0` once the output's header is written, which for these protocols
// means the connection is open and the other side took the publish. Its stderr names the url
// (the other service's key): only redacted lines leave this file.

export interface PushProcessOptions {
  ffmpegPath: string;
  /** The checked url (target-address.ts guardedTargetUrl). */
  url: string;
  videoOnly: boolean;
  onConnected(): void;
  /** It ended, by itself or stopped: its last stderr line, redacted. */
  onExit(o: { code: number | null; signal: NodeJS.Signals | null; lastLine: string }): void;
}

const STDERR_LINES = 8;

/** ffmpeg's arguments: fMP4 on stdin, copied to the target's container and url. */
export function pushArgs(url: string, videoOnly: boolean): string[] {
  const container = url.startsWith('srt:') ? ['-f', 'mpegts'] : ['-f', 'flv', '-flvflags', 'no_duration_filesize'];
  return [
    ...['-hide_banner', '-nostats', '-loglevel', 'info'],
    ...['-analyzeduration', '0', '-probesize', '32768'],
    ...inputArgs('pipe:0', 'live-fmp4'),
    ...['-map', '0:v?', ...(videoOnly ? [] : ['-map', '0:a?']), '-c', 'copy'],
    ...container,
    url,
  ];
}

/** A line of ffmpeg's stderr with every URL in it replaced: they hold the target's key. */
export function redactUrls(line: string): string {
  return line.replace(/[a-z][a-z0-9+.-]*:\/\/[^\s'"]*/gi, '<target url>');
}

export class PushProcess {
  readonly #child: ChildProcess;
  readonly #stdin: Writable;
  readonly done: Promise<void>;
  #lines: string[] = [];
  #partial = '';
  #exited = false;
  #connected = false;
  /** A write waits for ffmpeg to take what it was given. */
  blocked = false;

  constructor(o: PushProcessOptions) {
    const args = pushArgs(o.url, o.videoOnly);
    assertGuardedInputs(args);
    const [file, argv] = pdeathsigWorks()
      ? ['setpriv', ['--pdeathsig', 'KILL', '--', o.ffmpegPath, ...args]]
      : [o.ffmpegPath, args];
    this.#child = spawn(file, argv, { stdio: ['pipe', 'ignore', 'pipe'], detached: true });
    const stdin = this.#child.stdin;
    if (!stdin) throw new Error('the push process has no stdin');
    this.#stdin = stdin;
    // A write after ffmpeg died fails with EPIPE: its exit is what is reported.
    stdin.on('error', () => {});
    this.#child.stderr?.on('data', (c: Buffer) => this.#onStderr(c.toString('utf8'), o));
    this.done = new Promise((resolve) => {
      const finish = (code: number | null, signal: NodeJS.Signals | null): void => {
        if (this.#exited) return;
        this.#exited = true;
        o.onExit({ code, signal, lastLine: this.#lastLine(code, signal) });
        resolve();
      };
      this.#child.on('error', (err) => {
        this.#lines.push(redactUrls(err.message));
        finish(null, null);
      });
      this.#child.on('close', finish);
    });
  }

  get running(): boolean {
    return !this.#exited;
  }

  /** Writes bytes; `drained` is called when ffmpeg has taken them all, if it could not at once. */
  write(bytes: Buffer, drained: () => void): void {
    if (this.#exited || this.#stdin.destroyed) return;
    if (this.#stdin.write(bytes)) return;
    this.blocked = true;
    const go = (): void => {
      this.blocked = false;
      this.#stdin.off('drain', go);
      this.#child.off('close', go);
      drained();
    };
    this.#stdin.on('drain', go);
    this.#child.on('close', go);
  }

  /** The input ends: ffmpeg writes out what it holds and closes the connection; killed after `graceMs`. */
  async finish(graceMs: number): Promise<void> {
    if (!this.#exited) this.#stdin.end();
    const timer = setTimeout(() => this.kill(), graceMs);
    await this.done;
    clearTimeout(timer);
  }

  kill(): void {
    if (!this.#exited) killGroup(this.#child.pid);
  }

  #onStderr(text: string, o: PushProcessOptions): void {
    const lines = (this.#partial + text).split(/\r?\n|\r/);
    this.#partial = lines.pop() ?? '';
    for (const line of lines) {
      if (!this.#connected && line.startsWith('Output #0')) {
        this.#connected = true;
        o.onConnected();
      }
      if (line.trim() !== '') this.#lines = [...this.#lines, redactUrls(line.trim())].slice(-STDERR_LINES);
    }
  }

  #lastLine(code: number | null, signal: NodeJS.Signals | null): string {
    const last = [...this.#lines, redactUrls(this.#partial.trim())].filter((l) => l !== '').at(-1);
    return last ?? (signal ? `ffmpeg was stopped (${signal})` : `ffmpeg exited with code ${code}`);
  }
}
