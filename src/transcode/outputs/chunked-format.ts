import type { C2paSigner } from '../c2pa.ts';
import type { CodecsProbes } from '../codecs.ts';
import type { MediaInfo } from '../probe.ts';
import type { Rendition } from '../renditions.ts';
import type { UploadQueue } from '../uploads.ts';

// How an output format's part of a long input is made by the pieces of a chunked run
// (transcode/chunked/): the audio pieces (every audio track of a window each), the chunks (the
// video of a window each) and the stitch, which makes the format's files over the whole from what the
// pieces kept. The pieces run the single run's command (command.ts) on plans of their own, so
// a format's ffmpeg targets are the same; what it says here is what it keeps of each piece and
// how it joins them. The chunked code loops over the registry (outputs/index.ts) and knows no
// format by name.

/** The part of the whole one chunk encodes (see chunked/plan.ts). */
export interface ChunkWindow {
  /** Where ffmpeg starts reading (input `-ss`), seconds: `skipSecs` before the chunk starts. */
  seekSecs: number;
  /** Decoded before the chunk and dropped: a whole number of frames of every rendition. */
  skipSecs: number;
  /** The chunk's length, seconds; undefined for the last chunk, which runs to the end. */
  keepSecs: number | undefined;
  /** Where the chunk starts in the whole, seconds: its TS timestamps are shifted there. */
  startSecs: number;
  /** The number of its first segment (segments are numbered across the whole). */
  firstSegment: number;
}

/** The audio renditions' rate (encoders.ts AAC_ARGS) and their codec's frame: audio pieces are cut in these. */
export const AUDIO_RATE = 48_000;
export const AAC_FRAME_SAMPLES = 1024;

/**
 * The part of the whole audio one audio piece keeps (see chunked/plan.ts planAudio), in
 * samples at the audio renditions' 48 kHz. Its bounds are whole AAC frames, so the pieces'
 * kept packets, in order, are the single encode's packets.
 */
export interface AudioWindow {
  /** The first sample it keeps (b_i): a whole number of AAC frames. */
  startSample: number;
  /** How many samples it keeps, a whole number of frames; undefined for the last piece, which runs to the end. */
  keepSamples: number | undefined;
  /** Whole AAC frames encoded before `startSample` and dropped, so the encoder has settled at the seam. */
  prerollFrames: number;
  /** The number of its first segment in the HLS trees' audio playlists (numbered across the whole). */
  firstSegment: number;
}

/**
 * An audio piece's kept packets as its command's input (command.ts): copied into each
 * format's targets, never encoded again.
 */
export interface AudioPieceInput {
  /** Each audio track's kept AAC packets (ADTS, chunked/audio-adts.ts), in the order of `probe.audioTracks`. */
  files: readonly string[];
  /** They begin with the encoder's priming packet (the first piece): placed one frame early, as a single encode's are. */
  primed: boolean;
  /** Where its first packet's decode time lies in the whole, seconds: its TS timestamps are shifted there. */
  startSecs: number;
  /** The number of its first segment (segments are numbered across the whole). */
  firstSegment: number;
}

/** A long input's job as every piece sees it: the split step's findings. */
export interface ChunkedJob {
  /** The split step's probe of the input (subtitles never: such inputs are not split). */
  media: MediaInfo;
  /** The ladder, chosen once for the whole video. */
  renditions: readonly Rendition[];
  segmentSecs: number;
  duration: number;
  c2pa?: boolean | undefined;
}

/** What a piece and the stitch share: the job, where the format's files go, the tools. */
interface ChunkedRunBase {
  job: ChunkedJob;
  /** The format's folder in the job's store (a format not asked on its own: the first HLS tree's). */
  prefix: string;
  /** Uploads to the job's store; the chunked run drains it. */
  queue: UploadQueue;
  /** Runs our ffmpeg (run.ts FFMPEG_QUIET first) in `cwd`; a failure throws `failure` with ffmpeg's last words. */
  ffmpeg(args: string[], o: { cwd: string; failure: string }): Promise<void>;
  signal: AbortSignal;
}

/** One piece after its encode, with the single run's layout under `outDir`. */
export interface PieceRun extends ChunkedRunBase {
  /** The chunk's place; undefined for an audio piece. */
  chunk?: { index: number; window: ChunkWindow } | undefined;
  /** An audio piece's place; undefined for a chunk. */
  audio?: { index: number; count: number; window: AudioWindow } | undefined;
  /** The piece's ffmpeg output folder (its working directory). */
  outDir: string;
  codecs: CodecsProbes;
  /**
   * Keeps a file of `outDir` (relative to it) in the built-in store for the stitch and says
   * its key. Kept once the piece's formats have all collected, so a file several of them keep
   * (the lowest rendition's MP4 part) is kept once and stays readable until then.
   */
  keep(rel: string, contentType: string): string;
}

/** The stitch (or the early outputs): what the format kept of each piece, and the tools to join it. */
export interface StitchRun<Share> extends ChunkedRunBase {
  /** Its share of each audio piece, in order (empty: no audio; for the early outputs: those done in a row from the first). */
  audio: readonly Share[];
  /** Its share of each chunk, in order (for the early outputs: the chunks done in a row from the first). */
  chunks: readonly Share[];
  /** A folder of the format's own for local files. */
  localDir: string;
  /** One kept file, fetched to `dest`: its local path. */
  fetchKept(key: string, dest: string): Promise<string>;
  /** The signer, and the whole input on local disk as the parent, when the job signs with C2PA. */
  c2pa?: { signer: C2paSigner; parent(): Promise<string> } | undefined;
}

/** A format's chunked behaviour, over shares of type `Share` (plain JSON: they are stored in the pieces' task rows). */
export interface ChunkedBehaviour<Share, Result> {
  /** After a piece's encode: its files uploaded or kept, and its share of the piece (undefined: none). */
  collect(piece: PieceRun): Promise<Share | undefined>;
  /** Outputs players can start on while the rest is encoded (EVENT playlists), from the pieces done so far. */
  early?(run: StitchRun<Share>): Promise<void>;
  /** Once every piece is done: its files over the whole and its result (undefined: it has none). */
  stitch(run: StitchRun<Share>): Promise<Result | undefined>;
}

/** What the chunked run sees of a format: its shares as the pieces' rows give them back. */
export type ChunkedFormat<Result> = ChunkedBehaviour<unknown, Result>;

/** A format's chunked behaviour, its shares typed inside the format and plain JSON outside it. */
export function chunkedBehaviour<Share, Result>(b: ChunkedBehaviour<Share, Result>): ChunkedFormat<Result> {
  // A share comes back from the piece's row, where this format's own `collect` wrote it (the
  // chunked run checks the manifest around it: chunked/publish.ts manifestOf), so the format
  // reads it as it wrote it.
  const typed = (run: StitchRun<unknown>): StitchRun<Share> => run as StitchRun<Share>;
  const early = b.early;
  return {
    collect: (piece) => b.collect(piece),
    ...(early ? { early: (run: StitchRun<unknown>) => early(typed(run)) } : {}),
    stitch: (run) => b.stitch(typed(run)),
  };
}
