import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { InternalError, isMediaplaneError, UpstreamUnavailableError } from '../../lib/errors.ts';
import type { ObjectStore } from '../../storage/index.ts';
import type { JobContext } from '../../tasks/index.ts';
import { buildFfmpegArgs } from '../command.ts';
import { detail } from '../decode-check.ts';
import { formatsWritten, type CommandPlan } from '../outputs/index.ts';
import { ProgressParser, throttledProgress } from '../progress.ts';
import { FFMPEG_QUIET, runProcess } from '../run.ts';
import { UploadQueue } from '../uploads.ts';
import { openPieceSource } from './source.ts';
import type { ChunkedDeps, PieceJob } from './types.ts';

// What the audio piece and the chunks share: one ffmpeg run over the ranged input
// (command.ts, the single run's command with the piece's plan); what each output format
// keeps of it is the format's own (outputs/chunked-format.ts).

/**
 * Runs the piece's ffmpeg into `<scratch>/out` (the plan's command, or `args` on the input's
 * URL); the encode is `share` of the piece's progress.
 */
export async function encodePiece(
  deps: ChunkedDeps,
  o: {
    ctx: JobContext;
    job: PieceJob;
    plan: Omit<CommandPlan, 'input'>;
    seconds: number;
    share: number;
    args?: (input: string) => string[];
  },
): Promise<string> {
  const { ctx } = o;
  const outDir = path.join(ctx.scratchDir, 'out');
  const proxy = await openPieceSource(deps, o.job, ctx.signal);
  try {
    const plan: CommandPlan = { ...o.plan, input: proxy.url };
    for (const d of new Set(formatsWritten(plan).flatMap((f) => f.dirs(plan))))
      await mkdir(path.join(outDir, d), { recursive: true });
    const report = throttledProgress(ctx.progress, 1000);
    const parser = new ProgressParser((s) => o.seconds > 0 && report(o.share * Math.min(1, s / o.seconds)));
    const res = await runProcess(deps.config.ffmpegPath, o.args?.(proxy.url) ?? buildFfmpegArgs(plan), {
      signal: ctx.signal,
      cwd: outDir,
      timeoutMs: deps.config.transcodeTimeoutMs,
      onStdout: (c) => parser.push(c),
    });
    if (res.code !== 0) {
      // The source failed under ffmpeg: that is the reason, and worth another try unless it says otherwise.
      const e = proxy.error;
      if (e)
        throw isMediaplaneError(e)
          ? e
          : new UpstreamUnavailableError(`reading the input failed: ${String(e)}`, { cause: e });
      throw new InternalError(`encoding a piece failed${detail(res.stderrTail)}`);
    }
    return outDir;
  } finally {
    await proxy.close();
  }
}

/** Our own ffmpeg run for an output format's part of a piece or of the stitch (a poster, a join). */
export async function runOwnFfmpeg(
  deps: ChunkedDeps,
  signal: AbortSignal,
  o: { args: string[]; cwd: string; failure: string },
): Promise<void> {
  const { config } = deps;
  const res = await runProcess(config.ffmpegPath, [...FFMPEG_QUIET, ...o.args], {
    signal,
    cwd: o.cwd,
    timeoutMs: config.transcodeTimeoutMs,
  });
  if (res.code !== 0) throw new InternalError(`${o.failure}${detail(res.stderrTail)}`);
}

/**
 * Runs `fn` with the job's output store, closed after (its client freed) or discarded when
 * `fn` fails. Pieces write keys where they say (s3, the built-in store): nothing to publish.
 */
export async function withStore<T>(store: ObjectStore, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
  try {
    const result = await fn();
    await store.close(signal);
    return result;
  } catch (err) {
    await store.discard().catch(() => undefined);
    throw err;
  }
}

/** An upload queue to the job's output store; `drain()` throws its first failure. */
export function pieceQueue(deps: ChunkedDeps, store: ObjectStore, signal: AbortSignal): UploadQueue {
  return new UploadQueue({ store, signal, concurrency: deps.config.uploadConcurrency, onError: () => undefined });
}
