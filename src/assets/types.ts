// The assets domain's own words (issue #27): an asset is a video the service keeps in its
// built-in store (storage/builtin/) and plays back. Its phase follows the task that makes it
// (an `upload` task now, a `clip` task in issue #28) through a trigger in the database
// (migration 010), so every way a task changes (claim, failure, retry, cancel, reap) moves
// its asset in the same transaction, with the asset's webhook event in the outbox.

import type { Queryable } from '../db/index.ts';
import type { TaskKey } from '../tasks/index.ts';
import type { ProcessingSpec } from './processing.ts';

export const ASSET_PHASES = ['uploading', 'waiting', 'processing', 'ready', 'failed', 'deleting', 'deleted'] as const;
export type AssetPhase = (typeof ASSET_PHASES)[number];

/** The webhook events of assets (spec/API.md section C): event-names.ts. */
export { ASSET_EVENT_NAMES, type AssetEventName } from './event-names.ts';

/** Where an asset's bytes came from (Livepeer's `source`). */
export type AssetSource =
  | { type: 'url'; url: string }
  | { type: 'directUpload' }
  | { type: 'clip'; sourceId: string; playbackId: string; assetId?: string; sessionId?: string }
  /** A live session's recording: the asset's id is the session's. */
  | { type: 'recording'; sessionId: string };

/**
 * A live session's source as the live domain archives it in the built-in store while it
 * arrives (main.ts gives the live archive): recordings and clips of a live stream read it.
 */
export interface RecordingArchive {
  /**
   * Writes the session's archived source as one MP4 file at `dest`: all of it, or the parts
   * that overlap [fromMs, toMs] (wall clock), from the keyframe at or before `fromMs`. Runs
   * (a reconnect, a ladder restart) are joined in order without encoding. Undefined when
   * nothing is archived there.
   */
  extract(o: {
    sessionId: string;
    fromMs?: number | undefined;
    toMs?: number | undefined;
    dest: string;
    signal: AbortSignal;
  }): Promise<
    | {
        startWallMs: number;
        durationSecs: number;
        /**
         * Where each run begins: its wall clock (ms) and its offset in the file (s). Runs are
         * joined end to end, so a reconnect's gap is not in the file; absent: one run.
         */
        runs?: { wallStartMs: number; startSecs: number }[];
      }
    | undefined
  >;
  /** Wall clock (ms) up to which the session's source is archived (its newest part's end); undefined: nothing yet. */
  archivedUntil(sessionId: string): Promise<number | undefined>;
}

/** What the owner asked of the asset's processing, as the asset keeps it (processing.ts, the one schema). */
export type AssetSpec = ProcessingSpec;

/**
 * The access an upload URL grants (spec/API.md section C): one asset, until `expiresAt`.
 * The token itself is never stored, only its hash.
 */
export interface UploadGrant {
  assetId: string;
  playbackId: string;
  taskId: string;
  owner: string;
  expiresAt: Date;
}

/** The asset side of an upload URL, as the upload routes (api/) and staging (assets/uploads) use it. */
export interface UploadSessions {
  /**
   * The grant `token` names while its upload may still take bytes; undefined when the token
   * is wrong, expired, already finished, or its asset deleted (the routes answer 404 alike).
   */
  grant(token: string): Promise<UploadGrant | undefined>;
  /**
   * The upload is whole and in the built-in store at the asset's source key: its task is
   * queued. False when the upload can no longer finish (it expired, or the asset was deleted).
   */
  finish(assetId: string, size: number): Promise<boolean>;
  /**
   * Fails up to `limit` uploads past their expiry that never finished (their task fails
   * with words saying so, and the asset with it); returns their asset ids, so the bytes they
   * staged can be freed.
   */
  expire(limit: number): Promise<string[]>;
  /**
   * Of `assetIds`, those whose upload can take no more bytes (finished, expired, its asset
   * deleted or failed): what a process still stages for them is a leftover.
   */
  ended(assetIds: readonly string[]): Promise<string[]>;
}

/**
 * Each owner's allowance of staged bytes (MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER), kept
 * in the database so that every API process counts against the same total.
 */
