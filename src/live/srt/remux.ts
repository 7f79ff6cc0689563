import type { Writable } from 'node:stream';
import { killGroup, spawnTied } from '../../lib/tied-process.ts';
import { assertGuardedInputs, inputArgs } from '../../transcode/media-input.ts';

// The remux of one SRT publish: an ffmpeg that listens for SRT on a loopback port (the relay
// replays the publisher's handshake to it and forwards its packets), demuxes the MPEG-TS and
// copies the streams into FLV on stdout, which goes into the session's FlvSink. No decoding,
// no encoding: the ladder ffmpeg reads the FLV like an RTMP publisher's.

/** How an ended remux went: `refusal` says what the publisher sent that FLV cannot carry. */
export interface RemuxExit {
  code: number | null;
  /** Words for the person at the encoder, when ffmpeg refused a codec (e.g. HEVC). */
  refusal?: string;
  /** ffmpeg's last error line, for the log. */
  lastError?: string;
}

export interface Remux {
  readonly pid: number | undefined;
  /** ffmpeg has exited and all it wrote is in the sink (whose `flv` it then ends). */
  readonly exited: Promise<RemuxExit>;
  /** Kills ffmpeg now (after a graceful end did not come). */
  kill(): void;
  /** Resolves once ffmpeg has written nothing for `quietMs` (or exited), or after `maxMs`. */
  quiet(o: { quietMs: number; maxMs: number }): Promise<void>;
}

const STDERR_TAIL = 4096;
/** How long a killed remux's stdout may still drain into the sink. */
const KILL_DRAIN_MS = 2000;

/**
 * The remux's command line. `-v error` still prints the muxer's codec refusal. Every second
 * of probing is a second of latency before the first FLV byte, and ffmpeg's default (5 s) is
 * all of it; yet cut too short (32 KB, 200 ms) the probe ends before the first audio packet,
 * which an MPEG-TS muxer may hold back (ffmpeg's `muxdelay`, 0.7 s), and the FLV has no
 * audio. 500 ms: both tracks, the first FLV byte about 1 s after the publisher starts on
 * loopback (1.9 s with 1 s, 4.6 s with the default). `no_duration_filesize`: the FLV muxer
 * cannot seek back into a pipe.
 */
export function remuxArgs(o: { port: number; listenTimeoutMs: number }): string[] {
  const url = `srt://127.0.0.1:${o.port}?mode=listener&listen_timeout=${o.listenTimeoutMs * 1000}`;
  return [
    ...['-hide_banner', '-nostdin', '-v', 'error'],
    ...['-probesize', '1000000', '-analyzeduration', '500000'],
    ...inputArgs(url, 'live-srt'),
    ...['-c', 'copy', '-f', 'flv', '-flvflags', 'no_duration_filesize', 'pipe:1'],
  ];
}

/** Starts the remux; its stdout is piped into `flv` with backpressure (a full sink pauses ffmpeg's pipe). */
export function startRemux(o: { ffmpegPath: string; port: number; listenTimeoutMs: number; flv: Writable }): Remux {
  const args = remuxArgs(o);
  assertGuardedInputs(args);
  const { child } = spawnTied(o.ffmpegPath, args);
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString('utf8')).slice(-STDERR_TAIL);
  });
  child.stdout.pipe(o.flv);
  let wroteAt = Date.now();
  let running = true;
  child.stdout.on('data', () => {
    wroteAt = Date.now();
  });
  const exited = new Promise<RemuxExit>((resolve) => {
    child.on('error', (err) => {
      stderr += `\n${err.message}`;
    });
    // 'close': the process has exited and its pipes are drained into the sink.
    child.on('close', (code) => {
      running = false;
      resolve(exitOf(code, stderr));
    });
  });
  const quiet = async (q: { quietMs: number; maxMs: number }): Promise<void> => {
    const until = Date.now() + q.maxMs;
    while (running && Date.now() < until && Date.now() - wroteAt < q.quietMs)
      await new Promise((r) => setTimeout(r, Math.min(50, q.quietMs)));
  };
  const kill = (): void => {
    killGroup(child.pid);
    // A sink that stopped reading would hold the pipe, and 'close', forever.
    setTimeout(() => child.stdout.destroy(), KILL_DRAIN_MS).unref();
  };
  return { pid: child.pid, exited, kill, quiet };
}

// ffmpeg's FLV muxer (5.1) on a codec FLV has no id for: "Video codec hevc not compatible with flv".
const NOT_FLV = /(Video|Audio) codec (\w+) not compatible with flv/i;

/** What ffmpeg's stderr says of its end. */
export function exitOf(code: number | null, stderr: string): RemuxExit {
  const lastError = stderr.trim().split('\n').at(-1)?.trim();
  const codec = NOT_FLV.exec(stderr);
  return {
    code,
    ...(codec ? { refusal: refusalFor(codec[1] ?? '', codec[2] ?? '') } : {}),
    ...(lastError ? { lastError } : {}),
  };
}

function refusalFor(kind: string, codec: string): string {
  if (/^(hevc|h265)$/i.test(codec)) return 'HEVC over SRT is not supported: send H.264 (x264 or NVENC H.264)';
  if (kind.toLowerCase() === 'video') return `${codec} video is not supported: send H.264 (x264 or NVENC H.264)`;
  return `${codec} audio is not supported: send AAC`;
}
