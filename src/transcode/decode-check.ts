import { UnsupportedMediaError } from '../lib/errors.ts';
import { inputArgs } from './media-input.ts';
import { ProgressParser } from './progress.ts';
import { runProcess } from './run.ts';

export interface ToolOptions {
  ffmpegPath: string;
  signal: AbortSignal;
  /** Read the first video stream; false for an audio-only input (its first audio stream). */
  video: boolean;
}

/**
 * Decodes the first frames before anything is encoded or uploaded: a file whose header
 * probes fine but whose bitstream is broken (samples/12_BROKEN...) fails here with a clear
 * message instead of producing empty playlists.
 */
export async function checkDecodes(file: string, opts: ToolOptions): Promise<void> {
  const args = [
    '-hide_banner',
    '-nostdin',
    '-v',
    'error',
    '-progress',
    'pipe:1',
    ...inputArgs(file),
    ...(opts.video ? ['-map', '0:v:0', '-frames:v', '3'] : ['-map', '0:a:0', '-t', '0.5']),
    '-f',
    'null',
    '-',
  ];
  const res = await runProcess(opts.ffmpegPath, args, { signal: opts.signal, timeoutMs: 120_000, collectStdout: true });
  const frames = Math.max(0, ...[...res.stdout.matchAll(/^frame=(\d+)/gm)].map((m) => Number(m[1])));
  // Audio has no frame count in -progress: decoded audio shows as output time.
  const outUs = Math.max(0, ...[...res.stdout.matchAll(/^out_time_us=(\d+)/gm)].map((m) => Number(m[1])));
  if (opts.video ? frames === 0 : res.code !== 0 || outUs === 0) {
    throw new UnsupportedMediaError(
      `the ${opts.video ? 'video' : 'audio'} could not be decoded: the file is damaged or its codec is not supported${detail(res.stderrTail)}`,
    );
  }
}

/**
 * The duration when the container does not say (browser-made MKV/WebM): the last
 * timestamp of a demux-only pass, which reads the file without decoding it.
 */
export async function measureDuration(file: string, opts: ToolOptions): Promise<number> {
  let seconds = 0;
  const parser = new ProgressParser((s) => (seconds = Math.max(seconds, s)));
  const args = [
    '-hide_banner',
    '-nostdin',
    '-v',
    'error',
    '-progress',
    'pipe:1',
    ...inputArgs(file),
    '-map',
    opts.video ? '0:v:0' : '0:a:0',
    '-c',
    'copy',
    '-f',
    'null',
    '-',
  ];
  await runProcess(opts.ffmpegPath, args, { signal: opts.signal, timeoutMs: 600_000, onStdout: (c) => parser.push(c) });
  return seconds;
}

/** ffmpeg's last error line, for the user: it names the decoder's complaint. */
export function detail(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.replace(/^\[[^\]]+\]\s*/, '').trim())
    .filter((l) => l && !/^Last message repeated/.test(l));
  const line = lines.find((l) => /invalid|error|not found|unsupported|corrupt/i.test(l)) ?? lines.at(-1);
  return line ? ` (ffmpeg: ${line.slice(0, 200)})` : '';
}