export interface StagedBytes {
  /**
   * Sets what the unfinished upload of `assetId` holds of its owner's allowance: as much as
   * fits up to `atMost`, at least `atLeast`; returns what it holds now. A StagedBytesLimitError
   * when not even `atLeast` fits beside the owner's other unfinished uploads; a NotFoundError
   * when the upload can no longer take bytes.
   */
  stage(assetId: string, bytes: { atLeast: number; atMost: number }): Promise<number>;
  /** The upload holds nothing of the allowance any more (its bytes were freed); an ended upload is no error. */
  unstage(assetId: string): Promise<void>;
}

/** What a finished `upload` (or `clip`) task returns, copied onto its asset when the task completes. */
export interface AssetOutput {
  /** 'audio' when the source had no video; the trigger copies it onto the asset. */
  type: 'video' | 'audio';
  /** As Livepeer's SDK models it (components/asset.ts VideoSpec): seconds, bits per second. */
  videoSpec: { format?: string; duration?: number; bitrate?: number; tracks: AssetTrack[] };
  /** Bytes of the source. */
  size: number;
  hash: { hash: string; algorithm: 'md5' | 'sha256' }[];
  /** The source in the built-in store (`asset/<playbackId>/source`): the asset's downloadUrl. */
  source: { key: string };
  /** Keys in the built-in store. */
  hls?: { key: string };
  mp4?: { key: string; width?: number; height?: number; bitrate?: number; size?: number }[];
  /** The storyboard (`key`, WebVTT) and the poster image (`poster`). */
  thumbnails?: { key: string; poster?: string };
  [extra: string]: unknown;
}

/** One track of the source, as Livepeer's SDK models it (components/asset.ts Tracks). */
export interface AssetTrack {
  type: 'video' | 'audio';
  codec: string;
  startTime?: number;
  duration?: number;
  bitrate?: number;
  width?: number;
  height?: number;
  pixelFormat?: string;
  fps?: number;
  channels?: number;
  sampleRate?: number;
  bitDepth?: number;
}

/** An asset as stored, with its task's progress. */
export interface AssetRow {
  id: string;
  owner: string;
  project_id: string;
  playback_id: string;
  name: string;
  type: 'video' | 'audio';
  phase: AssetPhase;
  error_message: string | null;
  /** The task's progress while the asset is processing (null in every other phase). */
  progress: number | null;
  /** When its task's early playlists first played (its HLS master plays while processing); null until then. */
  playable_at: Date | null;
  task_id: string;
  source: AssetSource;
  spec: AssetSpec;
  playback_policy: Record<string, unknown> | null;
  creator_id: unknown;
  output: AssetOutput | null;
  /**
   * Its IPFS export (issue #28), as Livepeer's `asset.storage`: {ipfs?: {cid, url, gatewayUrl,
   * nftMetadata?, spec, updatedAt}, status: {phase, errorMessage?, tasks}}; null until exported.
   * Written by the trigger of migration 012 as its `export` tasks change (assets/export.ts).
   */
  storage: Record<string, unknown> | null;
  created_at: Date;
  updated_at: Date;
}

export interface CreateAsset {
  owner: string;
  projectId: string;
  name: string;
  source: AssetSource;
  spec: AssetSpec;
  playbackPolicy?: Record<string, unknown> | undefined;
  creatorId?: unknown;
  requesterId: string | null;
  maxQueuedPerOwner: number;
  /** The API key that asks (usage per key); its limits admit the asset's task. */
  key?: TaskKey | undefined;
  /**
   * The task type that makes the asset, and its params. The store adds `assetId` and
   * `playbackId` to them, and for a direct upload `input: {key}` (the source's key).
   */
  task: { type: string; params: Record<string, unknown> };
  /** A direct upload: the task waits (`pending`) for the bytes, and an upload token is made. */
  upload?: boolean;
  /** The asset's id when the caller names it (a live session's recording has the session's). */
  id?: string | undefined;
  /** More to write in the asset's transaction (a recording's `recording.waiting` event). */
  also?: ((q: Queryable) => Promise<void>) | undefined;
}
