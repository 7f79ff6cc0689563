import { type AssetOutput, type ProcessingSpec, processingSpecOf, UPLOAD_TASK_TYPE } from '../../assets/index.ts';
import { mediaUrl } from '../public-base.ts';
import { withoutQuery } from './asset.ts';
import type { TaskWireShape } from './task.ts';

// How an `upload` Task shows itself (spec/API.md section C): Livepeer's Task, whose
// `params.upload` is {url?, c2pa?, profiles?, targetSegmentSizeSecs?} and whose
// `output.upload` is open (the SDK's TaskUpload keeps any field). The task makes the asset
// its params name: `outputAssetId`.

export { UPLOAD_TASK_TYPE };

/**
 * The params the asset routes (api/asset-routes.ts) give an upload task: the asset's
 * processing spec (assets/processing.ts) and its input; the asset store adds assetId and playbackId.
 */
export type UploadTaskParams = ProcessingSpec & {
  assetId?: string;
  playbackId?: string;
  /** The URL to fetch; for a direct upload the store's source key (`key`), not shown. */
  input?: { url?: string; key?: string };
};

export const uploadTaskWire: TaskWireShape = {
  params: (stored) => {
    const p = stored as UploadTaskParams;
    const upload: Record<string, unknown> = {};
    // The URL's query may carry a signature (issue #15): never shown, in any phase.
    if (typeof p.input?.url === 'string') upload.url = withoutQuery(p.input.url);
    return { upload: { ...upload, ...processingSpecOf(p) } };
  },
  // What the asset got (its full form is GET /api/asset/{outputAssetId}); no store key shows.
  output: (stored, _task, base) => {
    const { videoSpec, size, hash, hls } = stored as Partial<AssetOutput>;
    const upload: Record<string, unknown> = { videoSpec, size, hash };
    if (hls) upload.playbackUrl = mediaUrl(base, hls.key);
    return { upload };
  },
  assets: (stored) => (typeof stored.assetId === 'string' ? { outputAssetId: stored.assetId } : {}),
};
