import { copyFile } from 'node:fs/promises';
import path from 'node:path';
import { InternalError } from '../../lib/errors.ts';
import type { BuiltinStore } from '../../storage/builtin/index.ts';
import type { JobContext } from '../../tasks/index.ts';
import { detail } from '../decode-check.ts';
import { inputArgs } from '../media-input.ts';
import { layout as mp4Layout } from '../outputs/mp4.ts';
import { planThumbnails } from '../outputs/thumbnails.ts';
import { FFMPEG_QUIET, runProcess } from '../run.ts';
import { posterFilter } from '../storyboard.ts';
import { piecesPrefix, type ChunkedDeps, type ChunkJob, type PieceManifest } from './types.ts';

// Issue #30: the poster of a chunked run. The stitch makes the storyboard from the lowest
// rendition, but a poster from it would be upscaled: the chunk that holds the poster's time
// takes it from its largest rendition's part instead, with the single run's poster chain.

/** The poster (in the built-in store), when this chunk holds its time. */
export async function chunkPoster(
  deps: ChunkedDeps,
  o: { job: ChunkJob; ctx: JobContext; outDir: string; parentId: string; store: BuiltinStore },
): Promise<string | undefined> {
  const { job } = o;
  const w = job.chunk.window;
  const plan = planThumbnails({ underTree: true, media: job.media, duration: job.duration, enabled: true });
  const top = [...job.renditions].sort((a, b) => b.width * b.height - a.width * a.height)[0];
  if (!plan || !top) return undefined;
  const at = plan.poster.atSecs;
  if (at < w.startSecs || (w.keepSecs !== undefined && at >= w.startSecs + w.keepSecs)) return undefined;
  const file = path.join(o.outDir, 'poster.jpg');
  const filter = posterFilter({ ...plan, poster: { ...plan.poster, atSecs: at - w.startSecs } });
  const args = [...FFMPEG_QUIET, ...inputArgs(mp4Layout.mp4File(top.name), 'ours'), '-vf', filter];
  args.push('-fps_mode', 'passthrough', '-c:v', 'mjpeg', '-q:v', '3', '-frames:v', '1', '-update', '1', file);
  const res = await runProcess(deps.config.ffmpegPath, args, {
    signal: o.ctx.signal,
    cwd: o.outDir,
    timeoutMs: deps.config.transcodeTimeoutMs,
  });
  if (res.code !== 0) throw new InternalError(`the poster could not be taken${detail(res.stderrTail)}`);
  const key = `${piecesPrefix(o.parentId)}poster.jpg`;
  await o.store.putFile(key, file, { contentType: 'image/jpeg', signal: o.ctx.signal, move: true });
  return key;
}

/** The stitch's poster replaced by the chunk's, where a chunk took one. */
export async function usePoster(
  o: { chunks: readonly PieceManifest[]; store: BuiltinStore; signal: AbortSignal },
  target: string,
): Promise<void> {
  const key = o.chunks.find((c) => c.poster)?.poster;
  if (!key) return;
  const got = await o.store.input(key).fetch({ dest: `${target}.chunk`, signal: o.signal });
  await copyFile(got.path, target);
}
