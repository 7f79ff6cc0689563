// Assets (issue #27): videos the service keeps in its built-in store and plays back.
export type { AssetPhase, AssetSource, AssetSpec, UploadGrant, UploadSessions } from './types.ts';
export { ASSET_PHASES } from './types.ts';
export { assetPrefix, assetSourceKey } from './keys.ts';
export { AssetStore, type AssetRow, type AssetOutput, type CreateAsset } from './store.ts';
export { UploadStaging } from './staging.ts';
export { createUploadHandler, UPLOAD_TASK_TYPE } from './handler.ts';
