import type { InputSpec, StorageTarget } from '../storage/index.ts';

// Transcoding's own words for a job and its result (issue #16): the API edge maps its request
// to a TranscodeJob (api/contract/transcode.ts), so nothing here reads a wire schema.

/** A folder under the storage root for one kind of output; `/` alone is the root. */
export interface OutputFolder {
  path: string;
}

/** Which outputs to write, each under its folder: HLS with TS segments, MP4s, HLS with fMP4 segments. */
export interface OutputFolders {
  hls?: OutputFolder;
  mp4?: OutputFolder;
  fmp4?: OutputFolder;
}

/** One rendition asked for by the caller; without any, ladder.ts plans one from the source. */
export interface ProfileSpec {
  name: string;
  width: number;
  height: number;
  /** Bits per second. */
  bitrate: number;
  fps?: number;
  fpsDen?: number;
  /** Keyframe interval in seconds as a decimal string, or "intra" (every frame a keyframe). */
  gop?: string;
  profile?: 'H264Baseline' | 'H264Main' | 'H264High' | 'H264ConstrainedHigh';
  encoder?: 'H.264' | 'HEVC' | 'AV1' | 'VP8' | 'VP9';
  /** CRF, 0 to 51. */
  quality?: number;
}

/**
 * What the transcode handler runs. A type, not an interface: the queue stores it as a JSON
 * object (tasks/ takes `Record<string, unknown>` params).
 */
export type TranscodeJob = {
  input: InputSpec;
  storage: StorageTarget;
  outputs: OutputFolders;
  profiles?: readonly ProfileSpec[];
  targetSegmentSizeSecs?: number;
  /** Sign every MP4 with C2PA (issue 5). */
  c2pa?: boolean;
};

/** One rendition as it landed in storage (extra fields the spec allows). */
export interface RenditionOutput {
  name: string;
  path: string;
  width: number;
  height: number;
  bitrate: number;
  size: number;
  signed?: boolean;
}

/** An audio-only file or rendition: an audio-only input's `audio.m4a`, an alternate audio track. */
export interface AudioOutput {
  name: string;
  path: string;
  bitrate: number;
  size: number;
  language?: string;
  default?: boolean;
  signed?: boolean;
}

/** A subtitle track as a rendition of an HLS tree: its media playlist and its WebVTT file. */
export interface SubtitleOutput {
  path: string;
  file: string;
  language?: string;
  default: boolean;
}

/** One HLS tree (TS or fMP4 segments): its master playlist and what the master lists. */
export interface HlsOutput {
  path: string;
  renditions?: RenditionOutput[];
  audio?: AudioOutput[];
  subtitles?: SubtitleOutput[];
}

/** What a job produced: the Task's `output.transcodeFile` (spec/API.md). */
export interface TranscodeFileOutput {
  baseUrl?: string;
  hls?: HlsOutput;
  mp4?: (RenditionOutput | AudioOutput)[];
  /** The fMP4 (CMAF) tree, with its DASH manifest over the same segments. */
  fmp4?: HlsOutput & { dash?: string };
  /** The WebVTT storyboard (`#xywh=` cues into JPEG sprite sheets) and the poster image. */
  thumbnails?: { path: string; poster: string };
  input_video: { duration: number; size: number };
  [extra: string]: unknown;
}
