// The API's shapes the console reads (spec/API.md section C, docs/assets.md): only the
// fields it shows, all optional where the API may leave them out.

export type AssetPhase = 'uploading' | 'waiting' | 'processing' | 'ready' | 'failed' | 'deleting' | 'deleted';

export interface Track {
  type: 'video' | 'audio';
  codec?: string;
  width?: number;
  height?: number;
  fps?: number;
  channels?: number;
  sampleRate?: number;
  bitrate?: number;
}

export interface Asset {
  id: string;
  type: 'video' | 'audio';
  name: string;
  playbackId: string;
  playbackUrl?: string;
  downloadUrl?: string;
  source: { type: string; url?: string; sourceId?: string };
  createdAt: number;
  status: { phase: AssetPhase; updatedAt: number; progress?: number; errorMessage?: string };
  videoSpec?: { format?: string; duration?: number; bitrate?: number; tracks?: Track[] };
  size?: number;
  playbackPolicy?: { type: string } | null;
  storage?: {
    ipfs?: { cid?: string; url?: string; gatewayUrl?: string };
    status?: { phase?: string; errorMessage?: string };
  };
}

export interface PlaybackSource {
  hrn: 'HLS (TS)' | 'MP4' | 'Thumbnails' | 'Thumbnail (JPEG)';
  type: string;
  url: string;
  size?: number;
  width?: number;
  height?: number;
  bitrate?: number;
}

export interface PlaybackInfo {
  type: string;
  meta: { playbackPolicy?: { type: string }; source: PlaybackSource[] };
}

export interface TaskRef {
  id: string;
  type?: string;
  status?: { phase: string; progress?: number; errorMessage?: string };
  outputAssetId?: string;
}

/** An entry of GET /api/ledger (docs/llm.md "Pricing and credits"): what the chat's cost panel shows. */
export interface LedgerEntry {
  kind: 'charge' | 'credit';
  status: 'reserved' | 'settled' | 'released';
  amountUsd: number;
  requestId: string | null;
  maxTokens: number | null;
  completionTokens: number | null;
  pricePerToken: number | null;
}

export interface Ledger {
  owner: string;
  balanceUsd: number;
  entries: LedgerEntry[];
}

/** An asset whose phase still changes by itself. */
export function settling(a: Asset): boolean {
  return !['ready', 'failed', 'deleted'].includes(a.status.phase);
}
