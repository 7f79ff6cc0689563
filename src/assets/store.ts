import type { Db } from '../db/index.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import type { TaskRow, TaskStore } from '../tasks/index.ts';
import type { AssetPhase, AssetSource, AssetSpec, UploadGrant, UploadSessions } from './types.ts';

/** What a finished `upload` (or `clip`) task returns, copied onto its asset when the task completes. */
export interface AssetOutput {
  videoSpec: { format?: string; duration?: number; bitrate?: number; tracks: Record<string, unknown>[] };
  size: number;
  hash: { hash: string; algorithm: 'md5' | 'sha256' }[];
  /** Keys in the built-in store. */
  hls?: { key: string };
  mp4?: { key: string; width?: number; height?: number; bitrate?: number; size?: number }[];
  thumbnails?: { key: string; poster?: string };
  [extra: string]: unknown;
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
  /** The task's progress while the asset is processing. */
  progress: number | null;
  task_id: string;
  source: AssetSource;
  spec: AssetSpec;
  playback_policy: Record<string, unknown> | null;
  creator_id: unknown;
  output: AssetOutput | null;
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
  /** The task type that makes the asset, and its params (the asset's id is added to them). */
  task: { type: string; params: Record<string, unknown> };
  /** A direct upload: the task waits (`pending`) for the bytes, and an upload token is made. */
  upload?: boolean;
}

export class AssetStore implements UploadSessions {
  constructor(_db: Db, _o: { tasks: TaskStore; store: BuiltinStore; uploadExpiryMs: number }) {}
  create(_c: CreateAsset): Promise<{ asset: AssetRow; task: TaskRow; uploadToken?: string }> {
    throw new Error('TODO');
  }
  get(_owner: string, _id: string): Promise<AssetRow> {
    throw new Error('TODO');
  }
  list(
    _owner: string,
    _o: { limit: number; cursor?: string | undefined },
  ): Promise<{ assets: AssetRow[]; next: string | null }> {
    throw new Error('TODO');
  }
  update(
    _owner: string,
    _id: string,
    _p: { name?: string; playbackPolicy?: Record<string, unknown> | null },
  ): Promise<AssetRow> {
    throw new Error('TODO');
  }
  remove(_owner: string, _id: string): Promise<void> {
    throw new Error('TODO');
  }
  byPlaybackId(_playbackId: string): Promise<AssetRow | undefined> {
    throw new Error('TODO');
  }
  grant(_token: string): Promise<UploadGrant | undefined> {
    throw new Error('TODO');
  }
  finish(_assetId: string, _size: number): Promise<boolean> {
    throw new Error('TODO');
  }
  expire(_limit: number): Promise<string[]> {
    throw new Error('TODO');
  }
}
