// Assets (issue #27): videos the service keeps in its built-in store and plays back.
export type {
  AssetEventName,
  AssetPhase,
  AssetSource,
  AssetSpec,
  RecordingArchive,
  StagedBytes,
  UploadGrant,
  UploadSessions,
} from './types.ts';
export { ASSET_EVENT_NAMES, ASSET_PHASES } from './types.ts';
export { assetPlaylistKey, assetPrefix, assetSourceKey } from './keys.ts';
export {
  AssetStore,
  StagedBytesLimitError,
  UPLOAD_EXPIRED_MESSAGE,
  type AssetOutput,
  type AssetRow,
  type AssetStoreOptions,
  type AssetTrack,
  type CreateAsset,
} from './store.ts';
export {
  BucketStagingArea,
  FolderStagingArea,
  stagingAreaFor,
  UploadOffsetError,
  UploadStaging,
  type StagedUpload,
  type StagingArea,
} from './staging.ts';
export { uploadSweepJobs } from './upload-sweep.ts';
export { createUploadHandler, UPLOAD_TASK_TYPE, type UploadHandlerDeps } from './handler.ts';
export { AssetRecordings, type AssetRecordingsOptions, type RecordedSession } from './recording.ts';
export { assetFinishSteps } from './process.ts';
export { assetOutputs, ProcessingSpec, processingProblems, processingSpecOf } from './processing.ts';
export { CLIP_TASK_TYPE, createClipHandler, type ClipHandlerDeps } from './clip.ts';
export { LIVE_CLIP_WAIT_MS, type LiveClipRange } from './live-clip.ts';
export {
  createExportDataHandler,
  createExportHandler,
  createExportHandlers,
  EXPORT_DATA_TASK_TYPE,
  EXPORT_TASK_TYPE,
  startExport,
  startExportData,
  type ExportDataParams,
  type ExportHandlerDeps,
  type ExportParams,
  type ExportTarget,
  type IpfsExportOutput,
} from './export.ts';
export { RESERVED_HEADERS } from './export-http.ts';
