import { type AssetOutput, UPLOAD_TASK_TYPE } from '../../assets/index.ts';
import { mediaUrl } from '../public-base.ts';
import { withoutQuery } from './asset.ts';
import type { TaskWireShape } from './task.ts';

// How an `upload` Task shows itself (spec/API.md section C): Livepeer's Task, whose
// `params.upload` is {url?, c2pa?, profiles?, targetSegmentSizeSecs?} and whose
// `output.upload` is open (the SDK's TaskUpload keeps any field). The task makes the asset
// its params name: `outputAssetId`.

export { UPLOAD_TASK_TYPE };

/** The params the asset routes (api/asset-routes.ts) give an upload task; the asset store adds assetId and playbackId. */
export interface UploadTaskParams {
  assetId?: string;
  playbackId?: string;
  /** The URL to fetch; for a direct upload the store's source key (`key`), not shown. */
  input?: { url?: string; key?: string };
  staticMp4?: boolean;
  profiles?: unknown[];
  c2pa?: boolean;
  targetSegmentSizeSecs?: number;
}

export const uploadTaskWire: TaskWireShape = {
  params: (stored) => {
    const p = stored as UploadTaskParams;
    const upload: Record<string, unknown> = {};
    // The URL's query may carry a signature (issue #15): never shown, in any phase.
    if (typeof p.input?.url === 'string') upload.url = withoutQuery(p.input.url);
    if (p.staticMp4 !== undefined) upload.staticMp4 = p.staticMp4;
    if (p.profiles) upload.profiles = p.profiles;
    if (p.c2pa !== undefined) upload.c2pa = p.c2pa;
    if (p.targetSegmentSizeSecs !== undefined) upload.targetSegmentSizeSecs = p.targetSegmentSizeSecs;
    return { upload };
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
