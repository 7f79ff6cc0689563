import type { Logger } from 'pino';
import type { Config } from '../../config/index.ts';
import type { BuiltinStore } from '../../storage/builtin/index.ts';
import type { InputSpec, ObjectStoreFactory, StorageTarget } from '../../storage/index.ts';
import type { C2paSigner } from '../c2pa.ts';
import type { FinishSteps, JobFinish } from '../finish.ts';
import type { AudioWindow, ChunkWindow, OutputFolders } from '../outputs/index.ts';
import type { MediaInfo } from '../probe.ts';
import type { Rendition } from '../renditions.ts';

// A long transcode-file task split into pieces (child tasks): `transcode-audio` x M (every
// audio track, a range each), `transcode-chunk` x N (video, a range each) and
// `transcode-stitch` (playlists, DASH, MP4s, thumbnails from the pieces' manifests). These
// are the pieces' params and outputs: plain JSON, stored in the pieces' task rows.

export const PIECE_TYPES = {
  audio: 'transcode-audio',
  chunk: 'transcode-chunk',
  stitch: 'transcode-stitch',
} as const;

/** What the piece handlers need; the transcode handler's deps fit it. */
export interface ChunkedDeps {
  config: Config;
  log?: Logger | undefined;
  objectStores?: Partial<Record<string, ObjectStoreFactory>> | undefined;
  c2paSigner?: C2paSigner | undefined;
  builtinStore?: BuiltinStore | undefined;
  /** The finish steps by kind (an asset's, from assets/): what a job's outputs become once all are written. */
  finishSteps?: FinishSteps | undefined;
}

/**
 * Where a piece reads the input: the source itself by ranges, or its copy in the built-in store.
 * At the top of the piece's params: a task's secrets are removed one level down on completion
 * (tasks/model.ts PARAMS_WITHOUT_SECRETS), so the input's credentials and signed query go too.
 */
export type SourceRef = { input: InputSpec; stored?: undefined } | { stored: string; input?: undefined };

/** What every piece of one parent is told: the split step's findings. */
export type PieceJob = SourceRef & {
  /** Neither: the built-in store under the parent's `task/<parentId>/` (destination.ts OutputPlace). */
  storage?: StorageTarget;
  builtinPrefix?: string;
  outputs: OutputFolders;
  /** The split step's probe of the input. */
  media: MediaInfo;
  /** The ladder, planned once for the whole video: every chunk writes these rungs. */
  renditions: Rendition[];
  /** The per-title ladder is on: each chunk chooses its rungs' rates from its own part (chunk-ladder.ts). */
  perTitle?: boolean;
  segmentSecs: number;
  duration: number;
  c2pa?: boolean;
  /** The job's finish step, run by the stitch on the stitched outputs (job.ts). */
  finish?: JobFinish;
};

export type ChunkJob = PieceJob & { chunk: { index: number; count: number; window: ChunkWindow } };

export type AudioJob = PieceJob & { audio: { index: number; count: number; window: AudioWindow } };

export type StitchJob = PieceJob & { chunks: number; chunkSecs: number; inputSize: number; audioPieces: number };

/**
 * A piece's output: what it put where, by output format. The stitch and the early outputs
 * read it; each format's share is its own (outputs/chunked-format.ts).
 */
export interface PieceManifest {
  kind: 'audio' | 'chunk';
  /** The chunk's index, or the audio piece's (each kind numbered from 0). */
  index: number;
  /** Each format's share of the piece (plain JSON), by the format's key. */
  formats: Record<string, unknown>;
}

/** Where a parent's pieces keep their files in the built-in store; removed by the stitch. */
export const piecesPrefix = (parentId: string): string => `pieces/${parentId}/`;
