import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../config/index.ts';
import { isMediaplaneError } from '../lib/errors.ts';
import { createInputSource, FileInput, LocalDirStore, type InputSource } from '../storage/index.ts';
import { runPipeline, type OutputFolders } from '../transcode/index.ts';
import { parseCommandLine, UsageError, type CommandFlags } from './args.ts';

export const TRANSCODE_HELP = `Usage: ./mediaplane transcode <file-or-url> --out <dir> [--hls] [--mp4] [--fmp4] [--segment 6]

Runs the transcoding pipeline of the server on this machine, without a server or a bucket:
the same probe, ladder, single ffmpeg run and playlists, written to a local folder.

  <file-or-url>   a local file, or an http(s)://, ipfs:// or ar:// URL
  --out <dir>     output folder: <dir>/hls/index.m3u8, <dir>/mp4/<rendition>.mp4, <dir>/fmp4/...
  --hls           write HLS (TS segments)        (default when no output kind is given: --hls --mp4)
  --mp4           write one faststart MP4 per rendition
  --fmp4          write HLS with fMP4/CMAF segments
  --segment <s>   HLS segment duration in seconds, 1 to 60 (default 6)
  -h, --help      this text

Settings (ffmpeg path, preset, gateways, size limit...) are read from MEDIAPLANE_* variables;
see \`./mediaplane --help\`.`;

interface CliArgs {
  input: string;
  out: string;
  outputs: OutputFolders;
  segment: number | undefined;
  /** Setting flags (`--ffmpeg-path /x`), as every command takes them. */
  settingFlags: Record<string, string>;
}

const TRANSCODE_FLAGS: CommandFlags = {
  out: { type: 'string', short: 'o' },
  hls: { type: 'boolean' },
  mp4: { type: 'boolean' },
  fmp4: { type: 'boolean' },
  segment: { type: 'string' },
};

/** `mediaplane transcode`: exit 0 on success, 1 when the job fails, 2 on a usage error. */
export async function runTranscodeCommand(argv: string[]): Promise<number> {
  let args: CliArgs | 'help';
  try {
    args = parse(argv);
  } catch (err) {
    process.stderr.write(`mediaplane transcode: ${(err as Error).message}\n\n${TRANSCODE_HELP}\n`);
    return 2;
  }
  if (args === 'help') {
    process.stdout.write(`${TRANSCODE_HELP}\n`);
    return 0;
  }
  try {
    return await transcode(args);
  } catch (err) {
    if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
    else
      process.stderr.write(`\nmediaplane transcode: failed: ${isMediaplaneError(err) ? err.message : String(err)}\n`);
    return 1;
  }
}

function parse(argv: string[]): CliArgs | 'help' {
  const { flags, positionals, settingFlags, help } = parseCommandLine(argv, TRANSCODE_FLAGS);
  if (help) return 'help';
  if (positionals.length !== 1 || !positionals[0]) throw new UsageError('give exactly one input file or URL');
  const out = typeof flags.out === 'string' ? flags.out : undefined;
  if (!out) throw new UsageError('--out <dir> is required');
  const segment = typeof flags.segment === 'string' ? Number(flags.segment) : undefined;
  // The API's bound of targetSegmentSizeSecs (issue #15): 0.001 would cut one-frame segments.
  if (segment !== undefined && !(segment >= 1 && segment <= 60))
    throw new UsageError('--segment must be a number of seconds from 1 to 60');
  const none = !flags.hls && !flags.mp4 && !flags.fmp4;
  const outputs: OutputFolders = {
    ...(flags.hls || none ? { hls: { path: '/hls' } } : {}),
    ...(flags.mp4 || none ? { mp4: { path: '/mp4' } } : {}),
    ...(flags.fmp4 ? { fmp4: { path: '/fmp4' } } : {}),
  };
  return { input: positionals[0], out, outputs, segment, settingFlags };
}

async function transcode(args: CliArgs): Promise<number> {
  // A local run fetches what its user asks, localhost included: the private-address guard
  // protects a server from its clients, not a user from themselves.
  const config = loadConfig({ flags: args.settingFlags, overrides: { allowPrivateUrls: true } });
  const source: InputSource = /^[a-z][a-z0-9+.-]*:\/\//i.test(args.input)
    ? createInputSource({ url: args.input }, config)
    : new FileInput(args.input);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'mediaplane-transcode-'));
  const ctrl = new AbortController();
  const onSigint = (): void => ctrl.abort();
  process.once('SIGINT', onSigint);
  const bar = progressBar(process.stderr);
  try {
    const out = await runPipeline(config, {
      source,
      store: new LocalDirStore(args.out),
      outputs: args.outputs,
      segmentSecs: args.segment,
      scratchDir: scratch,
      signal: ctrl.signal,
      progress: bar,
    });
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    return 0;
  } finally {
    process.off('SIGINT', onSigint);
    await rm(scratch, { recursive: true, force: true });
  }
}

/** A redrawn bar on a terminal; plain lines every 10 % otherwise (logs, CI). */
function progressBar(stream: NodeJS.WriteStream): (f: number) => void {
  let lastStep = -1;
  return (f) => {
    const pct = Math.floor(f * 100);
    if (stream.isTTY) {
      const width = 30;
      const filled = Math.round(f * width);
      stream.write(
        `\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(pct).padStart(3)}%${f >= 1 ? '\n' : ''}`,
      );
      return;
    }
    const step = Math.floor(pct / 10);
    if (step > lastStep) {
      lastStep = step;
      stream.write(`progress ${step * 10}%\n`);
    }
  };
}
