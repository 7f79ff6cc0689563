import {
  EXPORT_DATA_TASK_TYPE,
  EXPORT_TASK_TYPE,
  type ExportDataParams,
  type ExportParams,
  type IpfsExportOutput,
} from '../../assets/index.ts';
import { withoutQuery } from './asset.ts';
import type { TaskWireShape } from './task.ts';

// How `export` and `export-data` Tasks show themselves (issue #28): Livepeer's Task, whose
// `params.export` is {custom: {url, method, headers?}} or {ipfs: {...}} and `output.export` is
// {ipfs?: {videoFileCid, videoFileUrl?, videoFileGatewayUrl?, nftMetadataCid?, ...}}; whose
// `params.exportData` is {content, ipfs?, type?, id?} and `output.exportData` {ipfs?: {cid}}
// (the SDK's components/task.ts). No secret shows in any phase: a custom export's headers and a
// proof are left out, and the URL's query (where a presigned URL keeps its signature) too.

export { EXPORT_DATA_TASK_TYPE, EXPORT_TASK_TYPE };

export const exportTaskWire: TaskWireShape = {
  params: (stored) => {
    const p = stored as Partial<ExportParams>;
    if (p.custom) return { export: { custom: { url: withoutQuery(p.custom.url), method: p.custom.method } } };
    const { credentials: _secret, ...spec } = p.ipfs ?? {};
    return { export: { ipfs: spec } };
  },
  output: (stored) => {
    const ipfs = (stored as Partial<IpfsExportOutput>).ipfs;
    if (!ipfs) return { export: {} };
    const meta = ipfs.nftMetadata;
    return {
      export: {
        ipfs: {
          videoFileCid: ipfs.cid,
          videoFileUrl: ipfs.url,
          videoFileGatewayUrl: ipfs.gatewayUrl,
          ...(meta
            ? { nftMetadataCid: meta.cid, nftMetadataUrl: meta.url, nftMetadataGatewayUrl: meta.gatewayUrl }
            : {}),
        },
      },
    };
  },
  // The asset it reads (GET /api/asset/{inputAssetId} shows `storage.ipfs` after an IPFS export).
  assets: (stored) => (typeof stored.assetId === 'string' ? { inputAssetId: stored.assetId } : {}),
};

export const exportDataTaskWire: TaskWireShape = {
  params: (stored) => {
    const p = stored as Partial<ExportDataParams>;
    const exportData: Record<string, unknown> = { content: p.content ?? {}, ipfs: {} };
    if (p.type !== undefined) exportData.type = p.type;
    if (p.id !== undefined) exportData.id = p.id;
    return { exportData };
  },
  // Livepeer shows the CID; the ipfs:// and gateway URLs come beside it (the SDK keeps only `cid`).
  output: (stored) => {
    const ipfs = (stored as Partial<{ ipfs: IpfsExportOutput['ipfs'] }>).ipfs;
    return { exportData: ipfs ? { ipfs: { cid: ipfs.cid, url: ipfs.url, gatewayUrl: ipfs.gatewayUrl } } : {} };
  },
};
