// An asset's export to IPFS as the asset page shows it. The contract keeps `asset.storage` an
// open object (Livepeer's shape, written by the database's trigger rather than by a typed
// renderer), so its few fields are read here with checks instead of trusted.

import type { Asset } from './wire.ts';

export interface AssetExport {
  phase?: string;
  errorMessage?: string;
  cid?: string;
  gatewayUrl?: string;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

export function assetExport(a: Asset): AssetExport {
  const storage = obj(a.storage);
  const status = obj(storage.status);
  const ipfs = obj(storage.ipfs);
  const out: AssetExport = {};
  const fields = { phase: status.phase, errorMessage: status.errorMessage, cid: ipfs.cid, gatewayUrl: ipfs.gatewayUrl };
  for (const [k, v] of Object.entries(fields)) {
    const s = str(v);
    if (s !== undefined) out[k as keyof AssetExport] = s;
  }
  return out;
}
