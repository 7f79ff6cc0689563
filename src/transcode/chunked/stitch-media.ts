import path from 'node:path';
import { InternalError, ValidationError } from '../../lib/errors.ts';
import { createInputSource } from '../../storage/index.ts';
import type { ChunkedOutput, StitchRun } from '../outputs/index.ts';
import type { UploadQueue } from '../uploads.ts';
import { runOwnFfmpeg } from './encode.ts';
import type { ChunkedDeps, PieceJob, PieceManifest } from './types.ts';

// What the stitch (and the early outputs) give each output format to make its files over the
// whole from the pieces (outputs/chunked-format.ts StitchRun): its shares of the pieces'
// manifests, the files the pieces kept in the built-in store, our ffmpeg, and the C2PA signer
// with the input as the parent.

/** The pieces done (all of them for the stitch, the first ones in a row for the early outputs) and where the formats write. */
export interface StitchSources {
  deps: ChunkedDeps;
  signal: AbortSignal;
  job: PieceJob;
  queue: UploadQueue;
  localRoot: string;
  audio: readonly PieceManifest[];
  chunks: readonly PieceManifest[];
  /** Whether the formats sign (the stitch, when the job asks): the early outputs never do. */
  signs: boolean;
}

/** Each format's view of the pieces, by the format: its own shares and folder. */
export function stitchRunOf(s: StitchSources): (f: ChunkedOutput) => StitchRun<unknown> {
  const { deps, signal, job } = s;
  const store = deps.builtinStore;
  if (!store) throw new ValidationError('storage: this server has no built-in store for the pieces');
  const fetchKept = async (key: string, dest: string): Promise<string> =>
    (await store.input(key).fetch({ dest, signal })).path;
  const c2pa = s.signs && job.c2pa ? signing(s, fetchKept) : undefined;
  return (f) => ({
    job,
    prefix: f.prefix,
    queue: s.queue,
    signal,
    ffmpeg: (args, o) => runOwnFfmpeg(deps, signal, { args, ...o }),
    audio: s.audio.map((a) => a.formats[f.key]),
    chunks: s.chunks.map((c) => c.formats[f.key]),
    localDir: path.join(s.localRoot, f.key),
    fetchKept,
    ...(c2pa ? { c2pa } : {}),
  });
}

/** The signer, and the whole input on local disk for the parent ingredient: read once, when a format first asks. */
function signing(
  s: StitchSources,
  fetchKept: (key: string, dest: string) => Promise<string>,
): NonNullable<StitchRun<unknown>['c2pa']> {
  const signer = s.deps.c2paSigner;
  if (!signer) throw new InternalError('c2pa: the signer went away between the split and the stitch');
  const dest = path.join(s.localRoot, 'input');
  let parent: Promise<string> | undefined;
  const read = async (): Promise<string> => {
    const { job } = s;
    if (job.stored !== undefined) return fetchKept(job.stored, dest);
    return (await createInputSource(job.input, s.deps.config).fetch({ dest, signal: s.signal })).path;
  };
  return {
    signer,
    parent: () => {
      parent ??= read();
      return parent;
    },
  };
}
