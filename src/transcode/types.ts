import type { InputSpec, StorageTarget } from '../storage/index.ts';
import type { OutputFolders, OutputsByKind } from './outputs/index.ts';
import type { ProfileSpec } from './renditions.ts';

// Transcoding's own words for a job and its result (issue #16): the API edge maps its request
// to a TranscodeJob (api/contract/transcode.ts), so nothing here reads a wire schema. The
// output kinds come from the list of formats (outputs/index.ts, issue #26).

/**
 * What the transcode handler runs. A type, not an interface: the queue stores it as a JSON
 * object (tasks/ takes `Record<string, unknown>` params).
 */
export type TranscodeJob = {
  input: InputSpec;
  /** Absent: the built-in store (issue #27). */
  storage?: StorageTarget;
  outputs: OutputFolders;
  profiles?: readonly ProfileSpec[];
  targetSegmentSizeSecs?: number;
  /** Sign every MP4 with C2PA (issue 5). */
  c2pa?: boolean;
  /** Issue #31: the per-title ladder for the default ladder's rungs; absent: MEDIAPLANE_PER_TITLE. */
  perTitle?: boolean;
};

/**
 * What a job produced: the Task's `output.transcodeFile` (spec/API.md): each format's result
 * under its key (`hls`, `fmp4` with its DASH manifest, `mp4`, `thumbnails`), and the input's.
 */
export type TranscodeFileOutput = OutputsByKind & {
  baseUrl?: string;
  input_video: { duration: number; size: number };
  [extra: string]: unknown;
};
