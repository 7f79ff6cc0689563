// The assets domain's own words (issue #27): an asset is a video the service keeps in its
// built-in store (storage/builtin/) and plays back. Its phase follows the task that makes it
// (an `upload` task now, a `clip` task in issue #28) through a trigger in the database
// (migration 010), so every way a task changes (claim, failure, retry, cancel, reap) moves
// its asset in the same transaction, with the asset's webhook event in the outbox.

export const ASSET_PHASES = ['uploading', 'waiting', 'processing', 'ready', 'failed', 'deleting', 'deleted'] as const;
export type AssetPhase = (typeof ASSET_PHASES)[number];

/** Where an asset's bytes came from (Livepeer's `source`). */
export type AssetSource =
  | { type: 'url'; url: string }
  | { type: 'directUpload' }
  | { type: 'clip'; sourceId: string; playbackId: string };

/** What the owner asked of the asset's processing. */
export interface AssetSpec {
  staticMp4?: boolean;
  profiles?: unknown[];
  c2pa?: boolean;
}

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
}
