// `./mediaplane sample`: a video to try the service with, for a person who has none at hand
// (the README's quick start). ffmpeg makes a short test pattern with a tone, and the command
// uploads it as an asset like any client of the API does (POST /api/asset/request-upload,
// then a PUT of the file to the URL it answers), then prints the asset's id.

import { execFile } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { type Config, settings } from '../config/index.ts';
import { apiBaseUrl, causeOf, errorsOf, stringFlag } from './api-client.ts';
import { type CommandFlags, type ParsedArgs, UsageError } from './args.ts';

export const SAMPLE_HELP = `Usage: ./mediaplane sample --key KEY [--url URL] [--name NAME] [--seconds 10]

Makes a test video with ffmpeg (a moving 1280x720 test pattern at 30 fps with a 440 Hz tone)
and uploads it to the server as an asset, through its API. Prints the asset's id on a line of
its own; GET /api/asset/ID then shows it processed and, once ready, its playbackUrl.

  --key KEY     an API key (default MEDIAPLANE_API_KEY)
  --url URL     the server's base URL (default http://127.0.0.1:MEDIAPLANE_PORT, that is 8080 unset)
  --name NAME   the asset's name (default "sample")
  --seconds N   how long the video is, 1 to 60 (default 10)`;

export const SAMPLE_FLAGS: CommandFlags = {
  key: { type: 'string' },
  url: { type: 'string' },
  name: { type: 'string' },
  seconds: { type: 'string' },
};

interface Out {
  write(s: string): unknown;
}

export interface SampleDeps {
  config: Config;
  stdout?: Out;
  stderr?: Out;
}

const run = promisify(execFile);
const SIZE = '1280x720';
const MAX_SECONDS = 60;

/** Runs `sample` as the command line parsed it (cli/index.ts); resolves to the exit code. */
export async function sampleCommand(args: ParsedArgs, deps: SampleDeps): Promise<number> {
  if (args.positionals.length > 0) throw new UsageError(`sample takes no arguments\n\n${SAMPLE_HELP}`);
  const key = stringFlag(args, 'key') ?? deps.config.apiKey;
  if (!key) throw new UsageError('sample needs an API key: --key KEY or MEDIAPLANE_API_KEY');
  const api = { base: apiBaseUrl(args, deps.config), key };
  const seconds = secondsFlag(stringFlag(args, 'seconds'));
  const dir = await mkdtemp(join(tmpdir(), 'mediaplane-sample-'));
  try {
    const file = join(dir, 'sample.mp4');
    const err = deps.stderr ?? process.stderr;
    const made = await makeSample({ ffmpegPath: deps.config.ffmpegPath, file, seconds });
    const uploaded = made ? { error: made } : await upload(api, { file, name: stringFlag(args, 'name') ?? 'sample' });
    if ('error' in uploaded) {
      err.write(`${uploaded.error}\n`);
      return 1;
    }
    err.write(
      `made a ${seconds} s ${SIZE} test video with ffmpeg and uploaded it: asset ${uploaded.assetId}, processed by task ${uploaded.taskId}\n`,
    );
    (deps.stdout ?? process.stdout).write(`${uploaded.assetId}\n`);
    return 0;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function secondsFlag(raw: string | undefined): number {
  if (raw === undefined) return 10;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > MAX_SECONDS)
    throw new UsageError(`--seconds: must be a whole number from 1 to ${MAX_SECONDS}`);
  return n;
}

/**
 * The test video (or why ffmpeg could not make it): H.264 and AAC in a faststart MP4, as a phone or an editor would write one.
 * Both inputs are ffmpeg's own generators (lavfi) with fixed parameters: no user input reaches
 * ffmpeg here, so this does not go through the pipeline's input guard (transcode/media-input.ts).
 */
async function makeSample(o: { ffmpegPath: string; file: string; seconds: number }): Promise<string | undefined> {
  const t = `duration=${o.seconds}`;
  const args = ['-v', 'error', '-nostdin', '-y'];
  args.push('-f', 'lavfi', '-i', `testsrc2=size=${SIZE}:rate=30:${t}`);
  args.push('-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:${t}`);
  args.push('-c:v', 'libx264', '-preset', 'veryfast', '-pix_fmt', 'yuv420p', '-g', '60');
  args.push('-c:a', 'aac', '-b:a', '128k', '-shortest', '-movflags', '+faststart', o.file);
  try {
    await run(o.ffmpegPath, args);
    return undefined;
  } catch (e) {
    const stderr = (e as { stderr?: unknown }).stderr;
    const why = typeof stderr === 'string' && stderr.trim() ? stderr.trim() : causeOf(e);
    return `ffmpeg (${settings.ffmpegPath.env}=${o.ffmpegPath}) could not make the video: ${why}`;
  }
}

type Uploaded = { assetId: string; taskId: string } | { error: string };

/** POST /api/asset/request-upload, then the file PUT to the URL it answers (the URL is the capability). */
async function upload(api: { base: string; key: string }, o: { file: string; name: string }): Promise<Uploaded> {
  let res: Response;
  try {
    res = await fetch(`${api.base}/api/asset/request-upload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${api.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: o.name }),
    });
  } catch (e) {
    return { error: `cannot reach the API at ${api.base}: ${causeOf(e)}` };
  }
  if (res.status !== 200) return { error: await errorsOf(res) };
  const answer = (await res.json()) as { url: string; asset: { id: string }; task: { id: string } };
  const put = await putFile(new URL(answer.url, api.base), o.file);
  if (put) return { error: put };
  return { assetId: answer.asset.id, taskId: answer.task.id };
}

/** Streams the file to the upload URL; the refusal's text when it is refused. */
async function putFile(url: URL, file: string): Promise<string | undefined> {
  const { size } = await stat(file);
  const res = await fetch(url, {
    method: 'PUT',
    headers: { 'content-type': 'video/mp4', 'content-length': String(size) },
    body: Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>,
    duplex: 'half',
  }).catch((e: unknown) => e as Error);
  if (res instanceof Error) return `the upload to ${url.origin} failed: ${causeOf(res)}`;
  if (res.ok) return undefined;
  return errorsOf(res);
}
