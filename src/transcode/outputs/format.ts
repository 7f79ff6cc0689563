import type { Logger } from 'pino';
import type { ObjectStore } from '../../storage/index.ts';
import type { C2paSigner } from '../c2pa.ts';
import type { CodecsProbes } from '../codecs.ts';
import type { AudioTrack, MediaInfo } from '../probe.ts';
import type { ProfileSpec, Rendition } from '../renditions.ts';
import type { StoryboardPlan } from '../storyboard.ts';
import type { UploadQueue } from '../uploads.ts';
import { AAC_ARGS } from '../encoders.ts';
import type { AudioPieceInput, ChunkedFormat, ChunkWindow } from './chunked-format.ts';

export type { ChunkWindow } from './chunked-format.ts';

// What an output format says about itself: its folders, its ffmpeg outputs per rendition,
// the playlists it watches, how it publishes, which encoders it takes, how a long input's
// pieces make its part (or that they cannot) and its other rules. One module per format
// (hls.ts, fmp4.ts, mp4.ts, thumbnails.ts); index.ts lists them, and the command, the
// pipeline, the chunked run and the API's checks loop over that list.

export type Encoder = NonNullable<ProfileSpec['encoder']>;

/** A folder under the storage root for one kind of output; `/` alone is the root. */
export interface OutputFolder {
  path: string;
}

/** The single ffmpeg command's plan (command.ts). */
export interface CommandPlan {
  input: string;
  probe: MediaInfo;
  /** Video renditions; none for an audio-only input. */
  renditions: readonly Rendition[];
  /** The output kinds the job asks for, by key (outputs/index.ts). */
  kinds: Readonly<Partial<Record<string, boolean>>>;
  /** Requested HLS segment duration, seconds. */
  segmentSecs: number;
  preset: string;
  threads: number;
  /** The storyboard and poster, one more branch of the split (none for audio-only inputs). */
  thumbnails?: StoryboardPlan | undefined;
  /** One chunk of a long input (transcode/chunked/): what it reads, keeps and numbers. */
  chunk?: ChunkWindow | undefined;
  /** An audio piece of a long input: its tracks' kept packets are the inputs, copied to the audio targets. */
  audioPiece?: AudioPieceInput | undefined;
}

/** Where the command reads an audio track: the input's, or an audio piece's kept packets of it (an input each). */
export function audioSource(plan: CommandPlan, track: AudioTrack): string {
  if (!plan.audioPiece) return `0:a:${track.index}`;
  return `${plan.probe.audioTracks.findIndex((t) => t.index === track.index)}:a:0`;
}

/**
 * A tee target's leading option for an MP4-family muxer (fMP4 segments, the `.m4a`): an audio
 * piece's copied packets come as ADTS, and MP4 holds raw AAC with its config in the header.
 */
export function adtsToMp4(plan: CommandPlan): string {
  return plan.audioPiece ? 'bsfs/a=aac_adtstoasc:' : '';
}

/** The audio targets' codec: the single run's AAC encode, or a copy of an audio piece's packets (already that encode's). */
export function audioCodecArgs(plan: CommandPlan): readonly string[] {
  return plan.audioPiece ? ['-c:a', 'copy'] : AAC_ARGS;
}

/** What publishing needs to know of the encode. */
export interface EncodedMedia {
  outDir: string;
  renditions: readonly Rendition[];
  media: MediaInfo;
  duration: number;
  codecs: CodecsProbes;
}

/** One job once its ladder is planned: what each format's part of it sees. */
export interface OutputRun extends EncodedMedia {
  plan: CommandPlan;
  queue: UploadQueue;
  store: ObjectStore;
  /** Aborted with the job or by a failed upload. */
  signal: AbortSignal;
  /** The job's own cancel. */
  jobSignal: AbortSignal;
  log?: Logger | undefined;
  /** Issue 5 hook: sign the files of the formats that sign (`params.c2pa`). */
  c2pa?: { signer: C2paSigner; inputTitle?: string } | undefined;
}

/** A media playlist ffmpeg writes, whose listed segments go up under `keyDir` during the encode. */
export interface WatchedPlaylist {
  local: string;
  keyDir: string;
}

/** One format's part of a job, from before the encode to its published result. */
export interface OutputPart<Result> {
  watched?: readonly WatchedPlaylist[];
  /** Called every second during the encode. */
  poll?(onError: (err: unknown) => void): void;
  /** After the encode: uploads what is left and says what landed where. */
  publish(): Promise<Result>;
}

/**
 * An output format. `Key` names its folder in the job's `outputs` (when `requested`) and its
 * result in `output.transcodeFile`; paths in the command are relative to the job's output
 * folder, which is ffmpeg's working directory.
 */
export interface OutputFormat<Key extends string = string, Result = unknown, Requested extends boolean = boolean> {
  key: Key;
  /** How messages name it: "HLS with TS segments". */
  label: string;
  /** Asked for as `outputs.<key>` with a folder; else it goes beside the renditions of an HLS tree. */
  requested: Requested;
  /** The profile encoders its files can carry; none: it carries no renditions. */
  encoders?: readonly Encoder[];
  /** Folder names beside the renditions that no rendition may take. */
  reservedNames?: readonly string[];
  /** Its files can be signed with C2PA (issue 5). */
  signs?: boolean;
  /** An HLS tree: it lists the subtitle tracks, and thumbnails go beside its renditions. */
  tree?: boolean;
  /** The container of its segments, for the rules that depend on it. */
  segments?: 'ts' | 'fmp4';
  writes(plan: CommandPlan): boolean;
  /** The folders ffmpeg writes into for it. */
  dirs(plan: CommandPlan): string[];
  /** Its target in the tee muxer of each rendition's encode. */
  videoTarget?(plan: CommandPlan, r: Rendition, cutAt: number): string;
  /** Whether it takes the input's audio muxed into each rendition. */
  muxesAudio?(plan: CommandPlan): boolean;
  /** Its target in the tee muxer of an audio track's own encode, when it lists the track alone. */
  audioTarget?(plan: CommandPlan, track: AudioTrack, cutAt: number): string | undefined;
  /** Chains fed by a branch of the split (labelled `inputLabel`) and the outputs they write. */
  branch?(plan: CommandPlan, inputLabel: string): { filters: string[]; outputArgs: string[] };
  /** Outputs of its own, written after the renditions and the audio tracks. */
  outputArgs?(plan: CommandPlan): string[];
  /** Starts its part of a job, whose files go under `prefix` in storage. */
  open(run: OutputRun, prefix: string): OutputPart<Result>;
  /**
   * How the pieces of a chunked run (transcode/chunked/) make its part of a long input; false:
   * they cannot, and a job that asks for it is encoded in one run, whatever its length.
   */
  chunked: ChunkedFormat<Result> | false;
}
