import { MediaplaneError } from '../../lib/errors.ts';
import type { UploadGrant } from '../types.ts';

// Where the bytes of an unfinished upload wait until the upload is whole (UploadStaging,
// ../staging.ts, keeps the rules: limits, the owner's allowance, newest request wins). Two
// kinds, as tusd's DataStores: a folder in this process's data directory (folder.ts, the
// embedded default) and the built-in store's bucket (bucket.ts, when the built-in store is
// S3-protocol), which any API process can read and add to.

/** A tus PATCH whose Upload-Offset is not where the upload stands (tus 1.0: 409 Conflict). */
export class UploadOffsetError extends MediaplaneError {
  readonly code = 'upload_offset_mismatch';
  readonly statusCode = 409;
}

/** An upload as staged: bytes received, the length declared at creation (none for a direct PUT), expiry. */
export interface StagedUpload {
  offset: number;
  length: number | undefined;
  expiresAt: Date;
}

export interface StagingArea {
  /** Starts the upload of `grant`'s asset anew, empty; whatever was staged for it before goes. */
  create(grant: UploadGrant, record: { length: number | undefined; expiresAt: Date }): Promise<void>;
  /** Where the upload stands, or undefined when nothing (or only half a record) is staged for it. */
  status(assetId: string): Promise<StagedUpload | undefined>;
  /**
   * Adds `body` to the upload, which stood at `from` when it was checked. A PayloadTooLargeError
   * out of `body` takes back every byte of it; any other failure keeps what arrived, so the
   * client resumes from there. Returns the new offset. An UploadOffsetError when the upload
   * moved on meanwhile (a request to another process).
   */
  append(assetId: string, from: StagedUpload, body: AsyncIterable<Buffer>): Promise<number>;
  /** Puts the whole upload into the built-in store at `key` (the asset's source); nothing staged is left of it. */
  store(assetId: string, key: string): Promise<void>;
  /** Frees what is staged for the asset; nothing staged is no error. */
  drop(assetId: string): Promise<void>;
  /** The assets with something staged (a record, bytes, or both). */
  ids(): Promise<string[]>;
  /** When the upload's URL expires, as its record says; undefined when the record is missing or half-written. */
  expiry(assetId: string): Promise<Date | undefined>;
}
